// Where the CPU engine switches between Highway's vqsort and our radix sort
// (core/cpu/vqsort_words.h), per kind of CPU. The crossovers differ by the
// SIMD level vqsort runs at: on the AVX-512 development VM (AMD Zen 4)
// vqsort's 32-bit path is slow and the radix sort wins from 512 keys; on
// the AVX2 one (AMD Zen 3) vqsort wins up to about 2^21 keys
// (docs/benchmarks.md "CPU tuning"). Chosen once per process, from the
// widest SIMD target Highway dispatches to, or pinned (sortd
// --cpu_sort_tuning); the startup line names it. Both routes give the same
// bits, so a tuning changes speed only.
#ifndef SORTD_CORE_CPU_CPU_TUNING_H_
#define SORTD_CORE_CPU_CPU_TUNING_H_

#include <cstddef>
#include <optional>
#include <string_view>

namespace sortd::cpu {

enum class CpuTuning {
  kAuto,    // this CPU's: kAvx512 where Highway dispatches to AVX-512, else kAvx2
  kAvx512,  // measured on AMD Zen 4 (AVX-512)
  kAvx2,    // measured on AMD Zen 3 (AVX2 only)
};

// Single-thread crossovers of one tuning: at and above each size the radix
// sort runs, below it vqsort. (Argsorts, pairs and 64-bit keys cross at the
// same sizes on both VMs: core/cpu/vqsort_words.h.)
struct CpuCrossovers {
  // 4-byte keys only (and the chunks of the parallel partition sort).
  size_t radix_min_keys32;
};

const char* CpuTuningName(CpuTuning tuning);
// "auto", "avx512" or "avx2"; nullopt for anything else.
std::optional<CpuTuning> ParseCpuTuning(std::string_view name);

// kAvx512 or kAvx2 for the CPU this process runs on.
CpuTuning CpuTuningForThisCpu();

// Process-wide: every later sort uses `tuning` (kAuto: this CPU's). For
// sortd's flag, tests and benchmarks; not meant to change while sorts run
// (a sort in flight may use either; both give the same bits).
void PinCpuTuning(CpuTuning tuning);

// The tuning in force (never kAuto) and its crossovers.
CpuTuning ActiveCpuTuning();
const CpuCrossovers& ActiveCpuCrossovers();

}  // namespace sortd::cpu

#endif  // SORTD_CORE_CPU_CPU_TUNING_H_
