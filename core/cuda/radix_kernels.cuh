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

// Chained-scan status word per (tile, digit): 2 flag bits + 62-bit count,
// wide enough that no array needs splitting into portions.
inline constexpr unsigned long long kStatusAggregate = 1ull << 62;
inline constexpr unsigned long long kStatusPrefix = 2ull << 62;
inline constexpr unsigned long long kStatusValueMask = (1ull << 62) - 1;

struct NoValue {};

// Counts, in one read of the keys, the digits of every pass (and NaNs).
// hist is [passes][kRadixBins], zeroed by the caller.
template <typename Word, int kBlockThreads>
__global__ void __launch_bounds__(kBlockThreads)
GlobalHistogramKernel(const Word* __restrict__ keys, size_t n, KeyClass cls, Word flip,
                      unsigned long long* __restrict__ hist,
                      unsigned long long* __restrict__ nan_count) {
  constexpr int kPasses = sizeof(Word) * 8 / kRadixBits;
  __shared__ unsigned int counts[kPasses * kRadixBins];
  for (int i = threadIdx.x; i < kPasses * kRadixBins; i += kBlockThreads) counts[i] = 0;
  __syncthreads();
  unsigned int nans = 0;
  auto count_key = [&](Word bits) {
    if (cls == KeyClass::kFloat && KeyCodec<Word>::IsNan(bits)) ++nans;
    const Word w = KeyCodec<Word>::Encode(bits, cls, flip);
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

// One OneSweep digit pass. Tiles are numbered in launch order by an atomic
// counter; each tile:
//   1. loads its keys warp-striped (encoding them on the first pass),
//   2. ranks them per warp with match-any multisplit (stable: in input order),
//   3. publishes its per-digit counts and looks back for the prefix of all
//      earlier tiles (decoupled look-back),
//   4. scatters keys to shared memory by rank, then to global memory
//      coalesced, decoding on the last pass; values follow the same path.
template <typename Word, typename Value, int kBlockThreads, int kItems, int kRankChains,
          int kMinBlocks>
__global__ void __launch_bounds__(kBlockThreads, kMinBlocks)
OneSweepPassKernel(const Word* __restrict__ keys_in, Word* __restrict__ keys_out,
                   const Value* __restrict__ values_in, Value* __restrict__ values_out,
                   size_t n, int shift, KeyClass cls, Word flip, bool encode, bool decode,
                   const unsigned long long* __restrict__ pass_offsets,
                   unsigned long long* __restrict__ status,
                   unsigned int* __restrict__ tile_counter) {
  static_assert(kBlockThreads == kRadixBins, "one thread per digit in the scan steps");
  constexpr int kWarps = kBlockThreads / 32;
  constexpr int kTile = kBlockThreads * kItems;
  constexpr bool kHasValues = !std::is_same_v<Value, NoValue>;
  using ValueSlot = std::conditional_t<kHasValues, Value, char>;
  // Each warp ranks its keys in kChains independent chains (contiguous
  // halves of its segment) so that the serial counter updates of one chain
  // overlap those of the other.
  constexpr int kChains = kRankChains;
  constexpr int kChainItems = kItems / kChains;
  static_assert(kItems % kChains == 0, "items split evenly across chains");
  union Exchange {
    unsigned int warp_hist[kChains][kWarps][kRadixBins];
    Word keys[kTile];
    ValueSlot values[kHasValues ? kTile : 1];
  };
  __shared__ Exchange ex;
  __shared__ unsigned int tile_digit_start[kRadixBins];
  __shared__ unsigned long long global_base[kRadixBins];
  __shared__ unsigned int scan_scratch[kWarps];
  __shared__ unsigned int tile_hist[kRadixBins];
  __shared__ unsigned int s_tile;

  if (threadIdx.x == 0) s_tile = atomicAdd(tile_counter, 1u);
#pragma unroll
  for (int c = 0; c < kChains; ++c) {
#pragma unroll
    for (int w = 0; w < kWarps; ++w) ex.warp_hist[c][w][threadIdx.x] = 0;
  }
  tile_hist[threadIdx.x] = 0;
  __syncthreads();

  const unsigned int tile = s_tile;
  const size_t tile_base = static_cast<size_t>(tile) * kTile;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const size_t warp_base = tile_base + static_cast<size_t>(warp) * 32 * kItems;

  // 1. Load.
  Word key[kItems];
  ValueSlot value[kItems];
  unsigned int digit[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const size_t idx = warp_base + i * 32 + lane;
    if (idx < n) {
      const Word bits = keys_in[idx];
      key[i] = encode ? KeyCodec<Word>::Encode(bits, cls, flip) : bits;
      if constexpr (kHasValues) value[i] = values_in[idx];
    } else {
      key[i] = ~Word{0};
    }
    digit[i] = static_cast<unsigned int>(key[i] >> shift) & (kRadixBins - 1);
  }

  // Early counts: publish this tile's per-digit totals before ranking, so
  // that later tiles' look-back does not wait for this tile's ranking.
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (warp_base + i * 32 + lane < n) atomicAdd(&tile_hist[digit[i]], 1u);
  }
  __syncthreads();
  const unsigned int early_total = tile_hist[threadIdx.x];
  unsigned long long* my_status = status + static_cast<size_t>(tile) * kRadixBins + threadIdx.x;
  StoreStatus(my_status, (tile == 0 ? kStatusPrefix : kStatusAggregate) | early_total);

  // 2. Rank within the warp (match-any multisplit), chains interleaved.
  const unsigned int lanemask_lt = (1u << lane) - 1;
  unsigned int rank[kItems];
#pragma unroll
  for (int j = 0; j < kChainItems; ++j) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) {
      const int i = c * kChainItems + j;
      const bool valid = warp_base + i * 32 + lane < n;
      const unsigned int peers =
          __match_any_sync(0xffffffffu, valid ? digit[i] : kRadixBins + lane);
      const int leader = __ffs(peers) - 1;
      unsigned int base = 0;
      if (valid && lane == leader) {
        base = ex.warp_hist[c][warp][digit[i]];
        ex.warp_hist[c][warp][digit[i]] = base + __popc(peers);
      }
      base = __shfl_sync(0xffffffffu, base, leader);
      rank[i] = base + __popc(peers & lanemask_lt);
    }
    __syncwarp();
  }
  __syncthreads();

  // 3. Per digit: warp prefixes, tile total, publish, look back.
  const int d = threadIdx.x;
  unsigned int total = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) {  // warp w's chain 0 precedes its chain 1
      const unsigned int count = ex.warp_hist[c][w][d];
      ex.warp_hist[c][w][d] = total;
      total += count;
    }
  }
  const unsigned int digit_start = BlockExclusiveSum<kBlockThreads>(total, scan_scratch);
  tile_digit_start[d] = digit_start;
  unsigned long long prefix = 0;
  if (tile > 0) {
    size_t j = tile - 1;
    for (;;) {
      const unsigned long long s = LoadStatus(status + j * kRadixBins + d);
      if ((s & (kStatusAggregate | kStatusPrefix)) == 0) continue;  // not yet published
      prefix += s & kStatusValueMask;
      if (s & kStatusPrefix) break;
      --j;
    }
    StoreStatus(my_status, kStatusPrefix | (prefix + total));
  }
  global_base[d] = pass_offsets[d] + prefix - digit_start;
  __syncthreads();

  // 4. Scatter through shared memory.
  unsigned int tile_rank[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    tile_rank[i] = tile_digit_start[digit[i]] + ex.warp_hist[i / kChainItems][warp][digit[i]] + rank[i];
  }
  __syncthreads();  // the rank counters are overwritten by the exchange
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (warp_base + i * 32 + lane < n) ex.keys[tile_rank[i]] = key[i];
  }
  __syncthreads();
  const size_t remaining = n - tile_base;
  const unsigned int tile_count = remaining < kTile ? static_cast<unsigned int>(remaining) : kTile;
  size_t out_index[kItems];
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const unsigned int j = k * kBlockThreads + threadIdx.x;
    if (j < tile_count) {
      const Word w = ex.keys[j];
      const unsigned int dg = static_cast<unsigned int>(w >> shift) & (kRadixBins - 1);
      out_index[k] = global_base[dg] + j;
      keys_out[out_index[k]] = decode ? KeyCodec<Word>::Decode(w, cls, flip) : w;
    }
  }
  if constexpr (kHasValues) {
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (warp_base + i * 32 + lane < n) ex.values[tile_rank[i]] = value[i];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const unsigned int j = k * kBlockThreads + threadIdx.x;
      if (j < tile_count) values_out[out_index[k]] = ex.values[j];
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
