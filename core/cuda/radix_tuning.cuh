// Tuning of the OneSweep radix sort, per key width (sm_90 measured; the
// same values are a portable default). Kernels take these as template
// parameters; no magic numbers inside them.
#ifndef SORTD_CORE_CUDA_RADIX_TUNING_CUH_
#define SORTD_CORE_CUDA_RADIX_TUNING_CUH_

#include <cstdint>

namespace sortd::cuda {

inline constexpr int kRadixBits = 8;
inline constexpr int kRadixBins = 1 << kRadixBits;

template <typename Word>
struct OneSweepTuning;

// kRankChains: independent ranking chains per warp (instruction-level
// parallelism in the otherwise serial match/count loop). kMinBlocks: blocks
// per SM the register allocation must allow (occupancy).
template <>
struct OneSweepTuning<uint32_t> {
  static constexpr int kBlockThreads = 256;
  static constexpr int kItemsPerThread = 16;
  static constexpr int kRankChains = 2;
  static constexpr int kMinBlocks = 4;
};

template <>
struct OneSweepTuning<uint64_t> {
  static constexpr int kBlockThreads = 256;
  static constexpr int kItemsPerThread = 12;
  static constexpr int kRankChains = 2;
  static constexpr int kMinBlocks = 4;
};

struct HistogramTuning {
  static constexpr int kBlockThreads = 512;
  static constexpr int kBlocksPerSm = 4;
  static constexpr int kLoadsPerThread = 8;
};

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_RADIX_TUNING_CUH_
