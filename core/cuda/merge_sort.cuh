// GPU merge sort (merge path): public CUDA-facing API. Our kernels
// (core/cuda/merge_kernels.cuh): a blocksort of register tiles, then
// partitioned global merge passes. It sorts what radix sort cannot:
// byte-string keys (argsort by unsigned lexicographic order), and it merges
// sorted runs (arrays larger than the device pool are sorted chunk by chunk
// and merged, core/cuda/gpu_worker.cu). Numeric keys work too (the
// benchmark against cub::DeviceMergeSort, and the crossover measurement).
// CUB-shaped: call once with d_temp_storage == nullptr to size temp
// storage, then to sort; every call takes a stream. CUDA runtime only.
#ifndef SORTD_CORE_CUDA_MERGE_SORT_CUH_
#define SORTD_CORE_CUDA_MERGE_SORT_CUH_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/cuda/radix_sort.cuh"

namespace sortd::cuda {

// Merge passes over at most this many tiles search each tile's splits in
// the merge kernel itself; larger passes run a partition kernel first
// (merge_sort.cu says why).
inline constexpr uint32_t kMergeFusedSplitsMaxTiles = 1024;

// Keys per blocksort tile for keys of `key_bytes` (4, 8; 16 for the byte
// strings' internal keys): tests aim at its edges.
size_t MergeSortTileItems(int key_bytes);

// Numeric keys, with optional values or an argsort permutation.
struct MergeSortProblem {
  RadixKeyType key_type = RadixKeyType::kUint32;
  size_t num_items = 0;  // < 2^32 when d_indices_out is set
  bool descending = false;
  // Keys: read from d_keys_in (not modified), sorted into d_keys_out.
  const void* d_keys_in = nullptr;
  void* d_keys_out = nullptr;
  // Values (optional): 0, 4 or 8 bytes each, permuted with the keys.
  int value_bytes = 0;
  const void* d_values_in = nullptr;
  void* d_values_out = nullptr;
  // Optional, instead of values: receives the permutation (the i-th sorted
  // key came from position d_indices_out[i]).
  uint32_t* d_indices_out = nullptr;
};

// Sizes temp storage (d_temp_storage == nullptr) or sorts; sizing reads
// key_type, num_items, value_bytes and whether d_indices_out is set. Stable,
// both directions, the sortd order (floats: -0.0 < +0.0, NaNs after +inf /
// first when descending, in input order with payloads unchanged).
cudaError_t MergeSort(void* d_temp_storage, size_t& temp_storage_bytes,
                      const MergeSortProblem& problem, cudaStream_t stream);

// Independent segments of one array, each sorted on its own by the merge
// sort, all in the same launches: a blocksort over tiles that never
// straddle segments, then merge passes that pair runs only within a
// segment (segments with fewer tiles are copied through the later passes).
// The segmented sort's path for segments longer than its shared-memory
// bins. Keys outside the listed segments are not touched.
struct SegmentedMergeProblem {
  RadixKeyType key_type = RadixKeyType::kUint32;
  bool descending = false;
  // Segment s is keys [h_begins[s], h_ends[s]) (host arrays); segments do
  // not overlap; ends are < 2^32.
  int num_segments = 0;
  const uint32_t* h_begins = nullptr;
  const uint32_t* h_ends = nullptr;
  const void* d_keys_in = nullptr;  // not modified
  void* d_keys_out = nullptr;
  int value_bytes = 0;  // 0, 4 or 8
  const void* d_values_in = nullptr;
  void* d_values_out = nullptr;
  // Optional: the permutation, local to each segment (the i-th sorted key
  // of segment s came from h_begins[s] + d_indices_out[h_begins[s] + i]).
  uint32_t* d_indices_out = nullptr;
};

// Sizes temp storage (d_temp_storage == nullptr: reads the segments, the
// key type and value_bytes; not the device pointers, so the size holds
// with or without d_indices_out) or sorts. Same order and stability as
// MergeSort.
cudaError_t SegmentedMergeSort(void* d_temp_storage, size_t& temp_storage_bytes,
                               const SegmentedMergeProblem& problem, cudaStream_t stream);

// Sorted runs stored back to back, merged into one sorted array.
struct MergeRunsProblem {
  RadixKeyType key_type = RadixKeyType::kUint32;
  bool descending = false;  // the order the runs are sorted in
  // Run r is [h_run_offsets[r], h_run_offsets[r + 1]); h_run_offsets[0]
  // is 0 and h_run_offsets[num_runs] the number of keys. Host memory: the
  // pass plan is made on the host and read in both calls.
  int num_runs = 0;
  const size_t* h_run_offsets = nullptr;
  const void* d_keys_in = nullptr;  // not modified
  void* d_keys_out = nullptr;
  int value_bytes = 0;              // 0, 4 or 8
  const void* d_values_in = nullptr;
  void* d_values_out = nullptr;
  // Merges of 5..8 non-empty runs (keys only, or 4-byte keys with 4-byte
  // values) from this many keys take one k-way round (merge_kway.h); 0:
  // the default for the widths. Tests lower it to reach that round with
  // few keys.
  size_t kway_min_items = 0;
};

// Sizes temp storage or merges. Stable: equal keys keep run order, then
// their order within the run (so merging the sorted chunks of an array
// gives the stable sort of the array).
cudaError_t MergeSortedRuns(void* d_temp_storage, size_t& temp_storage_bytes,
                            const MergeRunsProblem& problem, cudaStream_t stream);

// Temp storage enough for MergeSortedRuns of num_items keys in at most
// max_runs runs, whatever their lengths (callers that size before they
// know the runs: the radix sort, which merges a few runs it finds).
size_t MergeSortedRunsTempBound(RadixKeyType key_type, size_t num_items, int value_bytes, int max_runs);

// Byte-string keys: num_items strings stored back to back in d_bytes,
// string i = d_bytes[d_offsets[i], d_offsets[i + 1]).
struct BytesArgsortProblem {
  size_t num_items = 0;  // < 2^32 - 1
  bool descending = false;
  const uint8_t* d_bytes = nullptr;
  const uint64_t* d_offsets = nullptr;  // num_items + 1 entries
  uint32_t* d_indices_out = nullptr;    // receives the permutation
};

// Sizes temp storage or sorts: unsigned lexicographic order, a proper
// prefix before the longer string; stable (equal strings in input order),
// descending the exact reverse for distinct strings. The first 8 bytes of
// every string travel with it in the key; longer common prefixes are
// compared in device memory.
cudaError_t ArgsortBytes(void* d_temp_storage, size_t& temp_storage_bytes,
                         const BytesArgsortProblem& problem, cudaStream_t stream);

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_MERGE_SORT_CUH_
