// Where the CPU engine switches between Highway's vqsort and our radix sort
// (core/cpu/vqsort_words.h), per kind of CPU. The crossovers differ with
// how fast vqsort's 32-bit path runs there: on AMD Zen 4 (AVX-512, whose
// compress instructions are slow) the radix sort wins from 512 keys; on AMD
// Zen 3 (AVX2 only) vqsort wins up to about 2^21 keys; on an Intel Xeon with
// AVX-512, and on AMD Zen 5, vqsort won at every size measured, up to 2^24
// keys (docs/benchmarks.md "CPU tuning"). Chosen once per process from the
// CPU's vendor, family and the widest SIMD target Highway dispatches to, or
// pinned (sortd
// --cpu_sort_tuning); the startup line names it. Both routes give the same
// bits, so a tuning changes speed only.
#ifndef SORTD_CORE_CPU_CPU_TUNING_H_
#define SORTD_CORE_CPU_CPU_TUNING_H_

#include <cstddef>
#include <optional>
#include <string_view>

namespace sortd::cpu {

enum class CpuTuning {
  kAuto,    // this CPU's: kZen4 on AMD family 19h CPUs with AVX-512, kZen5
            // on later AMD ones with AVX-512, kAvx512 on others with AVX-512,
            // else kAvx2
  kZen4,    // radix from 512 keys; measured on AMD Zen 4 (AVX-512)
  kAvx512,  // vqsort at every size; measured on an Intel Xeon (AVX-512)
  kAvx2,    // vqsort below 2^21 keys; measured on AMD Zen 3 (AVX2 only)
  kZen5,    // vqsort at every size, 64-bit argsorts by radix from 256 keys;
            // measured on AMD Zen 5 (AVX-512)
};

// Single-thread crossovers of one tuning: at and above each size the radix
// sort runs, below it vqsort (of the keys, or of packed (key, index)
// words for permutations). 64-bit keys only take vqsort under every
// tuning (core/cpu/vqsort_words.h).
struct CpuCrossovers {
  // 4-byte keys only (and the chunks of the parallel partition sort).
  size_t radix_min_keys32;
  // Pairs sorted together (SortPairsNumeric), against argsort + gather.
  size_t radix_min_pairs;
  // Stable argsort of 4-byte keys, against vqsort of (key << 32 | index).
  size_t radix_min_argsort32;
  // Stable argsort of 8-byte keys, against vqsort of 128-bit words.
  size_t radix_min_argsort64;
};

const char* CpuTuningName(CpuTuning tuning);
// "auto", "zen4", "zen5", "avx512" or "avx2"; nullopt for anything else.
std::optional<CpuTuning> ParseCpuTuning(std::string_view name);

// kZen4, kZen5, kAvx512 or kAvx2 for the CPU this process runs on.
CpuTuning CpuTuningForThisCpu();
// The rule behind it: whether vqsort dispatches to AVX-512 code there, the
// vendor, and the CPU family (CPUID: 19h Zen 3/Zen 4, 1Ah Zen 5).
CpuTuning TuningForCpu(bool avx512, bool amd, unsigned family);

// Process-wide: every later sort uses `tuning` (kAuto: this CPU's). For
// sortd's flag, tests and benchmarks; not meant to change while sorts run
// (a sort in flight may use either; both give the same bits).
void PinCpuTuning(CpuTuning tuning);

// The tuning in force (never kAuto) and its crossovers.
CpuTuning ActiveCpuTuning();
const CpuCrossovers& ActiveCpuCrossovers();

}  // namespace sortd::cpu

#endif  // SORTD_CORE_CPU_CPU_TUNING_H_
