// Tuning of the OneSweep radix sort, per key width and GPU kind (sm_90
// measured; the same values are a portable default). Kernels take these as
// template parameters; no magic numbers inside them. bench/gpu_radix_bench.cu
// instantiates alternatives next to these to re-measure them; the numbers
// behind each choice are in docs/benchmarks.md and docs/benchmarks-history.md.
#ifndef SORTD_CORE_CUDA_RADIX_TUNING_CUH_
#define SORTD_CORE_CUDA_RADIX_TUNING_CUH_

#include <cstddef>
#include <cstdint>

namespace sortd::cuda {

inline constexpr int kRadixBits = 8;
inline constexpr int kRadixBins = 1 << kRadixBits;

// How a warp finds the lanes whose key has the same digit (the peer group
// it ranks as one): kBallot, one ballot per digit bit (8 votes and masks
// per key); kAtomicOr, each lane ORs its bit into a per-warp shared word
// of its digit and reads the group back (one shared atomic, one load, and
// the group leader clears the word: cheaper than the ballots);
// kCountOrder: no matching in the plain kernel; the digit-count atomics'
// return values are the ranks, as in the unstable first pass (the hot-digit
// kernel matches as kAtomicOr). Stable only if a warp's atomicAdd(&word,
// 1) into shared memory returns to the lanes that share a word consecutive
// values in lane order, and a warp's atomics of consecutive keys take
// effect in program order: what sm_90 does, but CUDA does not document.
// So each device is checked before it gets these kernels (RadixRanksFor,
// radix_sort.cuh; docs/architecture.md, "GPU radix sort"); a device that
// fails gets WithMatchedRanks.
enum class RankMatch : int { kBallot, kAtomicOr, kCountOrder };

// How concentrated passes (few distinct digits per warp: few distinct
// keys, skewed bits; kConcentratedDistinct in radix_kernels.cuh) find
// digit groups: kNone, as plain passes; kMatchAny, the match.any
// instruction, whose time grows with the distinct digits in the warp (so
// only where the plan marks a pass concentrated).
enum class ConcentratedRank : int { kNone, kMatchAny };

// One digit pass: kBlockThreads x kItemsPerThread keys per tile (larger
// tiles amortise the per-tile scan and look-back; more items cost
// registers). kMinBlocks: blocks per SM the register allocation must allow.
// kUnstableFirstPass: the first pass of a keys-only sort takes its ranks
// from the digit-count atomics instead of matching peers (see
// OneSweepPassKernel).
// kConcentrated: how the stable passes that the plan marks concentrated
// rank (the same tile and blocks per SM). kStageValues (pairs): the
// tile's values are copied into shared memory asynchronously as the pass
// begins, and each output value is read from there by its key's input
// position, instead of being loaded after the keys are stored and moved
// through shared memory by rank (OneSweepPassKernel; no profile stages
// today). kHotDigit: passes the plan marks hot run the hot-digit kernel
// (kHotShift in radix_kernels.cuh).
template <int Threads, int Items, int MinBlocks, RankMatch Match = RankMatch::kBallot,
          bool UnstableFirstPass = true, ConcentratedRank Concentrated = ConcentratedRank::kMatchAny,
          bool StageValues = false, bool HotDigit = true>
struct OneSweepConfig {
  static constexpr int kBlockThreads = Threads;
  static constexpr int kItemsPerThread = Items;
  static constexpr int kMinBlocks = MinBlocks;
  static constexpr RankMatch kMatch = Match;
  static constexpr bool kUnstableFirstPass = UnstableFirstPass;
  static constexpr ConcentratedRank kConcentrated = Concentrated;
  static constexpr bool kStageValues = StageValues;
  static constexpr bool kHotDigit = HotDigit;
};

// The same config with kStageValues off: where a device cannot give a
// block the staged layout's shared memory (ConfigLauncher).
template <typename C>
using WithoutStagedValues = OneSweepConfig<C::kBlockThreads, C::kItemsPerThread, C::kMinBlocks, C::kMatch,
                                           C::kUnstableFirstPass, C::kConcentrated, false, C::kHotDigit>;

// The same config ranking by match words where it would trust count order
// (RankMatch::kCountOrder -> kAtomicOr).
template <typename C>
using WithMatchedRanksConfig =
    OneSweepConfig<C::kBlockThreads, C::kItemsPerThread, C::kMinBlocks,
                   C::kMatch == RankMatch::kCountOrder ? RankMatch::kAtomicOr : C::kMatch, C::kUnstableFirstPass,
                   C::kConcentrated, C::kStageValues, C::kHotDigit>;

// Per key width: one config for keys-only passes, one for passes that
// carry 4-byte values and one for 8-byte values (more registers live, so
// other sweet spots), and for sorts of at least kLargeTilesMinItems keys
// one for keys-only passes and one for 4-byte values (larger tiles pay
// where there are many of them; by default the same as below that size).
// SmallConfig (void: none), for every pass of sorts of at most
// SmallTilesMaxItems keys, keys-only or pairs: small tiles give such
// sorts blocks for more of the SMs (a pass over few tiles takes as long
// as one block takes over its tile).
inline constexpr size_t kLargeTilesMinItems = size_t{1} << 24;
inline constexpr size_t kSmallTilesMaxItems = size_t{1} << 18;
template <typename KeysConfig, typename PairsConfig, typename WidePairsConfig = PairsConfig,
          typename LargeKeysConfig = KeysConfig, typename LargePairsConfig = PairsConfig,
          typename SmallConfig = void, size_t SmallTilesMaxItems = kSmallTilesMaxItems>
struct OneSweepPolicy {
  using Keys = KeysConfig;
  using Pairs = PairsConfig;
  using WidePairs = WidePairsConfig;
  using LargeKeys = LargeKeysConfig;
  using LargePairs = LargePairsConfig;
  using Small = SmallConfig;
  static constexpr size_t kSmallTilesMaxItems = SmallTilesMaxItems;
  // Small configs have no kernels for 64-bit offsets (ConfigLauncher).
  static_assert(SmallTilesMaxItems < (size_t{1} << 32), "small tiles are for arrays below 2^32 keys");
};

// A policy with every config's ranks matched (WithMatchedRanksConfig): for
// devices whose atomics fail the count-order check.
template <typename C>
struct MatchedRanksOf {
  using type = WithMatchedRanksConfig<C>;
};
template <>
struct MatchedRanksOf<void> {  // no small tiles
  using type = void;
};
template <typename P>
using WithMatchedRanks =
    OneSweepPolicy<WithMatchedRanksConfig<typename P::Keys>, WithMatchedRanksConfig<typename P::Pairs>,
                   WithMatchedRanksConfig<typename P::WidePairs>, WithMatchedRanksConfig<typename P::LargeKeys>,
                   WithMatchedRanksConfig<typename P::LargePairs>, typename MatchedRanksOf<typename P::Small>::type,
                   P::kSmallTilesMaxItems>;

// Small tiles (SmallConfig) of both profiles: 256 x 8 keys, 4 blocks per
// SM (64 registers), up to kSmallTilesMaxItems keys: past 2^18 the regular
// tiles are as fast or faster.
using OneSweepSmallTiles = OneSweepConfig<256, 8, 4, RankMatch::kAtomicOr>;

// Per GPU kind (RadixTuning in radix_sort.cuh). The two profiles are one
// today: re-tuned on an H200 for the count-order kernel whose tile lies
// apart from its counters (OneSweepTileOffset); no H100 was lent since (the
// bench's "h100 2026-11-28" variant is the H100's choice before, for the
// A/B on the next H100). Each policy lists, in order: keys-only passes,
// 4-byte values, 8-byte values, keys-only passes from kLargeTilesMinItems
// keys, 4-byte values from there, small tiles.
// 32-bit keys: keys-only passes at 3 blocks of 384 x 25 (more resident
// warps hide the passes' latency, at every size); values at 2 blocks (3
// measured slower), 384 x 32 for 4-byte values from 2^24 keys (large
// tiles where there are many).
template <typename Word>
struct OneSweepTuningH100;

template <>
struct OneSweepTuningH100<uint32_t>
    : OneSweepPolicy<OneSweepConfig<384, 25, 3, RankMatch::kCountOrder>,
                     OneSweepConfig<384, 25, 2, RankMatch::kCountOrder>,
                     OneSweepConfig<384, 25, 2, RankMatch::kCountOrder>,
                     OneSweepConfig<384, 25, 3, RankMatch::kCountOrder>,
                     OneSweepConfig<384, 32, 2, RankMatch::kCountOrder>, OneSweepSmallTiles> {};

// 64-bit keys: 2 blocks of 384 x 20 (keys-only 384 x 24 from 2^24 keys);
// 8-byte values behind 64-bit keys keep match words (count order measured
// slower there).
template <>
struct OneSweepTuningH100<uint64_t>
    : OneSweepPolicy<OneSweepConfig<384, 20, 2, RankMatch::kCountOrder>,
                     OneSweepConfig<384, 20, 2, RankMatch::kCountOrder>,
                     OneSweepConfig<384, 20, 2, RankMatch::kAtomicOr>,
                     OneSweepConfig<384, 24, 2, RankMatch::kCountOrder>,
                     OneSweepConfig<384, 20, 2, RankMatch::kCountOrder>, OneSweepSmallTiles> {};

template <typename Word>
struct OneSweepTuningH200;

template <>
struct OneSweepTuningH200<uint32_t> : OneSweepTuningH100<uint32_t> {};

template <>
struct OneSweepTuningH200<uint64_t> : OneSweepTuningH100<uint64_t> {};

struct HistogramTuning {
  // Block shape and loads per thread of GlobalHistogramKernel: the other
  // shapes and load counts measured no faster (docs/benchmarks-history.md).
  static constexpr int kBlockThreads = 512;
  static constexpr int kBlocksPerSm = 4;
  static constexpr int kLoadsPerThread = 8;
  // Copies of each digit's shared counter a block (GlobalHistogramKernel),
  // for 4-byte and 8-byte keys: lane l counts in copy l % 8, so a warp's
  // count atomic meets fewer bank conflicts; 64-bit keys keep one (more
  // copies measured slower).
  static constexpr int kCounterCopies4 = 8;
  static constexpr int kCounterCopies8 = 1;
};

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_RADIX_TUNING_CUH_
