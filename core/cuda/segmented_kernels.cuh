// Segmented sort kernels. Each segment is sorted by a group of threads -
// one warp for short segments, one block for longer ones - with a bitonic
// network over (ordered key, position) pairs held in registers: strides
// below the items per thread stay in a thread, strides within a warp use
// shuffles, longer strides go through shared memory. Comparing the position
// too makes the network a stable sort; the sorted keys are then gathered
// from the input by position, so key bits (NaN payloads included) come back
// unchanged and no decode is needed.
#ifndef SORTD_CORE_CUDA_SEGMENTED_KERNELS_CUH_
#define SORTD_CORE_CUDA_SEGMENTED_KERNELS_CUH_

#include <cstdint>

#include "core/cuda/radix_transform.cuh"

namespace sortd::cuda::segmented {

// A network element: the ordered key word and the position in the segment.
template <typename Word>
struct Elem;

template <>
struct Elem<uint32_t> {
  uint64_t v;  // key in the high half: one 64-bit compare orders both
  __device__ __forceinline__ static Elem Make(uint32_t key, uint32_t pos) {
    return {(static_cast<uint64_t>(key) << 32) | pos};
  }
  __device__ __forceinline__ static Elem Pad() { return {~0ull}; }
  __device__ __forceinline__ uint32_t pos() const { return static_cast<uint32_t>(v); }
  __device__ __forceinline__ static bool Less(const Elem& a, const Elem& b) { return a.v < b.v; }
  __device__ __forceinline__ Elem ShflXor(int mask) const {
    return {__shfl_xor_sync(0xffffffffu, v, mask)};
  }
};

template <>
struct Elem<uint64_t> {
  uint64_t k;
  uint32_t p;
  __device__ __forceinline__ static Elem Make(uint64_t key, uint32_t pos) { return {key, pos}; }
  __device__ __forceinline__ static Elem Pad() { return {~0ull, ~0u}; }
  __device__ __forceinline__ uint32_t pos() const { return p; }
  __device__ __forceinline__ static bool Less(const Elem& a, const Elem& b) {
    return a.k < b.k || (a.k == b.k && a.p < b.p);
  }
  __device__ __forceinline__ Elem ShflXor(int mask) const {
    return {__shfl_xor_sync(0xffffffffu, k, mask), __shfl_xor_sync(0xffffffffu, p, mask)};
  }
};

// Shared-memory slot of element e, padded so that a warp storing its
// threads' consecutive runs of elements hits distinct banks.
template <typename E>
__device__ __forceinline__ int SmemSlot(int e) {
  return e + (e >> (sizeof(E) == 8 ? 4 : 3));
}
template <typename E>
constexpr int SmemSlots(int n) {
  return n + (n >> (sizeof(E) == 8 ? 4 : 3));
}

// Keeps the smaller (take_min) or larger of x and its partner's element.
template <typename E>
__device__ __forceinline__ void Keep(E& x, const E& other, bool take_min) {
  if (E::Less(other, x) == take_min) x = other;
}

// Sorts the kGroup * kItems elements held by a group of kGroup threads
// (thread t holds elements t * kItems + i) ascending. Groups larger than a
// warp exchange long strides through `smem` (SmemSlots(N) elements) and
// must be whole blocks; groups smaller than a warp shuffle within their
// lanes (every lane of the warp takes part).
template <int kGroup, int kItems, typename E>
__device__ __forceinline__ void BitonicSort(E (&x)[kItems], int t, E* smem) {
  constexpr int kN = kGroup * kItems;
#pragma unroll
  for (int k = 2; k <= kN; k <<= 1) {
#pragma unroll
    for (int j = k >> 1; j > 0; j >>= 1) {
      if (j < kItems) {
#pragma unroll
        for (int i = 0; i < kItems; ++i) {
          const int p = i ^ j;
          if (p > i) {
            const bool ascending = ((t * kItems + i) & k) == 0;
            const E lo = x[i], hi = x[p];
            if (E::Less(hi, lo) == ascending) {
              x[i] = hi;
              x[p] = lo;
            }
          }
        }
      } else if (j < kItems * (kGroup < 32 ? kGroup : 32)) {
        const int lane_mask = j / kItems;
        const bool lower = (t & lane_mask) == 0;
#pragma unroll
        for (int i = 0; i < kItems; ++i) {
          const bool ascending = ((t * kItems + i) & k) == 0;
          Keep(x[i], x[i].ShflXor(lane_mask), lower == ascending);
        }
      } else {
        __syncthreads();  // the previous exchange's reads are done
#pragma unroll
        for (int i = 0; i < kItems; ++i) smem[SmemSlot<E>(t * kItems + i)] = x[i];
        __syncthreads();
#pragma unroll
        for (int i = 0; i < kItems; ++i) {
          const int e = t * kItems + i;
          const bool ascending = (e & k) == 0;
          Keep(x[i], smem[SmemSlot<E>(e ^ j)], ((e & j) == 0) == ascending);
        }
      }
    }
  }
}

template <typename Word>
struct SegmentedParams {
  const uint32_t* offsets;
  const Word* keys_in;
  Word* keys_out;
  KeyMasks<Word> masks;
  int value_bytes;
  const void* values_in;
  void* values_out;
  uint32_t* indices_out;  // optional
};

// Shared memory one block of a bin kernel needs.
template <typename Word, int kThreads, int kItems, int kGroup>
constexpr size_t BinSmemBytes() {
  using E = Elem<Word>;
  constexpr int kN = kGroup * kItems;
  constexpr size_t perm = sizeof(uint32_t) * kN * (kThreads / kGroup);
  constexpr size_t net = kGroup > 32 ? sizeof(E) * SmemSlots<E>(kN) : 0;
  return perm > net ? perm : net;
}

// One bin: groups of kGroup threads (part of a warp, a warp, or the whole
// block) each sort one segment of at most kGroup * kItems keys. The bin's
// segment ids are in `list` (*count of them, filed on the device, at most
// max_count); the grid has a group for each of max_count and the extra
// groups exit (groups smaller than a warp sort nothing instead, so that
// their warp's shuffles keep every lane).
template <typename Word, int kThreads, int kItems, int kGroup>
__global__ void __launch_bounds__(kThreads)
    SegmentedBinKernel(SegmentedParams<Word> p, const uint32_t* __restrict__ list,
                       const uint32_t* __restrict__ count, uint32_t max_count) {
  using E = Elem<Word>;
  static_assert((kGroup <= 32 && 32 % kGroup == 0) || kGroup == kThreads,
                "a group is part of a warp, a warp or the block");
  constexpr int kGroups = kThreads / kGroup;
  constexpr int kN = kGroup * kItems;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int group = threadIdx.x / kGroup;
  const int t = threadIdx.x % kGroup;
  const uint32_t item = blockIdx.x * kGroups + group;
  const uint32_t items = min(*count, max_count);
  // Uniform per warp (or block): a warp's first group has its smallest
  // item. One group per segment: a loop over segments here raised register
  // use ~3x (u64, 256x4: 63 -> 175) and halved the rate.
  constexpr int kWarpGroups = kGroup < 32 ? 32 / kGroup : 1;
  if (item - item % kWarpGroups >= items) return;
  const bool active = item < items;
  const uint32_t segment = active ? list[item] : 0;
  const uint32_t begin = p.offsets[segment];
  const int len = active ? static_cast<int>(p.offsets[segment + 1] - begin) : 0;
  const Word* keys = p.keys_in + begin;

  E x[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int e = t * kItems + i;
    x[i] = e < len ? E::Make(p.masks.Encode(keys[e]), static_cast<uint32_t>(e)) : E::Pad();
  }
  BitonicSort<kGroup, kItems>(x, t, reinterpret_cast<E*>(smem_raw));

  // Positions go through shared memory so that the writes are coalesced.
  uint32_t* perm = reinterpret_cast<uint32_t*>(smem_raw) + group * kN;
  if constexpr (kGroup > 32) __syncthreads(); else __syncwarp();
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int e = t * kItems + i;
    if (e < len) perm[e] = x[i].pos();
  }
  if constexpr (kGroup > 32) __syncthreads(); else __syncwarp();
  Word* keys_out = p.keys_out + begin;
  for (int e = t; e < len; e += kGroup) {
    const uint32_t from = perm[e];
    keys_out[e] = keys[from];
    if (p.indices_out != nullptr) p.indices_out[begin + e] = from;
    if (p.value_bytes == 4) {
      static_cast<uint32_t*>(p.values_out)[begin + e] =
          static_cast<const uint32_t*>(p.values_in)[begin + from];
    } else if (p.value_bytes == 8) {
      static_cast<uint64_t*>(p.values_out)[begin + e] =
          static_cast<const uint64_t*>(p.values_in)[begin + from];
    }
  }
}

constexpr int kMaxBins = 16;

// Length bounds of the bins and where each bin's ids start in the list.
struct BinPlan {
  int bins = 0;
  uint32_t max_len[kMaxBins];
  uint32_t base[kMaxBins];
  uint32_t capacity[kMaxBins];  // ids the bin has room for
};

// Files every segment short enough for a bin under its bin's ids (order
// within a bin is arbitrary). One atomic per warp and bin. A segment whose
// bin has no room (lengths outside the bounds the caller promised) is
// not sorted.
__global__ void BinSegmentsKernel(const uint32_t* __restrict__ offsets, int num_segments,
                                  BinPlan plan, uint32_t* cursors, uint32_t* list) {
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  int bin = -1;
  if (s < num_segments) {
    const uint32_t len = offsets[s + 1] - offsets[s];
    for (int b = plan.bins - 1; b >= 0 && len <= plan.max_len[b]; --b) bin = b;
  }
  const unsigned peers = __match_any_sync(0xffffffffu, bin);
  const int lane = threadIdx.x & 31;
  const int leader = __ffs(peers) - 1;
  uint32_t first = 0;
  if (bin >= 0 && lane == leader) first = atomicAdd(&cursors[bin], __popc(peers));
  first = __shfl_sync(0xffffffffu, first, leader);
  if (bin >= 0) {
    const uint32_t at = first + __popc(peers & ((1u << lane) - 1));
    if (at < plan.capacity[bin]) list[plan.base[bin] + at] = static_cast<uint32_t>(s);
  }
}

}  // namespace sortd::cuda::segmented

#endif  // SORTD_CORE_CUDA_SEGMENTED_KERNELS_CUH_
