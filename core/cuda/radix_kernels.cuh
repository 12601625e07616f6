// OneSweep radix sort kernels: the upfront histogram of every digit, the
// per-digit exclusive scan, the chained-scan digit pass, and the small
// helpers (iota, gather) of the argsort path.
#ifndef SORTD_CORE_CUDA_RADIX_KERNELS_CUH_
#define SORTD_CORE_CUDA_RADIX_KERNELS_CUH_

#include <cuda_pipeline.h>

#include <cstdint>
#include <type_traits>

#include "core/cuda/dependent_launch.cuh"
#include "core/cuda/radix_transform.cuh"
#include "core/cuda/radix_tuning.cuh"

namespace sortd::cuda {

// Chained-scan status word per (tile, digit): 2 flag bits, the pass epoch
// (so that one zeroing per sort serves every pass: a word left by an
// earlier pass never matches), and a 56-bit count (wide enough that no
// array needs splitting into portions).
inline constexpr unsigned long long kStatusAggregate = 1ull << 62;
inline constexpr unsigned long long kStatusPrefix = 2ull << 62;
inline constexpr int kStatusEpochShift = 56;
inline constexpr unsigned long long kStatusEpochMask = 0x3full << kStatusEpochShift;
inline constexpr unsigned long long kStatusValueMask = (1ull << kStatusEpochShift) - 1;

struct NoValue {};

// How a pass maps keys between their original bits and ordered words,
// chosen on the host per sort so that the common cases carry no transform
// code: kNone (unsigned ascending: the bits are the order), kXor (signed
// and/or descending: one XOR with sign ^ flip), kFloat (the float map with
// its sign-dependent part and NaN canonicalisation).
enum class PassTransform : int { kNone, kXor, kFloat };

// Arguments of one digit pass (a struct: the kernel's parameter list stays
// readable and every launch fills the same fields).
template <typename Word, typename Value>
struct OneSweepPassArgs {
  const Word* keys_in = nullptr;
  Word* keys_out = nullptr;
  const Value* values_in = nullptr;
  Value* values_out = nullptr;
  size_t n = 0;
  int shift = 0;                 // bit position of this pass's digit
  KeyMasks<Word> masks;
  bool encode = false;           // first pass over the input: original bits -> ordered words
  bool decode = false;           // last pass: ordered words -> original bits
  const unsigned long long* pass_offsets = nullptr;  // [kRadixBins]
  unsigned long long* status = nullptr;              // [tiles][kRadixBins]
  unsigned int epoch = 0;
  unsigned int* tile_counter = nullptr;
  // Speculative first pass (plan != nullptr): launched before the host has
  // read the histogram, it decides on the device. It runs only when digit
  // 0 is not the same for every key and no NaN mode is needed; it then
  // writes keys_out/values_out when the sort runs an odd number of passes
  // (so that the last one ends in the caller's buffer), else
  // keys_alt/values_alt, and decodes when it is the only pass.
  const unsigned long long* plan = nullptr;  // [0]: NaN count, [1]: trivial-digit mask
  Word* keys_alt = nullptr;
  Value* values_alt = nullptr;
  // This pass's hot digit (DigitOffsetsKernel; kRadixBins: none), read by
  // kernels with kHotDigit.
  const unsigned int* hot_digit = nullptr;
};

// Plan mask bit kFewShift + p (keys-only sorts with concentrated passes:
// DigitOffsetsKernel's record_few): pass p is not trivial and a warp of 32
// keys would hold fewer than kFewDistinct distinct digits on average (the
// estimate of kConcentratedDistinct below; keys drawn from 3 values: ~3).
// With so few, a warp's lanes pile onto one counter, and the unstable first
// pass's returning count atomics serialise them: 2^26 u32 keys of 3
// values, H200, the first pass took 280 us against 221 us for the
// concentrated kernel's passes (docs/benchmarks-history.md, "Few distinct digits
// in the first pass"); with ~14 (16 values) the plain first pass was the
// faster (docs/architecture.md, "Ties"); between the two not measured.
// So the speculative first pass stands down where pass 0 has the bit, and
// the host runs it on the concentrated kernel. (The bit lives in the plan,
// not in the pass's arguments: a larger argument struct made the pass
// kernels spill.) Below kHotMinDistinct, so never a hot pass.
inline constexpr int kFewShift = 24;
inline constexpr int kFewDistinct = 8;

// Route of a pass, decided by its thread 0: bit 0 runs it, bit 1 writes the
// alternate buffers, bit 2 decodes.
inline constexpr unsigned int kRouteRun = 1, kRouteToAlt = 2, kRouteDecode = 4;

// What the histogram saw of the keys' order (plan word [2], in ordered
// words, so "ascending" is the requested order): some key above its
// successor (the input is not already sorted), some key below it (not
// reverse-sorted), some key equal to it.
inline constexpr unsigned long long kOrderDescent = 1, kOrderAscent = 2, kOrderTie = 4;

template <int kPasses>
__device__ __forceinline__ unsigned int SpeculativeRoute(const unsigned long long* plan) {
  const unsigned long long nans = plan[0];
  const unsigned int trivial = static_cast<unsigned int>(plan[1]) & ((1u << kPasses) - 1);
  if ((plan[1] >> kFewShift) & 1) return 0;  // the host runs the concentrated kernel (kFewShift)
  // Input in order or in reverse order is copied or reversed instead.
  const unsigned long long order = plan[2];
  if (!(order & kOrderDescent) || !(order & kOrderAscent)) return 0;
  if (nans != 0 || (trivial & 1u)) return 0;
  const int passes = kPasses - __popc(trivial);
  return kRouteRun | (passes % 2 == 0 ? kRouteToAlt : 0) | (passes == 1 ? kRouteDecode : 0);
}

// kOrderNan: some key is a NaN (canonical_nan masks). Both direction bits:
// the input is in neither order. KeyOrderKernel (radix_order_kernel.cuh)
// sets these.
inline constexpr unsigned long long kOrderNan = 8;
inline constexpr unsigned long long kOrderNeither = kOrderDescent | kOrderAscent;
// kOrderManyRuns: the input is not a few sorted runs (more descents than
// kMaxRunBreaks, four in a probe of 32 keys, or runs not counted). Input in
// neither order with fewer descents is merged as sorted runs
// (docs/architecture.md, "Presorted input").
inline constexpr unsigned long long kOrderManyRuns = 128;
// At most this many descents (kRadixMaxMergedRuns runs) are merged.
inline constexpr int kMaxRunBreaks = kRadixMaxMergedRuns - 1;

// Plan words read back by the host: [0] NaNs, [1] trivial-digit mask (bit
// p) and concentrated-pass mask (bit kConcentratedShift + p), [2] order
// bits, [3] descents counted, [4, 4 + kMaxRunBreaks) where the runs after
// the first start (unordered; the first [3] of them are valid).
inline constexpr int kPlanWords = 4 + kMaxRunBreaks;

// A pass is concentrated when a warp of 32 keys drawn from its histogram
// would hold at most kConcentratedDistinct distinct digits on average
// (sum over digits of 1 - (1 - share)^32: uniform random keys 30.2, keys
// drawn from 16 values 14, bits set with probability 1/8 about 15). Its
// warps rank many lanes of one digit, which the match word's shared
// atomics serialise lane by lane; such passes find digit groups with
// match.any instead (ConcentratedRank), whose time grows with the distinct
// digits in the warp (docs/architecture.md, "Ties").
inline constexpr int kConcentratedShift = 8;
inline constexpr int kConcentratedDistinct = 20;
static_assert(kConcentratedShift >= 64 / kRadixBits, "concentrated bits above every pass's trivial bit");

// A pass's hot digit: one that holds at least 1/kHotDigitShareInverse of
// its keys (the first such digit). Lanes of one warp whose keys have it
// would all hit one shared word in the digit-count and match-word atomics,
// which serialise same-word lanes; kernels with kHotDigit count and match
// those lanes by a ballot instead. A concentrated pass with a hot digit
// and at least kHotMinDistinct expected distinct digits in a warp is hot:
// bit kHotShift + p of the plan's mask (DigitOffsetsKernel writes the
// digit itself, or kRadixBins, into the sort's per-pass hot digits), and
// tunings with kHotDigit run it on the hot-digit kernel instead of the
// concentrated one. Measured on an H200 (2026-11-28, docs/benchmarks.md):
// skewed u32 keys (about 15 distinct digits a warp) 0.85x -> 0.91x CUB;
// with 3 distinct keys (3 a warp) match.any stays far faster (1.00x
// against 0.71x), hence the minimum (8: between those, not measured).
inline constexpr int kHotShift = 16;
inline constexpr unsigned long long kHotDigitShareInverse = 4;
inline constexpr int kHotMinDistinct = 8;
static_assert(kHotShift >= kConcentratedShift + 64 / kRadixBits, "hot bits above every concentrated bit");
static_assert(kFewShift >= kHotShift + 64 / kRadixBits, "few-digit bits above every hot bit");
static_assert(kFewDistinct <= kHotMinDistinct, "a pass with few digits is never hot");

// A digit's part of that estimate: the chance that it is among 32 keys
// drawn from a histogram where it holds `count` of `n` keys, in 1/65536ths
// (fixed point: the sum over digits is the same in any order).
__host__ __device__ inline unsigned int DigitInWarpFixed(unsigned long long count, size_t n) {
  const float absent = 1.0f - static_cast<float>(count) / static_cast<float>(n);
  return static_cast<unsigned int>((1.0f - powf(absent, 32.0f)) * 65536.0f);
}

// Expected distinct digits in a warp of 32 keys, in 1/65536ths, for a
// pass with these kRadixBins digit counts over n keys (DigitOffsetsKernel
// sums the same terms on the device).
inline unsigned long long WarpDistinctFixed(const unsigned long long* counts, size_t n) {
  unsigned long long sum = 0;
  for (int d = 0; d < kRadixBins; ++d) sum += DigitInWarpFixed(counts[d], n);
  return sum;
}

// Whether a pass with these kRadixBins digit counts (n keys, not every key
// one digit) is concentrated; DigitOffsetsKernel decides the same on the
// device (RadixPassIsConcentrated: the rule for tests on the host).
inline bool ConcentratedPass(const unsigned long long* counts, size_t n) {
  return WarpDistinctFixed(counts, n) <= (static_cast<unsigned long long>(kConcentratedDistinct) << 16);
}

// Whether such a pass is hot (see kHotShift); DigitOffsetsKernel decides
// the same on the device (RadixPassIsHot: the rule for tests on the host).
inline bool HotPass(const unsigned long long* counts, size_t n) {
  bool hot = false;
  for (int d = 0; d < kRadixBins; ++d) {
    if (counts[d] == n) return false;  // trivial: skipped
    hot |= counts[d] != 0 && counts[d] * kHotDigitShareInverse >= n;
  }
  const unsigned long long distinct = WarpDistinctFixed(counts, n);
  return hot && distinct <= (static_cast<unsigned long long>(kConcentratedDistinct) << 16) &&
         distinct >= (static_cast<unsigned long long>(kHotMinDistinct) << 16);
}

// Whether the order word leaves a full sort: in neither order, and not a
// few runs.
__host__ __device__ inline bool SortsInFull(unsigned long long order) {
  return (order & kOrderNeither) == kOrderNeither && (order & kOrderManyRuns) != 0;
}

// Counts, in one read of the keys, the digits of every pass (and NaNs).
// hist is [passes][kRadixBins], zeroed by the caller. `order`, when not
// null: with `ordered_skip` it was set by KeyOrderKernel before, and input
// in or in reverse order, or a few sorted runs, is not counted (it is
// copied, reversed or merged instead; the host counts again if none
// applies); without, the order was not looked at and block 0 marks it
// "neither, many runs" for the passes and the host.
template <typename Word, int kBlockThreads>
__global__ void __launch_bounds__(kBlockThreads)
GlobalHistogramKernel(const Word* __restrict__ keys, size_t n, KeyMasks<Word> masks,
                      unsigned long long* __restrict__ hist,
                      unsigned long long* __restrict__ nan_count,
                      unsigned long long* __restrict__ order, bool ordered_skip) {
  if (order != nullptr) {
    if (ordered_skip && !SortsInFull(*order)) return;
    if (!ordered_skip && blockIdx.x == 0 && threadIdx.x == 0) atomicOr(order, kOrderNeither | kOrderManyRuns);
  }
  constexpr int kPasses = sizeof(Word) * 8 / kRadixBits;
  // kCopies counters per (pass, digit), side by side (HistogramTuning);
  // lane l counts in copy l % kCopies. Word (p, d, c) lies in bank
  // (d * kCopies + c) % 32, so lanes of different copies never share a
  // bank and lanes of one copy spread over 32 / kCopies banks by their
  // digits' low bits (32 random digits put ~3.5 lanes in the fullest of
  // 32 banks), and lanes with the same digit (skewed keys) mostly hit
  // different words.
  constexpr int kCopies = sizeof(Word) == 4 ? HistogramTuning::kCounterCopies4 : HistogramTuning::kCounterCopies8;
  static_assert(kCopies >= 1 && kCopies <= 32 && (kCopies & (kCopies - 1)) == 0, "copies: a power of two");
  constexpr int kCounters = kPasses * kRadixBins * kCopies;
  __shared__ unsigned int counts[kCounters];
  for (int i = threadIdx.x; i < kCounters; i += kBlockThreads) counts[i] = 0;
  __syncthreads();
  const unsigned int copy = threadIdx.x & (kCopies - 1);
  unsigned int nans = 0;
  // Integer keys (no float map, no NaNs to count) take one XOR a key. With
  // few distinct keys the count atomics are cheap (warp-aggregated) and
  // the kernel is bound by its instructions: the float map's select and
  // NaN test on every key made it 1.6x slower (H200, 2^26 u32 keys of 3
  // distinct values: 105 against 66 us). Float keys take the map without
  // its NaN select wherever a warp's loads hold no NaN (one float compare
  // a key tells), and the full map (NaNs canonical and counted) only where
  // they do.
  const Word integer_xor = masks.sign ^ masks.flip;
  auto count_word = [&](Word w) {
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      atomicAdd(&counts[(p * kRadixBins + ((w >> (p * kRadixBits)) & (kRadixBins - 1))) * kCopies + copy], 1u);
    }
  };
  auto count_any = [&](Word bits) {  // the full map: any key class, NaNs
    if (masks.canonical_nan && KeyCodec<Word>::IsNan(bits)) ++nans;
    count_word(masks.Encode(bits));
  };
  auto count_keys = [&](auto float_keys) {
    constexpr bool kFloat = decltype(float_keys)::value;
    // kLoads independent loads per thread per step keep memory busy.
    constexpr int kLoads = HistogramTuning::kLoadsPerThread;
    const size_t stride = static_cast<size_t>(gridDim.x) * kBlockThreads;
    size_t i = blockIdx.x * static_cast<size_t>(kBlockThreads) + threadIdx.x;
    for (; i + (kLoads - 1) * stride < n; i += kLoads * stride) {
      Word bits[kLoads];
#pragma unroll
      for (int k = 0; k < kLoads; ++k) bits[k] = keys[i + k * stride];
      if constexpr (!kFloat) {
#pragma unroll
        for (int k = 0; k < kLoads; ++k) count_word(bits[k] ^ integer_xor);
      } else {
        bool nan = false;
#pragma unroll
        for (int k = 0; k < kLoads; ++k) nan |= KeyCodec<Word>::IsNanFloat(bits[k]);
        // Decided for the warp at once: a thread's choice alone would run
        // both maps in turn in most warps when NaNs are scattered.
        if (masks.canonical_nan && __any_sync(__activemask(), nan)) {
#pragma unroll
          for (int k = 0; k < kLoads; ++k) count_any(bits[k]);
        } else {
#pragma unroll
          for (int k = 0; k < kLoads; ++k) count_word(masks.EncodeFloatNotNan(bits[k]));
        }
      }
    }
    for (; i < n; i += stride) {
      if constexpr (kFloat) {
        count_any(keys[i]);
      } else {
        count_word(keys[i] ^ integer_xor);
      }
    }
  };
  if (masks.float_mask == 0) {  // (canonical_nan is for float keys only)
    count_keys(std::false_type{});
  } else {
    count_keys(std::true_type{});
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kPasses * kRadixBins; i += kBlockThreads) {
    unsigned int sum = 0;
#pragma unroll
    for (int c = 0; c < kCopies; ++c) sum += counts[i * kCopies + ((c + i) & (kCopies - 1))];
    if (sum != 0) atomicAdd(&hist[i], static_cast<unsigned long long>(sum));
  }
  nans = __reduce_add_sync(0xffffffffu, nans);
  if ((threadIdx.x & 31) == 0 && nans != 0) atomicAdd(nan_count, static_cast<unsigned long long>(nans));
}

// Copies plan words to pinned, mapped host memory for the host's
// read-back. A one-block kernel instead of a copy-engine transfer in the
// stream: a copy between two kernels held the next kernel for the copy
// engine's hand-offs (H200: the read-back cost whole sorts 4% at 2^26 u32
// keys, docs/benchmarks-history.md "The plan's read-back").
// (A template: the header is in several translation units.)
template <typename PlanWord>
__global__ void __launch_bounds__(64) PlanToHostKernel(const PlanWord* __restrict__ plan, PlanWord* host,
                                                       int words) {
  for (int i = threadIdx.x; i < words; i += blockDim.x) host[i] = plan[i];
}

// out[i] = in[n - 1 - i] for keys and (optionally) values: the stable sort
// of input in strictly reverse order. Each thread swaps one pair, so in and
// out may be the same array.
template <typename Word, typename Value>
__global__ void ReverseKernel(const Word* keys_in, Word* keys_out, const Value* values_in,
                              Value* values_out, size_t n) {
  const size_t half = (n + 1) / 2;
  for (size_t t = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; t < half;
       t += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t u = n - 1 - t;
    const Word a = keys_in[t], b = keys_in[u];
    keys_out[t] = b;
    keys_out[u] = a;
    if constexpr (!std::is_same_v<Value, NoValue>) {
      const Value va = values_in[t], vb = values_in[u];
      values_out[t] = vb;
      values_out[u] = va;
    }
  }
}

// One block per pass: offsets[p][d] = sum of hist[p][0..d); and, for the
// plan read back (record_plan), bit p of *plan_mask when every key has the
// same digit p (the pass is skipped), else bit kConcentratedShift + p when
// the pass is concentrated, and bit kHotShift + p when it has a hot digit
// (*plan_mask zeroed by the caller); hot_digits[p]: that digit, or
// kRadixBins.
template <int kBlockThreads>
__global__ void __launch_bounds__(kBlockThreads)
DigitOffsetsKernel(const unsigned long long* __restrict__ hist, size_t n, bool record_plan, bool record_few,
                   unsigned long long* __restrict__ offsets,
                   unsigned long long* __restrict__ plan_mask,
                   unsigned int* __restrict__ hot_digits) {
  static_assert(kBlockThreads == kRadixBins, "one thread per digit");
  __shared__ unsigned long long scan[kRadixBins];
  // Expected distinct digits in a warp of 32 keys, in 1/65536ths: an
  // integer sum, so the same in every run whatever order the warps add in.
  __shared__ unsigned int warp_distinct;
  __shared__ unsigned int hot;
  const int d = threadIdx.x;
  const size_t base = static_cast<size_t>(blockIdx.x) * kRadixBins;
  const unsigned long long count = hist[base + d];
  scan[d] = count;
  if (d == 0) warp_distinct = 0;
  if (d == 0) hot = kRadixBins;
  const bool trivial = __syncthreads_or(count == n);
  if (!trivial && count != 0 && count * kHotDigitShareInverse >= n) atomicMin(&hot, static_cast<unsigned int>(d));
  if (trivial && record_plan && d == 0) atomicOr(plan_mask, 1ull << blockIdx.x);
  if (record_plan && !trivial) {
    const unsigned int sum = __reduce_add_sync(0xffffffffu, DigitInWarpFixed(count, n));
    if ((d & 31) == 0) atomicAdd(&warp_distinct, sum);
  }
  for (int offset = 1; offset < kRadixBins; offset <<= 1) {
    const unsigned long long add = d >= offset ? scan[d - offset] : 0;
    __syncthreads();
    scan[d] += add;
    __syncthreads();
  }
  offsets[base + d] = scan[d] - count;
  if (d == 0) hot_digits[blockIdx.x] = hot;  // hot was set before the scan's barriers
  constexpr unsigned int kLimit = static_cast<unsigned int>(kConcentratedDistinct) << 16;
  if (record_plan && !trivial && d == 0 && warp_distinct <= kLimit) {
    atomicOr(plan_mask, 1ull << (kConcentratedShift + blockIdx.x));
    if (record_few && warp_distinct < static_cast<unsigned int>(kFewDistinct) << 16) {
      atomicOr(plan_mask, 1ull << (kFewShift + blockIdx.x));
    }
    if (hot != kRadixBins && warp_distinct >= static_cast<unsigned int>(kHotMinDistinct) << 16) {
      atomicOr(plan_mask, 1ull << (kHotShift + blockIdx.x));
    }
  }
}

// Exclusive sum over the block's threads (one value each); also returns
// the block total through `total`. `scratch` holds one word per warp.
template <int kBlockThreads>
__device__ __forceinline__ unsigned int BlockExclusiveSum(unsigned int value, unsigned int* scratch) {
  constexpr int kWarps = kBlockThreads / 32;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  unsigned int inclusive = value;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const unsigned int up = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += up;
  }
  if (lane == 31) scratch[warp] = inclusive;
  __syncthreads();
  unsigned int warp_prefix = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) warp_prefix += w < warp ? scratch[w] : 0;
  return warp_prefix + inclusive - value;
}

__device__ __forceinline__ unsigned long long LoadStatus(const unsigned long long* p) {
  return *reinterpret_cast<const volatile unsigned long long*>(p);
}
__device__ __forceinline__ void StoreStatus(unsigned long long* p, unsigned long long v) {
  *reinterpret_cast<volatile unsigned long long*>(p) = v;
}
__device__ __forceinline__ unsigned long long PackStatus(unsigned long long flag,
                                                         unsigned int epoch,
                                                         unsigned long long value) {
  return flag | (static_cast<unsigned long long>(epoch) << kStatusEpochShift) | value;
}

// Lanes of the warp whose digit equals this lane's: one ballot per digit
// bit. (The match.any instruction is one instruction but measured 35%
// slower for the whole sort on the H200.)
__device__ __forceinline__ unsigned int MatchDigit(unsigned int digit) {
  unsigned int peers = 0xffffffffu;
#pragma unroll
  for (int b = 0; b < kRadixBits; ++b) {
    const bool bit = (digit >> b) & 1u;
    const unsigned int ballot = __ballot_sync(0xffffffffu, bit);
    peers &= bit ? ballot : ~ballot;
  }
  return peers;
}

// Where digit d's per-warp counter and match word sit in their rows of
// kRadixBins words: d with its low 5 bits XORed by 3 * (d / 32), a
// bijection within each block of 32 words. Word d of a row falls in shared
// memory bank d % 32, so digits that differ only in their top 3 bits share
// a bank, and keys with few bits set put most of their non-zero digits
// there (32, 64, 128 with 0; 96, 160, 192). In a warp of such keys (bits
// set with p = 1/8, the hot digit counted apart) the fullest bank holds
// 5.95 lanes on average against 3.54 for uniform digits; swizzled, 4.0
// (a simulation of 20000 warps; uniform digits unchanged). Each lane's
// count atomic, match-word atomic and load wait for their bank's fullest.
// Swizzled in the kernels that such keys run: the hot-digit kernel
// (passes with a hot digit) and the unstable first pass of keys-only
// sorts, which runs before the plan says whether a pass is hot. H200
// (2026-11-28, docs/benchmarks-history.md "Counter swizzle"): skewed u32 keys
// 0.91x -> 1.00x CUB (0.96-0.97x with the hot-digit kernel alone); in
// every kernel it also cost 3 distinct keys 1.00x -> 0.98x (3 more
// instructions a lookup, nothing to spread), so the matching kernels keep
// d. The count-order plain kernel (RankMatch::kCountOrder), which ranks as
// the first pass does, swizzles like it (not measured apart).
__device__ __forceinline__ unsigned int CounterSlot(unsigned int digit) {
  return digit ^ ((digit >> 5) * 3u);
}

// Where the tile's keys and values start in a kernel whose ranks come
// from the count atomics with stable order (RankMatch::kCountOrder's plain
// kernel, and its unstable first pass): past one counter row per warp, so
// that each key goes to shared memory as soon as its rank is known, with
// no barrier between reading the counters and writing the keys and no
// array of ranks held in registers.
template <int kBlockThreads>
__host__ __device__ constexpr size_t OneSweepTileOffset() {
  return static_cast<size_t>(kBlockThreads / 32) * kRadixBins * sizeof(unsigned int);
}

// Shared-memory bytes of one OneSweep tile (dynamic: beyond the 48 KiB of
// static shared memory for wide keys or values): the per-warp digit
// counters (and match words), later reused for the tile's keys and values.
// With kStageValues: the counters/keys region, then each sorted key's
// input position in the tile (16-bit), then the staged values in input
// order (byte offsets kSources and kStaged, 16-byte aligned).
template <typename Word, typename Value, int kBlockThreads, int kItems>
struct OneSweepStagedLayout {
  static constexpr size_t kTile = static_cast<size_t>(kBlockThreads) * kItems;
  static constexpr size_t kCounters =  // with match words
      2 * static_cast<size_t>(kBlockThreads / 32) * kRadixBins * sizeof(unsigned int);
  static constexpr size_t kKeys = kTile * sizeof(Word);
  static constexpr size_t kSources = ((kCounters > kKeys ? kCounters : kKeys) + 15) / 16 * 16;
  static constexpr size_t kStaged = kSources + (kTile * sizeof(uint16_t) + 15) / 16 * 16;
  static constexpr size_t kBytes = kStaged + kTile * sizeof(Value);
};

template <typename Word, typename Value, int kBlockThreads, int kItems, RankMatch kMatch,
          bool kStageValues = false>
constexpr size_t OneSweepSharedBytes() {
  if constexpr (kStageValues) {
    return OneSweepStagedLayout<Word, Value, kBlockThreads, kItems>::kBytes;
  } else {
    constexpr size_t kTile = static_cast<size_t>(kBlockThreads) * kItems;
    constexpr size_t counters = (kMatch == RankMatch::kBallot ? 1 : 2) *
                                static_cast<size_t>(kBlockThreads / 32) * kRadixBins * sizeof(unsigned int);
    constexpr size_t keys = kTile * sizeof(Word);
    constexpr size_t values = kTile * sizeof(Value);
    constexpr size_t a = counters > keys ? counters : keys;
    constexpr size_t overlapping = a > values ? a : values;
    if constexpr (kMatch == RankMatch::kCountOrder) {
      // The count-order plain kernel keeps its counters (one row per warp)
      // apart from the tile (OneSweepTileOffset); its hot and concentrated
      // kernels use the overlapping layout in the same allocation.
      constexpr size_t apart = OneSweepTileOffset<kBlockThreads>() + (keys > values ? keys : values);
      return apart > overlapping ? apart : overlapping;
    }
    return overlapping;
  }
}

// One OneSweep digit pass. Tiles are numbered in launch order by an atomic
// counter; each tile:
//   1. loads its keys warp-striped (encoding them on the first pass) and
//      counts digits per warp in shared memory ("early counts"),
//   2. publishes its per-digit totals (so later tiles' look-back never waits
//      on this tile's ranking), scans them into tile-local digit starts and
//      turns the per-warp counts into each warp's running offsets,
//   3. ranks its keys: the lanes with the same digit find each other
//      (RankMatch; in concentrated passes ConcentratedRank), their highest
//      lane bumps the warp's running offset by
//      the group size (one shared atomic per group), ranks are stable in
//      input order (RankMatch::kCountOrder's plain kernel skips this: its
//      step 1 count atomics' return values are the ranks, stable where
//      the device passed CheckCountOrderRanks),
//   4. writes keys to shared memory by rank, looks back for the prefix of all
//      earlier tiles (decoupled look-back), then stores keys to global
//      memory coalesced (decoding on the last pass); values are loaded only
//      now and take the same path (staged values: see kStageValues below).
// kStableRank = false (the first pass of a keys-only sort, where the input
// order of equal digits carries no information: keys equal in every digit
// are equal words) skips step 3: the count atomics' return values are the
// ranks within the warp.
// Items past n (last tile only) are padding with the largest digit. Each
// warp adds its padding to that digit's count with one atomic; padding is a
// suffix of the tile in warp-striped order, so (matched ranks) it ranks
// after every real key (ranks tile_count..kTile-1) and moves no real key;
// only the loads, the ranks from counts (kCountRanks: padding gets none)
// and the global stores test bounds.
// The inflated count of the largest digit is published by the last tile,
// whose totals no tile looks back on.
// Offset: 32-bit when n < 2^32 (cheaper shared lookups and address math;
// sums wrap modulo 2^32 and are exact), else 64-bit. (A kernel specialised
// for full tiles was tried: without the runtime bounds checks the compiler
// hoists more work and spills at 3 blocks/SM.)
// kStageValues (pairs): each thread starts asynchronous copies of its
// values into shared memory (input order) as the tile is loaded; step 4
// records each sorted key's input position beside it and stores each
// value from the staged copy by that position, in the keys' store loop
// (no value load after the keys' store, no second exchange).
template <typename Word, typename Value, typename Offset, int kBlockThreads, int kItems,
          int kMinBlocks, RankMatch kMatch, PassTransform kTransform, bool kStableRank,
          ConcentratedRank kConcentrated = ConcentratedRank::kNone, bool kStageValues = false,
          bool kHotDigit = false>
__global__ void __launch_bounds__(kBlockThreads, kMinBlocks)
OneSweepPassKernel(const OneSweepPassArgs<Word, Value> a) {
  static_assert(kBlockThreads >= kRadixBins && kBlockThreads % 32 == 0,
                "one thread per digit in the scan steps");
  constexpr int kPasses = sizeof(Word) * 8 / kRadixBits;
  constexpr int kWarps = kBlockThreads / 32;
  constexpr int kTile = kBlockThreads * kItems;
  constexpr bool kHasValues = !std::is_same_v<Value, NoValue>;
  static_assert(!kStageValues || kHasValues, "staged values need values");
  static_assert(!kStageValues || sizeof(Value) == 4 || sizeof(Value) == 8, "async copies of 4 or 8 bytes");
  static_assert(!kStageValues || kBlockThreads * kItems <= 65536, "input positions are 16-bit");
  // Ranks within the warp straight from the count atomics: unstable ranks,
  // or stable ones in the plain kernel of a tuning that trusts the
  // atomics' lane order (RankMatch::kCountOrder; its concentrated kernel
  // matches by match.any, its hot-digit kernel by match words).
  constexpr bool kCountRanks = !kStableRank || (kMatch == RankMatch::kCountOrder && !kHotDigit &&
                                                kConcentrated == ConcentratedRank::kNone);
  // kRanksApart: the tile lies past the counters (OneSweepTileOffset), so
  // step 3 stores each key as it reads its rank (no barrier, no rank array;
  // pairs keep the ranks packed two to a word for the values). H200,
  // 2026-11-29, same tiles, three rounds: u32 keys 2^28 1.26x -> 1.30-1.31x
  // CUB, u64/u32 pairs 1.07-1.08x -> 1.10-1.12x, i32 descending 1.24x ->
  // 1.28x, the other rows within +-0.02x; and 8-byte values by count order
  // now win (radix_tuning.cuh).
  constexpr bool kRanksApart = kCountRanks && kMatch == RankMatch::kCountOrder && !kStageValues;
  static_assert(!kRanksApart || kBlockThreads * kItems <= 65536, "ranks are packed as 16 bits");
  constexpr size_t kTileOffset = kRanksApart ? OneSweepTileOffset<kBlockThreads>() : 0;
  using ValueSlot = std::conditional_t<kHasValues, Value, Word>;
  using Staged = OneSweepStagedLayout<Word, ValueSlot, kBlockThreads, kItems>;
  // One dynamic buffer, three lives: per-warp digit counters (steps 1-3;
  // with kAtomicOr followed by per-warp match words), then the tile's keys,
  // then its values (with kStageValues, the keys' input positions and the
  // staged values lie beyond, for the whole pass; with kRanksApart the
  // keys and values start past the counters, which stay).
  extern __shared__ __align__(16) unsigned char smem[];
  WaitForPriorGrid();  // large sorts launch passes as dependents of the pass before
  auto warp_offsets = reinterpret_cast<unsigned int(*)[kRadixBins]>(smem);
  auto match_words = reinterpret_cast<unsigned int(*)[kRadixBins]>(smem) + kWarps;
  Word* tile_keys = reinterpret_cast<Word*>(smem + kTileOffset);
  ValueSlot* tile_values = reinterpret_cast<ValueSlot*>(smem + kTileOffset);
  uint16_t* tile_sources = reinterpret_cast<uint16_t*>(smem + Staged::kSources);      // kStageValues
  ValueSlot* staged_values = reinterpret_cast<ValueSlot*>(smem + Staged::kStaged);  // kStageValues
  __shared__ Offset global_base[kRadixBins];
  __shared__ unsigned int scan_scratch[kWarps];
  __shared__ unsigned int s_tile;
  __shared__ unsigned int s_route;

  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  if (threadIdx.x == 0) {
    const unsigned int route = a.plan != nullptr ? SpeculativeRoute<kPasses>(a.plan)
                                                 : kRouteRun | (a.decode ? kRouteDecode : 0);
    s_route = route;
    if (route & kRouteRun) s_tile = atomicAdd(a.tile_counter, 1u);
  }
  for (int b = lane; b < kRadixBins; b += 32) warp_offsets[warp][b] = 0;
  if constexpr (kMatch != RankMatch::kBallot && !kCountRanks) {
    for (int b = lane; b < kRadixBins; b += 32) match_words[warp][b] = 0;
  }
  __syncthreads();
  if (!(s_route & kRouteRun)) return;  // speculative first pass not needed

  const size_t n = a.n;
  const unsigned int tile = s_tile;
  const size_t tile_base = static_cast<size_t>(tile) * kTile;
  const size_t warp_base = tile_base + static_cast<size_t>(warp) * 32 * kItems + lane;
  const bool full_tile = tile_base + kTile <= n;
  const unsigned int tile_count =
      full_tile ? kTile : static_cast<unsigned int>(n - tile_base);
  // (A cheaper test per item, i * 32 < lanes left as a 32-bit compare with
  // a constant, lets the compiler hoist more work: it spills at 56
  // registers and the sort measured 15-30% slower on the H200.)
  auto in_range = [&](int i) { return full_tile || warp_base + i * 32 < n; };
  // A digit's word in its warp's counter and match-word rows (CounterSlot).
  auto slot_of = [](unsigned int digit) { return kHotDigit || kCountRanks ? CounterSlot(digit) : digit; };
  const int shift = a.shift;
  auto digit_of = [&](Word w) {
    return static_cast<unsigned int>(w >> shift) & (kRadixBins - 1);
  };
  // Original bits -> ordered words (first pass only: a.encode; kXor and
  // kFloat, as kNone keys are their own ordered words).
  auto encode = [&](Word bits) -> Word {
    if constexpr (kTransform == PassTransform::kXor) {
      return bits ^ a.masks.sign ^ a.masks.flip;
    } else {
      return a.masks.Encode(bits);
    }
  };

  // 1. Load and count. Every key is loaded before any is transformed: with
  // the transform's branches between the loads, the compiler issued each
  // load after the previous key's transform, a memory latency per key
  // (H100, f32 keys 2^16: the first pass took 21.7 us, u32 keys' 11.2).
  static_assert(kStableRank || !kHasValues, "values need stable ranks");
  Word key[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    key[i] = in_range(i) ? a.keys_in[warp_base + i * 32] : ~Word{0};
  }
  if constexpr (kTransform != PassTransform::kNone) {
    if (a.encode) {
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        if (in_range(i)) key[i] = encode(key[i]);  // padding stays ~0: last digit
      }
    }
  }
  // The tile's position of this thread's item i: warp-striped.
  const unsigned int local_base = static_cast<unsigned int>(warp) * 32 * kItems + lane;
  if constexpr (kStageValues) {
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (in_range(i)) {
        __pipeline_memcpy_async(&staged_values[local_base + i * 32], &a.values_in[warp_base + i * 32],
                                sizeof(ValueSlot));
      }
    }
    __pipeline_commit();
  }
  // Unstable ranks within the warp (< 32 * kItems), two per word until the
  // warp offsets are known: they live across step 2 next to the keys.
  unsigned int warp_rank_pairs[kCountRanks ? (kItems + 1) / 2 : 1] = {};
  // kHotDigit: each lane counts its own keys of the hot digit in a register
  // (hot_count; unstable ranks: its index among them, the lanes below
  // added in step 3), the warp's total added once below: no atomics on
  // the hot digit's counter.
  const unsigned int hot = kHotDigit && a.hot_digit != nullptr ? *a.hot_digit : kRadixBins;
  unsigned int hot_count = 0;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (in_range(i)) {
      const unsigned int digit = digit_of(key[i]);
      if (kHotDigit && digit == hot) {
        if constexpr (!kStableRank) warp_rank_pairs[i / 2] |= hot_count << (16 * (i % 2));
        ++hot_count;
      } else {
        unsigned int* counter = &warp_offsets[warp][slot_of(digit)];
        if constexpr (kCountRanks) {
          warp_rank_pairs[i / 2] |= atomicAdd(counter, 1u) << (16 * (i % 2));
        } else {
          atomicAdd(counter, 1u);
        }
      }
    }
  }
  unsigned int hot_below = 0;  // the hot digit's keys of the lanes below (unstable ranks)
  if constexpr (kHotDigit) {
    unsigned int inclusive = hot_count;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      const unsigned int up = __shfl_up_sync(0xffffffffu, inclusive, offset);
      if (lane >= offset) inclusive += up;
    }
    hot_below = inclusive - hot_count;
    if (lane == 31 && inclusive != 0) atomicAdd(&warp_offsets[warp][slot_of(hot)], inclusive);
  }
  if (!full_tile) {
    __syncwarp();  // after every lane's counts: unstable ranks of real keys stay below the padding
    const size_t warp_start = warp_base - lane;
    const size_t warp_end = warp_start + 32 * kItems;
    const size_t padding = warp_end <= n ? 0 : warp_end - (warp_start > n ? warp_start : n);
    if (lane == 0 && padding != 0) {
      atomicAdd(&warp_offsets[warp][slot_of(kRadixBins - 1)], static_cast<unsigned int>(padding));
    }
  }
  __syncthreads();

  // 2. Publish early totals; digit starts; per-warp running offsets.
  const int d = threadIdx.x;
  const unsigned int d_slot = slot_of(d);
  unsigned long long* my_status = a.status + static_cast<size_t>(tile) * kRadixBins + d;
  unsigned int total = 0;
  if (d < kRadixBins) {
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const unsigned int count = warp_offsets[w][d_slot];
      warp_offsets[w][d_slot] = total;
      total += count;
    }
    StoreStatus(my_status, PackStatus(tile == 0 ? kStatusPrefix : kStatusAggregate, a.epoch, total));
  }
  const unsigned int digit_start = BlockExclusiveSum<kBlockThreads>(total, scan_scratch);
  if (d < kRadixBins) {
#pragma unroll
    for (int w = 0; w < kWarps; ++w) warp_offsets[w][d_slot] += digit_start;
  }
  __syncthreads();

  // 3. Rank (kRanksApart: and store the keys to shared memory).
  unsigned int rank[kRanksApart ? 1 : kItems];
  if constexpr (!kCountRanks) {
    const unsigned int lanemask_lt = (1u << lane) - 1;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const unsigned int digit = digit_of(key[i]);
      const unsigned int slot = slot_of(digit);
      constexpr bool kByBallot = kMatch == RankMatch::kBallot;
      constexpr bool kByMatchAny = kConcentrated == ConcentratedRank::kMatchAny;
      unsigned int peers;
      // kHotDigit: the hot digit's group is a ballot, off the match words
      // (padding, digit kRadixBins - 1, joins it when that digit is hot, as
      // it joined that digit's count).
      bool is_hot = false;
      if constexpr (kByMatchAny) {
        peers = __match_any_sync(0xffffffffu, digit);
      } else if constexpr (kByBallot) {
        peers = MatchDigit(digit);
      } else {
        unsigned int hot_mask = 0;
        if constexpr (kHotDigit) {
          is_hot = digit == hot;
          hot_mask = __ballot_sync(0xffffffffu, is_hot);
        }
        if (!is_hot) atomicOr(&match_words[warp][slot], 1u << lane);
        __syncwarp();
        peers = is_hot ? hot_mask : match_words[warp][slot];
      }
      const int leader = 31 - __clz(peers);
      unsigned int base = 0;
      if (lane == leader) base = atomicAdd(&warp_offsets[warp][slot], __popc(peers));
      base = __shfl_sync(0xffffffffu, base, leader);
      if constexpr (!kByBallot && !kByMatchAny) {
        // Every lane has read its group (the shuffle needed them all); the
        // leader clears the word for the next key.
        if (lane == leader && !is_hot) match_words[warp][slot] = 0;
        __syncwarp();
      }
      rank[i] = base + __popc(peers & lanemask_lt);
    }
  } else {
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (in_range(i)) {
        const unsigned int digit = digit_of(key[i]);
        const unsigned int r = ((warp_rank_pairs[i / 2] >> (16 * (i % 2))) & 0xffffu) +
                               warp_offsets[warp][slot_of(digit)] + (kHotDigit && digit == hot ? hot_below : 0u);
        if constexpr (kRanksApart) {
          tile_keys[r] = key[i];
          if constexpr (kHasValues) {  // the tile rank replaces the warp rank
            warp_rank_pairs[i / 2] = (warp_rank_pairs[i / 2] & (0xffff0000u >> (16 * (i % 2)))) |
                                     (r << (16 * (i % 2)));
          }
        } else {
          rank[i] = r;
        }
      }
    }
  }
  // Item i's rank in the tile.
  auto rank_of = [&](int i) -> unsigned int {
    if constexpr (kRanksApart) {
      return (warp_rank_pairs[i / 2] >> (16 * (i % 2))) & 0xffffu;
    } else {
      return rank[i];
    }
  };

  // 4. Keys to shared memory by rank (kRanksApart: done); look back
  // meanwhile; store coalesced.
  if constexpr (!kRanksApart) {
    __syncthreads();  // the counters are overwritten by the keys
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      // (Stable match ranks place the padding too, after every real key.)
      if (!kCountRanks || in_range(i)) {
        tile_keys[rank[i]] = key[i];
        if constexpr (kStageValues) tile_sources[rank[i]] = static_cast<uint16_t>(local_base + i * 32);
      }
    }
  }
  if (d < kRadixBins) {
    unsigned long long prefix = 0;
    if (tile > 0) {
      for (size_t j = tile - 1;; --j) {
        unsigned long long s;
        do {
          s = LoadStatus(a.status + j * kRadixBins + d);
        } while (((s & kStatusEpochMask) >> kStatusEpochShift) != a.epoch);
        prefix += s & kStatusValueMask;
        if (s & kStatusPrefix) break;
      }
      StoreStatus(my_status, PackStatus(kStatusPrefix, a.epoch, prefix + total));
    }
    global_base[d] = static_cast<Offset>(a.pass_offsets[d] + prefix - digit_start);
  }
  if constexpr (kStageValues) __pipeline_wait_prior(0);  // this thread's values are staged
  __syncthreads();
  const unsigned int route = s_route;
  const bool decode = route & kRouteDecode;
  Word* const keys_out = (route & kRouteToAlt) ? a.keys_alt : a.keys_out;
  auto decoded = [&](Word w) -> Word {
    if constexpr (kTransform == PassTransform::kNone) {
      return w;
    } else if constexpr (kTransform == PassTransform::kXor) {
      return w ^ (decode ? a.masks.sign ^ a.masks.flip : Word{0});
    } else {
      return decode ? a.masks.Decode(w) : w;
    }
  };
  // Digits of the stored keys, 4 per word, for the value exchange (the keys
  // in shared memory are overwritten by the values); staged values are
  // stored beside their keys instead.
  constexpr bool kExchangeValues = kHasValues && !kStageValues;
  unsigned int out_digits[kExchangeValues ? (kItems + 3) / 4 : 1] = {};
  Value* const values_out = (route & kRouteToAlt) ? a.values_alt : a.values_out;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const unsigned int j = k * kBlockThreads + threadIdx.x;
    if (full_tile || j < tile_count) {
      const Word w = tile_keys[j];
      const unsigned int dg = digit_of(w);
      if constexpr (kExchangeValues) out_digits[k / 4] |= dg << (8 * (k % 4));
      const Offset out = static_cast<Offset>(global_base[dg] + j);
      keys_out[out] = decoded(w);
      if constexpr (kStageValues) values_out[out] = staged_values[tile_sources[j]];
    }
  }
  if constexpr (kExchangeValues) {
    Value value[kItems];
#pragma unroll
    for (int i = 0; i < kItems; ++i) value[i] = in_range(i) ? a.values_in[warp_base + i * 32] : Value{};
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (!kCountRanks || in_range(i)) tile_values[rank_of(i)] = value[i];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const unsigned int j = k * kBlockThreads + threadIdx.x;
      if (full_tile || j < tile_count) {
        const unsigned int dg = (out_digits[k / 4] >> (8 * (k % 4))) & 0xffu;
        values_out[static_cast<Offset>(global_base[dg] + j)] = tile_values[j];
      }
    }
  }
}

template <typename Index>
__global__ void IotaKernel(Index* out, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    out[i] = static_cast<Index>(i);
  }
}

// out[i] = in[index[i]].
template <typename T, typename Index>
__global__ void GatherKernel(const T* __restrict__ in, const Index* __restrict__ index,
                             T* __restrict__ out, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    out[i] = in[index[i]];
  }
}

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_RADIX_KERNELS_CUH_
