// GPU selection (issue #53): the first k keys of sortd's stable sort of an
// array in device memory, or of each of its segments, without sorting the
// rest. CUB-shaped sizing (TopKTempBytes), then TopK on a stream. CUDA
// runtime only (the GPU host has no abseil).
//
// Keys become order words (core/cuda/radix_transform.cuh: complemented for
// descending, every NaN one word), so the answer is the k smallest (word,
// position) pairs of each segment: equal keys keep their input order.
// Three paths, chosen on the host per segment:
//   rows      segments of up to kTopKRowMaxItems keys, one block each: the
//             keys in registers, a radix select by 8-bit digits (shared
//             histograms; the digit holding rank k kept, repeated until
//             its bucket is all taken), ties taken by position (a block
//             scan), the kept keys ranked among themselves in shared memory.
//   guess     one longer segment with k <= kTopKGuessMaxK: one block picks a
//             threshold word from an even sample of the keys (rank chosen
//             so that about 2^13 keys lie below it), one pass over the keys
//             appends every (word, position) at or below it to a candidate
//             buffer, and one block selects and ranks k of the candidates.
//             One read of the input. When the guess fails (fewer than k
//             keys at or below it, or more than the buffer: heavy ties,
//             skew), an exact radix select by 8-bit digits over the whole
//             input narrows the threshold with the host reading each
//             histogram back, and ties at the final word are taken by
//             position (per-tile counts scanned on the host).
//   sort      a longer segment with k > kTopKGuessMaxK: the radix sort of
//             the segment with its positions, the first k kept.
// Segments longer than kTopKRowMaxItems are done one at a time (one call
// of the guess or sort path each, each synchronising the stream): many long
// segments are better sent as one array each or sorted.
#ifndef SORTD_CORE_CUDA_SELECT_TOP_K_CUH_
#define SORTD_CORE_CUDA_SELECT_TOP_K_CUH_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/cuda/radix_sort.cuh"

namespace sortd::cuda {

// The longest segment the rows path takes (512 threads x 8 keys).
inline constexpr size_t kTopKRowMaxItems = 4096;
// The largest k the guess path takes (its final ranking is k^2 / 1024
// compares in one block); larger k sorts the segment.
inline constexpr size_t kTopKGuessMaxK = 2048;

struct TopKProblem {
  RadixKeyType key_type = RadixKeyType::kUint32;
  bool descending = false;
  // Keys in device memory, not modified.
  const void* d_keys = nullptr;
  size_t num_items = 0;
  // Segments: row_length > 0: rows of that many keys (num_items a
  // multiple); else num_segments > 0 with h_offsets (host memory,
  // num_segments + 1 non-decreasing offsets from 0 to num_items); else
  // one segment, the whole array. Every segment below 2^32 keys.
  size_t row_length = 0;
  size_t num_segments = 0;
  const uint64_t* h_offsets = nullptr;
  uint64_t k = 0;  // >= 1
  // Outputs in device memory: segment s's min(k, length) kept keys, in
  // sorted order, at out_offset(s) = the kept counts of segments before it.
  uint32_t* d_positions = nullptr;  // positions within the segment
  void* d_keys_out = nullptr;       // optional: the keys as they were
  // Optional values (value_bytes 4 or 8, num_items of them in device
  // memory), gathered for the kept keys into d_values_out.
  int value_bytes = 0;
  const void* d_values = nullptr;
  void* d_values_out = nullptr;
};

// What a selection ran (tests and benchmarks).
struct TopKStats {
  int row_launches = 0;      // rows-path kernels
  int guesses = 0;           // guess-path segments
  int guesses_failed = 0;    // of those, taken by the exact select
  int sorted_segments = 0;   // sort-path segments
};

// Device bytes of temp storage TopK needs for `problem` (reads h_offsets).
// cudaErrorInvalidValue for problems it does not take (k = 0, a segment of
// 2^32 keys or more, offsets that do not cover the keys).
cudaError_t TopKTempBytes(const TopKProblem& problem, size_t* temp_bytes);

// Selects into the problem's outputs, using `temp_bytes` (at least
// TopKTempBytes) of device memory at d_temp. Queued on `stream`, which it
// synchronises before returning (the guess path reads back whether its
// guess held; the exact select reads histograms).
cudaError_t TopK(void* d_temp, size_t temp_bytes, const TopKProblem& problem,
                 cudaStream_t stream, TopKStats* stats = nullptr);

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_SELECT_TOP_K_CUH_
