// Tuning of the OneSweep radix sort, per key width (sm_90 measured; the
// same values are a portable default). Kernels take these as template
// parameters; no magic numbers inside them. bench/gpu_radix_bench.cu
// instantiates alternatives next to these to re-measure them.
#ifndef SORTD_CORE_CUDA_RADIX_TUNING_CUH_
#define SORTD_CORE_CUDA_RADIX_TUNING_CUH_

#include <cstddef>
#include <cstdint>

namespace sortd::cuda {

inline constexpr int kRadixBits = 8;
inline constexpr int kRadixBins = 1 << kRadixBits;

// Chosen by `sortd_gpu_radix_bench --tune` on an H200 (docs/benchmarks.md):
// kAtomicOr peer matching (10-20% faster than 8 ballots everywhere); 3
// blocks of 384 threads per SM (56 registers) for keys-only passes, 2 for
// pairs. 256x24 at 4 blocks/SM and 384x21..27 measured within 2% of these;
// 512-thread blocks were slower.
// How a warp finds the lanes whose key has the same digit (the peer group
// it ranks as one): kBallot, one ballot per digit bit (8 votes and masks
// per key); kAtomicOr, each lane ORs its bit into a per-warp shared word
// of its digit and reads the group back (one shared atomic, one load, and
// the group leader clears the word).
// (Mixing the two per key, to share the work between the ALU and the
// shared-memory pipe, measured no faster than kAtomicOr alone.)
// kCountOrder: no matching in the plain kernel; the digit-count atomics'
// return values are the ranks, as in the unstable first pass (the hot-digit
// kernel matches as kAtomicOr). Stable only if a warp's atomicAdd(&word,
// 1) into shared memory returns to the lanes that share a word consecutive
// values in lane order, and a warp's atomics of consecutive keys take
// effect in program order: what sm_90 does (2026-11-28, H200: 31 billion
// lanes checked, every pass of every benchmark row equal to CUB's), but
// CUDA does not document. So each device is checked before it gets these
// kernels (RadixRanksFor, radix_sort.cuh; docs/architecture.md,
// "Count-order ranks"); a device that fails gets WithMatchedRanks.
enum class RankMatch : int { kBallot, kAtomicOr, kCountOrder };

// How concentrated passes (few distinct digits per warp: few distinct
// keys, skewed bits; kConcentratedDistinct in radix_kernels.cuh) find
// digit groups: kNone, as plain passes; kMatchAny, the match.any
// instruction, whose time grows with the distinct digits in the warp (35%
// slower for whole sorts of uniform keys on the H200, where warps hold ~30
// distinct digits; in concentrated passes on the H100 u32 keys from 16
// values 0.72x -> 1.07x CUB). Tried and not kept (H100, 2^26): lane 0's
// group by one ballot, and the pass's most frequent digit's by another,
// before the match word (0.55-0.85x for those keys: the extra votes per
// key spill registers at 2-3 blocks per SM).
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
// since 2026-11-29: count order without staging won on the H200, see
// below). kHotDigit: passes
// the plan marks hot run the hot-digit kernel (kHotShift in
// radix_kernels.cuh).
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
// sorts blocks for more of the SMs. A pass over few tiles takes as long
// as one block takes over its tile (H100, 2^16 u32 keys: 7 tiles of 384 x
// 25 keys, 11 us a pass, against 10 tiles and 9.6 us for CUB).
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
// SM (64 registers). sortd_gpu_radix_bench --tune --tune_log2=14,16,18,20,
// H100, 2026-11-28, ours / CUB against the profiles' tiles: 2^14
// 0.80-0.95x -> 1.11-1.36x, 2^16 0.95-1.09x -> 1.21-1.33x, 2^18
// 0.94-1.05x -> 0.99-1.17x over u32, u64 keys and the three pairs; at 2^20
// 0.87-0.99x against 1.00-1.14x, hence the size (small tiles up to 2^20,
// three rounds: 2^19 0.96-1.05x against the profiles' 0.96-1.09x). 256 x 4
// and 256 x 16 (3 blocks) measured no better at 2^18 and worse below
// (docs/benchmarks.md).
using OneSweepSmallTiles = OneSweepConfig<256, 8, 4, RankMatch::kAtomicOr>;

// Per GPU kind (RadixTuning in radix_sort.cuh). The history (H100 and
// H200, 2026-11-27/28, docs/benchmarks.md and git history of this file):
// with match words in every pass the H100 gained from 2 blocks of 384 x 20
// for 64-bit keys and for 32-bit keys with 8-byte values (staged: kStageValues),
// and from 2 blocks of 384 x 32 for 32-bit keys-only sorts and 4-byte
// values from 2^24 keys (large tiles); the H200 took the same, except the
// staging. Count-order ranks (RankMatch::kCountOrder, 2026-11-28) then
// made keys-only passes and 4-byte values ~20% faster on the H200; 8-byte
// values kept match words (count order lost there: the rank array held in
// registers spilled).
// Re-tuned for the count-order kernel whose tile lies apart from its
// counters (OneSweepTileOffset: no rank array, one barrier less), H200,
// 2026-11-29, `sortd_gpu_radix_bench --tune`, ours / CUB, three rounds
// against the profiles before in one call (docs/benchmarks.md, "Tiles apart
// from the counters"): 32-bit keys with 8-byte values by count order,
// 384 x 25 x 2 (u32/u64 pairs 2^24 / 2^28 1.04-1.05x -> 1.09-1.10x /
// 1.13x; 384 x 20 x 2 1.09-1.10x, 384 x 32 x 2 1.00-1.03x); 32-bit
// keys-only sorts keep 3 blocks of 384 x 25 from 2^24 keys too (skewed keys
// 1.01x -> 1.05-1.06x, 3 distinct 1.03x -> 1.05-1.06x, u32 keys 2^28
// 1.26x -> 1.31x with the kernel change; 384 x 24 x 3 and 256 x 32 x 3 no
// better); 64-bit keys-only from 2^24 keys 2 blocks of 384 x 24 (u64 keys
// 2^26 / 2^28 1.25x -> 1.29-1.31x; 384 x 16 x 3 no better at 2^28; the
// same for u64/u32 pairs 1.07-1.11x, no better than 384 x 20); 4-byte
// values at 3 blocks of 384 x 25: 1.03-1.12x against 1.23-1.28x, so pairs
// keep 2 blocks. The H100 was not lent: it gets the same (the same SM;
// the bench's "h100 2026-11-28" variant is its profile before, for the
// A/B on the next H100), so the two profiles are one today.
template <typename Word>
struct OneSweepTuningH100;

template <>
struct OneSweepTuningH100<uint32_t>
    : OneSweepPolicy<OneSweepConfig<384, 25, 3, RankMatch::kCountOrder>,
                     OneSweepConfig<384, 25, 2, RankMatch::kCountOrder>,
                     OneSweepConfig<384, 25, 2, RankMatch::kCountOrder>,
                     OneSweepConfig<384, 25, 3, RankMatch::kCountOrder>,
                     OneSweepConfig<384, 32, 2, RankMatch::kCountOrder>, OneSweepSmallTiles> {};

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
  static constexpr int kBlockThreads = 512;
  static constexpr int kBlocksPerSm = 4;
  static constexpr int kLoadsPerThread = 8;
  // Copies of each digit's shared counter a block (GlobalHistogramKernel),
  // for 4-byte and 8-byte keys. H200, 2^26 keys, Nsight Compute, one
  // copy -> these: u32 keys 122.7 -> 116.0 us, skewed u32 keys (bits set
  // with p = 1/8) 148.4 -> 132.9 us; u64 keys with 4 copies 230.6 ->
  // 235.0 us, so they keep one. Removing most bank conflicts gained only
  // 5% for uniform keys: the kernel still takes ~3.4 cycles an SM per
  // warp-wide count atomic (from these times), and reads 2.3 TB/s, half
  // the memory's speed.
  static constexpr int kCounterCopies4 = 8;
  static constexpr int kCounterCopies8 = 1;
};

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_RADIX_TUNING_CUH_
