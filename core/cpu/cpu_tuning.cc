#include "core/cpu/cpu_tuning.h"

#include <atomic>

#include "hwy/targets.h"

namespace sortd::cpu {
namespace {

// Measured one thread on the development VMs, radix against vqsort, best of
// many calls on fresh copies of one random array (docs/benchmarks.md "CPU
// tuning").
// - AVX-512, AMD Zen 4 (Highway 1.0.3, Release): 4-byte keys radix 2.4 us
//   vs vqsort 3.2 us at 512 keys, 0.6 vs 0.5 us at 64, radix 5-8x faster
//   from 2^16 up.
constexpr CpuCrossovers kAvx512Crossovers{
    /*radix_min_keys32=*/512,
};
// - AVX2 only, AMD Zen 3 (2026-11-29): vqsort/radix time 0.43-0.56 at
//   64-1024 keys, 0.66 at 2^12, 0.76 at 2^14, 0.84 at 2^16-2^18, 0.95 at
//   2^20, 1.05 at 2^22, 1.08 at 2^24.
constexpr CpuCrossovers kAvx2Crossovers{
    /*radix_min_keys32=*/size_t{1} << 21,
};

std::atomic<CpuTuning> pinned{CpuTuning::kAuto};

}  // namespace

const char* CpuTuningName(CpuTuning tuning) {
  switch (tuning) {
    case CpuTuning::kAuto: return "auto";
    case CpuTuning::kAvx512: return "avx512";
    case CpuTuning::kAvx2: return "avx2";
  }
  return "?";
}

std::optional<CpuTuning> ParseCpuTuning(std::string_view name) {
  for (CpuTuning t : {CpuTuning::kAuto, CpuTuning::kAvx512, CpuTuning::kAvx2}) {
    if (name == CpuTuningName(t)) return t;
  }
  return std::nullopt;
}

CpuTuning CpuTuningForThisCpu() {
  // The targets vqsort may dispatch to on this CPU (Highway's runtime
  // detection); any AVX-512 one means its AVX-512 code runs.
  static const CpuTuning detected =
      (hwy::SupportedTargets() & (HWY_AVX3 | HWY_AVX3_DL)) != 0 ? CpuTuning::kAvx512 : CpuTuning::kAvx2;
  return detected;
}

void PinCpuTuning(CpuTuning tuning) { pinned.store(tuning, std::memory_order_relaxed); }

CpuTuning ActiveCpuTuning() {
  const CpuTuning p = pinned.load(std::memory_order_relaxed);
  return p == CpuTuning::kAuto ? CpuTuningForThisCpu() : p;
}

const CpuCrossovers& ActiveCpuCrossovers() {
  return ActiveCpuTuning() == CpuTuning::kAvx512 ? kAvx512Crossovers : kAvx2Crossovers;
}

}  // namespace sortd::cpu
