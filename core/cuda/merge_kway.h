// When a merge of sorted runs takes one k-way round instead of two-way
// rounds (MergeSortedRuns; merge_kway_kernels.cuh has the how).
// Host-only constants, so that tests can size their inputs to either side.
//
// Measured on an H200 (docs/benchmarks-history.md, "One k-way round for 5-8
// sorted runs"): a k-way round's blocks merge their slices pairwise in
// shared memory, and a level there costs about what a two-way round does,
// so the round pays only where it saves whole rounds' memory traffic
// without adding levels: 5..8 runs (3 levels against 3 rounds), keys only
// or 4-byte keys with 4-byte values (merged as one 8-byte element), from
// 2^25 4-byte and 2^24 8-byte elements (u32 2^26: -6..-8%, 2^24: even;
// u64 2^26: -23%).
#ifndef SORTD_CORE_CUDA_MERGE_KWAY_H_
#define SORTD_CORE_CUDA_MERGE_KWAY_H_

#include <cstddef>

namespace sortd::cuda {

// Non-empty runs a k-way round merges.
inline constexpr int kMergeKWayMinRuns = 5;
inline constexpr int kMergeKWayMaxRuns = 8;

// Keys from which it does, by element width (key and value bytes;
// MergeRunsProblem::kway_min_items overrides both).
inline constexpr size_t kMergeKWayMinItems4 = size_t{1} << 25;
inline constexpr size_t kMergeKWayMinItems8 = size_t{1} << 24;

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_MERGE_KWAY_H_
