// GPU segmented sort: many independent arrays of one key type, stored
// back to back in one buffer with a CSR offsets array, sorted by a handful
// of launches (one per length bin that has segments). This is the kernel
// behind the batcher (docs/architecture.md, "Batching"). CUB-shaped: call
// once with d_temp_storage == nullptr to size temp storage, then to sort.
// CUDA runtime only (the GPU host has no abseil).
#ifndef SORTD_CORE_CUDA_SEGMENTED_SORT_CUH_
#define SORTD_CORE_CUDA_SEGMENTED_SORT_CUH_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/cuda/radix_sort.cuh"

namespace sortd::cuda {

struct SegmentedSortProblem {
  RadixKeyType key_type = RadixKeyType::kUint32;
  bool descending = false;
  // Segment s holds keys [offsets[s], offsets[s + 1]); offsets[0] may be
  // nonzero, offsets are non-decreasing, and offsets[num_segments] < 2^32.
  // The same offsets on the host (binning is planned there, with no device
  // round trip: the batcher has them anyway) and on the device.
  int num_segments = 0;
  const uint32_t* h_offsets = nullptr;
  const uint32_t* d_offsets = nullptr;
  // Optional bounds on the segment lengths. When max_segment_items is set
  // and fits the shared-memory bins, the host does not read h_offsets at
  // all (it may be null): only the bins covering [min, max] are launched,
  // sized by residency. Otherwise the host finds the bounds in h_offsets
  // (one vectorised pass, ~15 us for 65536 segments) and uses them the
  // same way when every segment falls in one bin; segments of several
  // bins, or longer than the bins, are filed one by one.
  uint32_t min_segment_items = 0;
  uint32_t max_segment_items = 0;
  // Keys: read from d_keys_in (not modified), sorted into d_keys_out.
  const void* d_keys_in = nullptr;
  void* d_keys_out = nullptr;
  // Values (optional): 0, 4 or 8 bytes each, permuted with the keys.
  int value_bytes = 0;
  const void* d_values_in = nullptr;
  void* d_values_out = nullptr;
  // Optional: receives the permutation, local to each segment (the i-th
  // sorted key of segment s came from position offsets[s] + indices[i]).
  uint32_t* d_indices_out = nullptr;
  // Tuning (benchmarks): segments longer than this go to the merge sort
  // instead of the shared-memory bins; 0 = SegmentedBlockCapacity.
  uint32_t largest_bin_items = 0;
};

// What a segmented sort launched (for tests and benchmarks).
struct SegmentedSortStats {
  int launches = 0;          // kernels launched (binning + one per bin)
  int large_segments = 0;    // segments longer than the largest block bin,
                             // sorted together by the merge sort
  bool filed_on_host = false;  // the host read every segment's length to
                               // file it (no bounds given, several bins)
};

// The longest segment the shared-memory bins sort (the same for both key
// widths);
// longer segments are sorted together by the merge sort
// (SegmentedMergeSort: a blocksort over segment-aligned tiles, then merge
// passes within segments), a few launches for all of them.
size_t SegmentedBlockCapacity(RadixKeyType key_type);

// Sizes temp storage (d_temp_storage == nullptr) or sorts. Stable, both
// directions, the sortd order for every key type (floats: -0.0 < +0.0,
// NaNs after +inf in input order with payloads unchanged; descending is
// the exact reverse of ascending for distinct keys). Sizing reads
// h_offsets (the large segments decide the merge sort's temp storage).
cudaError_t SegmentedSort(void* d_temp_storage, size_t& temp_storage_bytes,
                          const SegmentedSortProblem& problem, cudaStream_t stream,
                          SegmentedSortStats* stats = nullptr);

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_SEGMENTED_SORT_CUH_
