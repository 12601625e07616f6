// Tuning of the OneSweep radix sort, per key width (sm_90 measured; the
// same values are a portable default). Kernels take these as template
// parameters; no magic numbers inside them. bench/gpu_radix_bench.cu
// instantiates alternatives next to these to re-measure them.
#ifndef SORTD_CORE_CUDA_RADIX_TUNING_CUH_
#define SORTD_CORE_CUDA_RADIX_TUNING_CUH_

#include <cstdint>

namespace sortd::cuda {

inline constexpr int kRadixBits = 8;
inline constexpr int kRadixBins = 1 << kRadixBits;

// Chosen by `sortd_gpu_radix_bench --tune` on an H200 (docs/benchmarks.md):
// 3 blocks of 384 threads per SM (56 registers) for keys-only passes, 2 for
// pairs; 256- and 512-thread blocks and 16-21 items were slower.
// One digit pass: kBlockThreads x kItemsPerThread keys per tile (larger
// tiles amortise the per-tile scan and look-back; more items cost
// registers). kMinBlocks: blocks per SM the register allocation must allow.
template <int Threads, int Items, int MinBlocks>
struct OneSweepConfig {
  static constexpr int kBlockThreads = Threads;
  static constexpr int kItemsPerThread = Items;
  static constexpr int kMinBlocks = MinBlocks;
};

// Per key width: one config for keys-only passes, one for passes that
// carry values (more registers live, so other sweet spots).
template <typename KeysConfig, typename PairsConfig>
struct OneSweepPolicy {
  using Keys = KeysConfig;
  using Pairs = PairsConfig;
};

template <typename Word>
struct OneSweepTuning;

template <>
struct OneSweepTuning<uint32_t>
    : OneSweepPolicy<OneSweepConfig<384, 25, 3>, OneSweepConfig<384, 25, 2>> {};

template <>
struct OneSweepTuning<uint64_t>
    : OneSweepPolicy<OneSweepConfig<384, 17, 3>, OneSweepConfig<384, 20, 2>> {};

struct HistogramTuning {
  static constexpr int kBlockThreads = 512;
  static constexpr int kBlocksPerSm = 4;
  static constexpr int kLoadsPerThread = 8;
};

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_RADIX_TUNING_CUH_
