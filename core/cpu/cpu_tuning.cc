#include "core/cpu/cpu_tuning.h"

#include <atomic>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "hwy/targets.h"

namespace sortd::cpu {
namespace {

// Measured one thread, radix against vqsort alone, best of many calls on
// fresh copies of one random array (docs/benchmarks.md "CPU tuning").
// - AMD Zen 4, AVX-512 (development VM; Highway 1.0.3, Release): 4-byte
//   keys radix 2.4 us vs vqsort 3.2 us at 512 keys, 0.6 vs 0.5 us at 64,
//   radix 5-8x faster from 2^16 up. Pairs sorted together against argsort
//   + gather: 256 1.8 vs 1.3 us, 1024 5.6 vs 5.4 us, 4096 22.9 vs 24.7 us,
//   2^16 394 vs 478 us. 32-bit argsort kept in the caller's index buffer
//   (CpuEngine::ArgsortRadix32) against packed words: 2^12 26.7 vs 22.7 us,
//   2^14 110 vs 103 us, 2^16 444 vs 459 us, 2^20 8.9 vs 10.0 ms. 64-bit
//   argsort against 128-bit packed words: even at 128, faster from 256 up
//   (3.1 vs 3.9 us).
constexpr CpuCrossovers kZen4Crossovers{
    /*radix_min_keys32=*/512,
    /*radix_min_pairs=*/2048,
    /*radix_min_argsort32=*/65536,
    /*radix_min_argsort64=*/256,
};
// - Intel Xeon, AVX-512 (the H200 host, 2026-11-29): vqsort/radix time
//   0.31-0.62 from 64 to 2^20 keys, 0.59 at 2^22, 0.66 at 2^24. u32/u32
//   pairs, radix against packed words + gather: 256 3.7 vs 1.3 us, 2^16
//   0.98 vs 0.58 ms, 2^18 2.15 vs 2.63 ms, 2^20 10.6 vs 13.9 ms; u64 keys
//   with u32 values against 128-bit words: 2^16 1.88 vs 1.64 ms, 2^18 5.2
//   vs 7.2 ms.
constexpr CpuCrossovers kAvx512Crossovers{
    /*radix_min_keys32=*/SIZE_MAX,
    /*radix_min_pairs=*/size_t{1} << 17,
    /*radix_min_argsort32=*/size_t{1} << 17,
    /*radix_min_argsort64=*/size_t{1} << 17,
};
// - AMD Zen 3, AVX2 only (development VM, 2026-11-29): vqsort/radix time
//   0.43-0.56 at 64-1024 keys, 0.66 at 2^12, 0.76 at 2^14, 0.84 at
//   2^16-2^18, 0.95 at 2^20, 1.05 at 2^22, 1.08 at 2^24. The permutations
//   crossed as on Zen 4: radix pairs beat packed words + gather from 1024
//   keys (u32/u32 8.1 vs 8.9 us; 2^16 0.57 vs 0.85 ms; u64/u32 against
//   128-bit words 15.2 vs 19.7 us), the 32-bit argsort at 1024-16384 keys
//   measured even through the engine.
constexpr CpuCrossovers kAvx2Crossovers{
    /*radix_min_keys32=*/size_t{1} << 21,
    /*radix_min_pairs=*/2048,
    /*radix_min_argsort32=*/65536,
    /*radix_min_argsort64=*/256,
};

// - AMD Zen 5, AVX-512 (development VM, family 1Ah, 2026-11-29; through
//   the engine, one thread, isolated processes, alternating, three rounds):
//   u32 keys, vqsort against radix, 1024 keys 3 vs 5 us, 2^14 37-38 vs
//   65-70 us, 2^16 0.17-0.19 vs 0.41-0.43 ms, 2^20 3.2-4.1 vs 4.9-6.5 ms,
//   2^24 60-91 vs 83-134 ms (f32 likewise): unlike Zen 4, whose AVX-512
//   compress was what made vqsort slow. u32/u32 pairs, argsort + gather
//   against radix: 4096 19-25 vs 22-37 us, 2^14 79-80 vs 88-89 us, 2^16
//   0.35-0.36 vs 0.36 ms (2^18: both radix). 32-bit argsort, packed words
//   against radix: 2^16 0.31 vs 0.44-0.45 ms. 64-bit argsort, radix against
//   128-bit packed words: 4096 48-50 vs 52-54 us, 2^14 0.19-0.20 vs
//   0.22-0.24 ms, 2^16 0.79 vs 0.96-1.04 ms.
constexpr CpuCrossovers kZen5Crossovers{
    /*radix_min_keys32=*/SIZE_MAX,
    /*radix_min_pairs=*/size_t{1} << 17,
    /*radix_min_argsort32=*/size_t{1} << 17,
    /*radix_min_argsort64=*/256,
};

// The CPU's family (CPUID leaf 1: base family, plus the extended family
// when the base is 0Fh): 19h is Zen 3 and Zen 4, 1Ah Zen 5.
unsigned CpuFamily() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned int eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return 0;
  const unsigned base = (eax >> 8) & 0xf;
  return base == 0xf ? base + ((eax >> 20) & 0xff) : base;
#else
  return 0;
#endif
}

bool AmdCpu() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned int max_leaf = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &max_leaf, &ebx, &ecx, &edx) == 0) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  return std::strcmp(vendor, "AuthenticAMD") == 0;
#else
  return false;
#endif
}

std::atomic<CpuTuning> pinned{CpuTuning::kAuto};

}  // namespace

const char* CpuTuningName(CpuTuning tuning) {
  switch (tuning) {
    case CpuTuning::kAuto: return "auto";
    case CpuTuning::kZen4: return "zen4";
    case CpuTuning::kAvx512: return "avx512";
    case CpuTuning::kAvx2: return "avx2";
    case CpuTuning::kZen5: return "zen5";
  }
  return "?";
}

std::optional<CpuTuning> ParseCpuTuning(std::string_view name) {
  for (CpuTuning t :
       {CpuTuning::kAuto, CpuTuning::kZen4, CpuTuning::kZen5, CpuTuning::kAvx512, CpuTuning::kAvx2}) {
    if (name == CpuTuningName(t)) return t;
  }
  return std::nullopt;
}

CpuTuning TuningForCpu(bool avx512, bool amd, unsigned family) {
  // Highway 1.0.3 has no target of its own for Zen 4 or Zen 5, hence the
  // vendor and the family (AMD CPUs after family 1Ah are taken for Zen 5's
  // kind: not measured).
  if (!avx512) return CpuTuning::kAvx2;
  if (!amd) return CpuTuning::kAvx512;
  return family >= 0x1a ? CpuTuning::kZen5 : CpuTuning::kZen4;
}

CpuTuning CpuTuningForThisCpu() {
  // The targets vqsort may dispatch to on this CPU (Highway's runtime
  // detection); any AVX-512 one means its AVX-512 code runs.
  static const CpuTuning detected =
      TuningForCpu((hwy::SupportedTargets() & (HWY_AVX3 | HWY_AVX3_DL)) != 0, AmdCpu(), CpuFamily());
  return detected;
}

void PinCpuTuning(CpuTuning tuning) { pinned.store(tuning, std::memory_order_relaxed); }

CpuTuning ActiveCpuTuning() {
  const CpuTuning p = pinned.load(std::memory_order_relaxed);
  return p == CpuTuning::kAuto ? CpuTuningForThisCpu() : p;
}

const CpuCrossovers& ActiveCpuCrossovers() {
  switch (ActiveCpuTuning()) {
    case CpuTuning::kZen4: return kZen4Crossovers;
    case CpuTuning::kZen5: return kZen5Crossovers;
    case CpuTuning::kAvx512: return kAvx512Crossovers;
    default: return kAvx2Crossovers;
  }
}

}  // namespace sortd::cpu
