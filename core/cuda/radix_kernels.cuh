// OneSweep radix sort kernels: the upfront histogram of every digit, the
// per-digit exclusive scan, the chained-scan digit pass, and the small
// helpers (iota, gather) of the argsort path.
#ifndef SORTD_CORE_CUDA_RADIX_KERNELS_CUH_
#define SORTD_CORE_CUDA_RADIX_KERNELS_CUH_

#include <cstdint>
#include <type_traits>

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

// Counts, in one read of the keys, the digits of every pass (and NaNs).
// hist is [passes][kRadixBins], zeroed by the caller.
template <typename Word, int kBlockThreads>
__global__ void __launch_bounds__(kBlockThreads)
GlobalHistogramKernel(const Word* __restrict__ keys, size_t n, KeyMasks<Word> masks,
                      unsigned long long* __restrict__ hist,
                      unsigned long long* __restrict__ nan_count) {
  constexpr int kPasses = sizeof(Word) * 8 / kRadixBits;
  __shared__ unsigned int counts[kPasses * kRadixBins];
  for (int i = threadIdx.x; i < kPasses * kRadixBins; i += kBlockThreads) counts[i] = 0;
  __syncthreads();
  unsigned int nans = 0;
  auto count_key = [&](Word bits) {
    if (masks.canonical_nan && KeyCodec<Word>::IsNan(bits)) ++nans;
    const Word w = masks.Encode(bits);
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      atomicAdd(&counts[p * kRadixBins + ((w >> (p * kRadixBits)) & (kRadixBins - 1))], 1u);
    }
  };
  // kLoads independent loads per thread per step keep memory busy.
  constexpr int kLoads = HistogramTuning::kLoadsPerThread;
  const size_t stride = static_cast<size_t>(gridDim.x) * kBlockThreads;
  size_t i = blockIdx.x * static_cast<size_t>(kBlockThreads) + threadIdx.x;
  for (; i + (kLoads - 1) * stride < n; i += kLoads * stride) {
    Word bits[kLoads];
#pragma unroll
    for (int k = 0; k < kLoads; ++k) bits[k] = keys[i + k * stride];
#pragma unroll
    for (int k = 0; k < kLoads; ++k) count_key(bits[k]);
  }
  for (; i < n; i += stride) count_key(keys[i]);
  __syncthreads();
  for (int i = threadIdx.x; i < kPasses * kRadixBins; i += kBlockThreads) {
    if (counts[i] != 0) atomicAdd(&hist[i], static_cast<unsigned long long>(counts[i]));
  }
  nans = __reduce_add_sync(0xffffffffu, nans);
  if ((threadIdx.x & 31) == 0 && nans != 0) atomicAdd(nan_count, static_cast<unsigned long long>(nans));
}

// One block per pass: offsets[p][d] = sum of hist[p][0..d).
template <int kBlockThreads>
__global__ void __launch_bounds__(kBlockThreads)
DigitOffsetsKernel(const unsigned long long* __restrict__ hist, unsigned long long* __restrict__ offsets) {
  static_assert(kBlockThreads == kRadixBins, "one thread per digit");
  __shared__ unsigned long long scan[kRadixBins];
  const int d = threadIdx.x;
  const size_t base = static_cast<size_t>(blockIdx.x) * kRadixBins;
  scan[d] = hist[base + d];
  __syncthreads();
  for (int offset = 1; offset < kRadixBins; offset <<= 1) {
    const unsigned long long add = d >= offset ? scan[d - offset] : 0;
    __syncthreads();
    scan[d] += add;
    __syncthreads();
  }
  offsets[base + d] = scan[d] - hist[base + d];
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

// Shared-memory bytes of one OneSweep tile (dynamic: beyond the 48 KiB of
// static shared memory for wide keys or values).
template <typename Word, typename Value, int kBlockThreads, int kItems>
constexpr size_t OneSweepSharedBytes() {
  constexpr size_t kTile = static_cast<size_t>(kBlockThreads) * kItems;
  constexpr size_t counters = static_cast<size_t>(kBlockThreads / 32) * kRadixBins * sizeof(unsigned int);
  constexpr size_t keys = kTile * sizeof(Word);
  constexpr size_t values = kTile * sizeof(Value);
  constexpr size_t a = counters > keys ? counters : keys;
  return a > values ? a : values;
}

// One OneSweep digit pass. Tiles are numbered in launch order by an atomic
// counter; each tile:
//   1. loads its keys warp-striped (encoding them on the first pass) and
//      counts digits per warp in shared memory ("early counts"),
//   2. publishes its per-digit totals (so later tiles' look-back never waits
//      on this tile's ranking), scans them into tile-local digit starts and
//      turns the per-warp counts into each warp's running offsets,
//   3. ranks its keys: a ballot match finds the lanes with the same digit,
//      their highest lane bumps the warp's running offset by the group size
//      (one shared atomic per group), ranks are stable in input order,
//   4. writes keys to shared memory by rank, looks back for the prefix of all
//      earlier tiles (decoupled look-back), then stores keys to global
//      memory coalesced (decoding on the last pass); values are loaded only
//      now and take the same path.
// Items past n (last tile) carry the largest digit, are ranked after every
// real item of their warp, and are never stored. Offset: 32-bit when
// n < 2^32 (cheaper shared lookups and address math; sums wrap modulo 2^32
// and are exact), else 64-bit. (A kernel specialised for full tiles was
// tried: without the runtime bounds checks the compiler hoists more work
// and spills at 3 blocks/SM.)
template <typename Word, typename Value, typename Offset, int kBlockThreads, int kItems, int kMinBlocks>
__global__ void __launch_bounds__(kBlockThreads, kMinBlocks)
OneSweepPassKernel(const Word* __restrict__ keys_in, Word* __restrict__ keys_out,
                   const Value* __restrict__ values_in, Value* __restrict__ values_out,
                   size_t n, int shift, KeyMasks<Word> masks, bool encode, bool decode,
                   const unsigned long long* __restrict__ pass_offsets,
                   unsigned long long* __restrict__ status, unsigned int epoch,
                   unsigned int* __restrict__ tile_counter) {
  static_assert(kBlockThreads >= kRadixBins && kBlockThreads % 32 == 0,
                "one thread per digit in the scan steps");
  constexpr int kWarps = kBlockThreads / 32;
  constexpr int kTile = kBlockThreads * kItems;
  constexpr bool kHasValues = !std::is_same_v<Value, NoValue>;
  using ValueSlot = std::conditional_t<kHasValues, Value, Word>;
  // One dynamic buffer, three lives: per-warp digit counters (steps 1-3),
  // then the tile's keys, then its values.
  extern __shared__ __align__(16) unsigned char smem[];
  auto warp_offsets = reinterpret_cast<unsigned int(*)[kRadixBins]>(smem);
  Word* tile_keys = reinterpret_cast<Word*>(smem);
  ValueSlot* tile_values = reinterpret_cast<ValueSlot*>(smem);
  __shared__ Offset global_base[kRadixBins];
  __shared__ unsigned int scan_scratch[kWarps];
  __shared__ unsigned int s_tile;

  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  if (threadIdx.x == 0) s_tile = atomicAdd(tile_counter, 1u);
  for (int b = lane; b < kRadixBins; b += 32) warp_offsets[warp][b] = 0;
  __syncthreads();

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
  auto digit_of = [&](Word w) {
    return static_cast<unsigned int>(w >> shift) & (kRadixBins - 1);
  };

  // 1. Load and count.
  Word key[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (in_range(i)) {
      const Word bits = keys_in[warp_base + i * 32];
      key[i] = encode ? masks.Encode(bits) : bits;
    } else {
      key[i] = ~Word{0};
    }
  }
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (in_range(i)) atomicAdd(&warp_offsets[warp][digit_of(key[i])], 1u);
  }
  __syncthreads();

  // 2. Publish early totals; digit starts; per-warp running offsets.
  const int d = threadIdx.x;
  unsigned long long* my_status = status + static_cast<size_t>(tile) * kRadixBins + d;
  unsigned int total = 0;
  if (d < kRadixBins) {
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const unsigned int count = warp_offsets[w][d];
      warp_offsets[w][d] = total;
      total += count;
    }
    StoreStatus(my_status, PackStatus(tile == 0 ? kStatusPrefix : kStatusAggregate, epoch, total));
  }
  const unsigned int digit_start = BlockExclusiveSum<kBlockThreads>(total, scan_scratch);
  if (d < kRadixBins) {
#pragma unroll
    for (int w = 0; w < kWarps; ++w) warp_offsets[w][d] += digit_start;
  }
  __syncthreads();

  // 3. Rank.
  const unsigned int lanemask_lt = (1u << lane) - 1;
  unsigned int rank[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const unsigned int digit = digit_of(key[i]);
    const unsigned int peers = MatchDigit(digit);
    const int leader = 31 - __clz(peers);
    unsigned int base = 0;
    if (lane == leader) base = atomicAdd(&warp_offsets[warp][digit], __popc(peers));
    base = __shfl_sync(0xffffffffu, base, leader);
    rank[i] = base + __popc(peers & lanemask_lt);
  }
  __syncthreads();  // the counters are overwritten by the keys

  // 4. Keys to shared memory by rank; look back meanwhile; store coalesced.
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (in_range(i)) tile_keys[rank[i]] = key[i];
  }
  if (d < kRadixBins) {
    unsigned long long prefix = 0;
    if (tile > 0) {
      for (size_t j = tile - 1;; --j) {
        unsigned long long s;
        do {
          s = LoadStatus(status + j * kRadixBins + d);
        } while (((s & kStatusEpochMask) >> kStatusEpochShift) != epoch);
        prefix += s & kStatusValueMask;
        if (s & kStatusPrefix) break;
      }
      StoreStatus(my_status, PackStatus(kStatusPrefix, epoch, prefix + total));
    }
    global_base[d] = static_cast<Offset>(pass_offsets[d] + prefix - digit_start);
  }
  __syncthreads();
  // Digits of the stored keys, 4 per word, for the value scatter (the keys
  // in shared memory are overwritten by the values).
  unsigned int out_digits[kHasValues ? (kItems + 3) / 4 : 1] = {};
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const unsigned int j = k * kBlockThreads + threadIdx.x;
    if (full_tile || j < tile_count) {
      const Word w = tile_keys[j];
      const unsigned int dg = digit_of(w);
      if constexpr (kHasValues) out_digits[k / 4] |= dg << (8 * (k % 4));
      keys_out[static_cast<Offset>(global_base[dg] + j)] = decode ? masks.Decode(w) : w;
    }
  }
  if constexpr (kHasValues) {
    Value value[kItems];
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (in_range(i)) value[i] = values_in[warp_base + i * 32];
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (in_range(i)) tile_values[rank[i]] = value[i];
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
