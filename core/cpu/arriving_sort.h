// The CPU engine's sort of keys still arriving (sort sessions,
// core/arriving_input.h): an MSD partition done during the upload. Worker
// threads scatter each range, as it lands, into 256 buckets by the leading
// bits of the keys' order-preserving words (core/key_transform.h), into
// chains of fixed-size blocks from one pool. When the input completes, each
// bucket is copied to its place in the array and sorted there by vqsort,
// buckets in parallel, so nothing is merged afterwards. Keys only: sorts
// with values or indices are sorted after the upload, as before.
#ifndef SORTD_CORE_CPU_ARRIVING_SORT_H_
#define SORTD_CORE_CPU_ARRIVING_SORT_H_

#include <atomic>
#include <cstddef>

#include "absl/status/status.h"
#include "core/engine.h"

namespace sortd::cpu {

// What a sort did, for tests and benchmarks.
struct ArrivingSortReport {
  // Keys scattered into buckets so far (updated while the input arrives).
  std::atomic<size_t> keys_scattered{0};
  // Buckets that held much of the keys, sorted by all threads (set on
  // success).
  int large_buckets = 0;
};

struct ArrivingSortOptions {
  // Threads that scatter ranges as they land, and that sort the buckets.
  int threads = 1;
  // Fewer keys than this are left to the sort after the upload; also the
  // size from which one bucket holding much of the keys is sorted by all
  // threads (the engine's parallel threshold).
  size_t min_keys = size_t{1} << 18;
  // Optional: filled as the sort goes.
  ArrivingSortReport* report = nullptr;
};

// Sorts sort.keys (no values, no indices) in place, in the sortd order and
// bit for bit as CpuEngine::SortNumeric would once the input is complete
// (NaNs in input order after, or before when descending, everything else),
// taking its ranges as they arrive. UNAVAILABLE, before any range is taken,
// for input it does not handle (values, indices, bytes, fewer than min_keys
// keys) or when its pool (about the array's size) cannot be allocated: the
// keys are untouched, sort them once complete. CANCELLED when the input is
// abandoned: nothing was written to the keys, every thread is joined and
// the pool is freed before it returns.
absl::Status SortKeysArriving(const ArrivingSort& sort, const ArrivingSortOptions& options);

}  // namespace sortd::cpu

#endif  // SORTD_CORE_CPU_ARRIVING_SORT_H_
