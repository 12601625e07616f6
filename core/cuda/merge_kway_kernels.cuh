// One k-way round for a merge of kMergeKWayMinRuns..kMergeKWayMaxRuns
// sorted runs (MergeSortedRuns; merge_kway.h says when),
// instead of ceil(log2 k) two-way rounds that each read and write every
// key:
//   SampleRunsKernel  every S-th key of each run and its position: k short
//                     sorted runs of samples, which the two-way rounds
//                     merge (a small merge).
//   RunSplitsKernel   every q-th merged sample is a splitter; for each
//                     splitter and run, how many of the run's keys come
//                     before it in the merge's order (key, then run, then
//                     position: a stable merge). A binary search among the
//                     run's samples, then one among S keys of the run.
//   KWayMergeKernel   block b merges what lies between splitters b and
//                     b + 1 in every run: loads the k slices into shared
//                     memory, merges them pairwise in ceil(log2 k) levels
//                     there (each level's threads shared out among its
//                     pairs by their lengths, so no thread straddles two
//                     pairs), and stores the last level like a two-way
//                     merge tile. 4-byte values travel with their keys
//                     as one 8-byte element (KeyValue): carrying their
//                     positions through the levels instead, to pick the
//                     values at the store, made the round 2x slower than
//                     two-way rounds (H200, u32/u32).
// Why a block's slices fit: between two consecutive splitters lie q
// samples in all, c_r of them from run r; run r's keys there lie between
// its sample before them and its sample after them, so there are at most
// (c_r + 1) S - 1 of them, and at most (q + k) S - k in all. The host picks
// S and q so that this is at most the tile's capacity.
#ifndef SORTD_CORE_CUDA_MERGE_KWAY_KERNELS_CUH_
#define SORTD_CORE_CUDA_MERGE_KWAY_KERNELS_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/cuda/merge_kernels.cuh"
#include "core/cuda/merge_kway.h"

namespace sortd::cuda::merge {

// The runs of a k-way round, non-empty ones only (positions < 2^32).
struct KWayRuns {
  uint32_t begin[kMergeKWayMaxRuns + 1];         // run r: keys [begin[r], begin[r + 1])
  uint32_t sample_begin[kMergeKWayMaxRuns + 1];  // its samples, in the samples' arrays
  int num_runs;
  int stride_log2;  // S = 2^stride_log2 keys between samples

  // The run holding `pos` (begin[0] <= pos < begin[num_runs]), or holding
  // sample `i` when given sample_begin.
  __device__ __forceinline__ int RunOf(uint32_t pos, const uint32_t (&starts)[kMergeKWayMaxRuns + 1]) const {
    int r = 0;
#pragma unroll
    for (int t = 1; t < kMergeKWayMaxRuns; ++t) r += t < num_runs && pos >= starts[t];
    return r;
  }
};

template <typename Key>
__global__ void SampleRunsKernel(const Key* __restrict__ keys, KWayRuns runs, Key* __restrict__ sample_keys,
                                 uint32_t* __restrict__ sample_pos, uint32_t num_samples) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= num_samples) return;
  const int r = runs.RunOf(i, runs.sample_begin);
  const uint32_t pos = runs.begin[r] + ((i - runs.sample_begin[r]) << runs.stride_log2);
  sample_keys[i] = keys[pos];
  sample_pos[i] = pos;
}

// The first index in [lo, hi) where the monotone `holds` is false (hi when
// it holds throughout).
template <typename Holds>
__device__ __forceinline__ uint32_t FirstFalseSerial(uint32_t lo, uint32_t hi, const Holds& holds) {
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (holds(mid)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// splits[b * k + r] for b in [0, num_buckets]: how many keys of run r come
// before splitter b (row 0: none; row num_buckets: the whole run). The
// splitter b (0 < b < num_buckets) is merged sample b * q.
template <typename Less>
__global__ void RunSplitsKernel(const typename Less::Key* __restrict__ keys,
                                const typename Less::Key* __restrict__ sample_keys,
                                const typename Less::Key* __restrict__ merged_keys,
                                const uint32_t* __restrict__ merged_pos, KWayRuns runs, uint32_t num_buckets,
                                uint32_t q, Less less, uint32_t* __restrict__ splits) {
  using Key = typename Less::Key;
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t k = static_cast<uint32_t>(runs.num_runs);
  const uint32_t b = t / k;
  const int r = static_cast<int>(t % k);
  if (b > num_buckets) return;
  const uint32_t begin = runs.begin[r], len = runs.begin[r + 1] - begin;
  uint32_t count = 0;
  if (b == num_buckets) {
    count = len;
  } else if (b > 0) {
    const Key v = merged_keys[b * q];
    const uint32_t pos = merged_pos[b * q];
    const int m = runs.RunOf(pos, runs.begin);
    if (r == m) {
      count = pos - begin;
    } else {
      // Run r's key x comes first when smaller, or equal from an earlier run.
      auto before = [&](const Key& x) { return r < m ? !less(v, x) : less(x, v); };
      const uint32_t s0 = runs.sample_begin[r];
      const uint32_t samples = runs.sample_begin[r + 1] - s0;
      const uint32_t c =
          FirstFalseSerial(0, samples, [&](uint32_t i) { return before(sample_keys[s0 + i]); });
      if (c > 0) {
        // Key (c - 1) S comes first, key c S (if any) does not.
        const uint32_t lo = ((c - 1) << runs.stride_log2) + 1;
        const uint32_t hi = min(c << runs.stride_log2, len);
        count = FirstFalseSerial(lo, hi, [&](uint32_t i) { return before(keys[begin + i]); });
      }
    }
  }
  splits[b * k + r] = count;
}

// A key and its value, merged as one element by the key alone.
template <typename Key, typename Value>
struct KeyValue {
  Key key;
  Value value;
};

template <typename Less>
struct KeyValueLess {
  Less less;
  template <typename Value>
  __device__ __forceinline__ bool operator()(const KeyValue<typename Less::Key, Value>& a,
                                             const KeyValue<typename Less::Key, Value>& b) const {
    return less(a.key, b.key);
  }
};

// What a k-way round merges: keys (Value = NoValue) or KeyValue elements.
template <typename Less, typename Value>
struct KWayElement {
  using Type = KeyValue<typename Less::Key, Value>;
  using Order = KeyValueLess<Less>;
  static __device__ __forceinline__ Type Load(const typename Less::Key* keys, const Value* values, uint32_t i) {
    return {keys[i], values[i]};
  }
  static __device__ __forceinline__ const typename Less::Key& KeyOf(const Type& e) { return e.key; }
  static __device__ __forceinline__ Order OrderOf(const Less& less) { return {less}; }
};

template <typename Less>
struct KWayElement<Less, NoValue> {
  using Type = typename Less::Key;
  using Order = Less;
  static __device__ __forceinline__ Type Load(const Type* keys, const NoValue*, uint32_t i) { return keys[i]; }
  static __device__ __forceinline__ const Type& KeyOf(const Type& e) { return e; }
  static __device__ __forceinline__ const Less& OrderOf(const Less& less) { return less; }
};

// NT threads of VT keys; a block's slices hold at most
// KWayTileCapacity(NT, VT) keys (each level's pairs waste less than VT
// keys' worth of threads, at most kMergeKWayMaxRuns / 2 pairs).
__host__ __device__ constexpr int KWayTileCapacity(int nt, int vt) { return (nt - kMergeKWayMaxRuns / 2) * vt; }

template <int NT, int VT, int kMinBlocks, typename Less, typename Value>
__global__ void __launch_bounds__(NT, kMinBlocks)
    KWayMergeKernel(const typename Less::Key* __restrict__ keys_in, typename Less::Key* __restrict__ keys_out,
                    const Value* __restrict__ values_in, Value* __restrict__ values_out, KWayRuns runs,
                    const uint32_t* __restrict__ splits, KeyIo<Less> io) {
  using Element = KWayElement<Less, Value>;
  using Key = typename Element::Type;  // what the levels merge
  constexpr int NV = NT * VT;
  constexpr int kMax = kMergeKWayMaxRuns;
  __shared__ struct {
    Key keys[NV + 1];  // + 1: MergeOutputs may look one past a range
  } s;
  // Slice r of the tile: [off[r], off[r + 1]); its key x is the input's
  // key x + base[r] (unsigned wrap-around cancels).
  __shared__ int off[kMax + 1];
  __shared__ uint32_t base[kMax];
  __shared__ uint32_t out_begin;
  const auto less = Element::OrderOf(io.less);
  const int k = runs.num_runs;
  // Warp 0 reads the splits (lane r: run r; all loads at once) and scans
  // the slice lengths.
  if (threadIdx.x < 32) {
    const int r = static_cast<int>(threadIdx.x);
    const uint32_t* row = splits + static_cast<size_t>(blockIdx.x) * k;
    const uint32_t lo = r < k ? row[r] : 0u;
    const uint32_t len = r < k ? row[k + r] - lo : 0u;
    uint32_t at = len, before = lo;  // inclusive scan of len, sum of lo
#pragma unroll
    for (int d = 1; d < kMax; d *= 2) {
      const uint32_t up = __shfl_up_sync(0xffffffffu, at, d);
      if (r >= d) at += up;
      before += __shfl_xor_sync(0xffffffffu, before, d);
    }
    if (r < kMax) {
      off[r + 1] = static_cast<int>(at);
      if (r < k) base[r] = runs.begin[r] + lo - (at - len);
    }
    if (r == 0) {
      off[0] = 0;
      out_begin = before;
    }
  }
  __syncthreads();
  const int count = off[kMax];
  // The slice of tile key x (x < count): off[] in registers, so that the
  // per-key test indexes no array. Runs past k are empty: the scan left
  // their off[] at count.
  int bounds[kMax - 1];
#pragma unroll
  for (int r = 1; r < kMax; ++r) bounds[r - 1] = off[r];
  auto slice_of = [&](int x) {
    int r = 0;
#pragma unroll
    for (int t = 0; t < kMax - 1; ++t) r += x >= bounds[t];
    return r;
  };
#pragma unroll
  for (int i = 0; i < VT; ++i) {
    const int x = i * NT + threadIdx.x;
    if (x < count) s.keys[x] = Element::Load(keys_in, values_in, x + base[slice_of(x)]);
  }
  __syncthreads();

  // Levels: lists of `width` slices merged in pairs. Every level but the
  // last has several pairs; a pair's threads each take VT outputs, the
  // pair's last one fewer.
  Key out[VT];
  int slot[VT];
  int width = 1;
  for (; 2 * width < k; width *= 2) {
    int first_thread = 0, a0 = 0, a_mid = 0, a_end = 0, diag = -1;
#pragma unroll
    for (int p = 0; p < kMax / 2; ++p) {
      const int lo = off[min(2 * p * width, k)];
      const int mid = off[min((2 * p + 1) * width, k)];
      const int hi = off[min((2 * p + 2) * width, k)];
      const int threads = (hi - lo + VT - 1) / VT;
      const int t = static_cast<int>(threadIdx.x) - first_thread;
      if (diag < 0 && t >= 0 && t < threads) {
        a0 = lo;
        a_mid = mid;
        a_end = hi;
        diag = t * VT;
      }
      first_thread += threads;
    }
    const int valid = diag < 0 ? 0 : a_end - a0 - diag;  // this thread's outputs
    if (diag >= 0) MergeOutputs<VT>(s.keys, a0, a_mid - a0, a_mid, a_end - a_mid, diag, out, slot, less);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < VT; ++i) {
      if (i < valid) s.keys[a0 + diag + i] = out[i];
    }
    __syncthreads();
  }

  // The last level: one pair, every thread VT outputs of the tile.
  const int mid = off[width];
  MergeOutputs<VT>(s.keys, 0, mid, mid, count - mid, min(static_cast<int>(threadIdx.x) * VT, count), out, slot,
                   less);
  __syncthreads();
#pragma unroll
  for (int i = 0; i < VT; ++i) s.keys[threadIdx.x * VT + i] = out[i];
  __syncthreads();
  ForEachTileOutput<NT, VT>(count, io, [&](int j, auto decode) {
    const Key& e = s.keys[j];
    typename Less::Key key = Element::KeyOf(e);
    if constexpr (decltype(decode)::value) key = io.less.Decode(key);
    keys_out[out_begin + j] = key;
    if constexpr (!std::is_same_v<Value, NoValue>) values_out[out_begin + j] = e.value;
  });
}

}  // namespace sortd::cuda::merge

#endif  // SORTD_CORE_CUDA_MERGE_KWAY_KERNELS_CUH_
