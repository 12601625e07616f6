// The CPU engine's sort of input that is still arriving (sort sessions,
// core/arriving_input.h): instead of waiting for the last part and then
// sorting everything, the array is cut into blocks, and each block is
// sorted as soon as all its elements have landed, on threads of its own,
// while later parts are still on the wire. When the input completes, the
// sorted blocks are merged stably in a single multiway pass whose output is
// split across threads by splitter keys. Keys only: sorts with values or
// indices are sorted after the upload, as before.
#ifndef SORTD_CORE_CPU_ARRIVING_SORT_H_
#define SORTD_CORE_CPU_ARRIVING_SORT_H_

#include <functional>

#include "absl/status/status.h"
#include "core/engine.h"

namespace sortd::cpu {

// Sorts sort.keys (no values, no indices) in place, stably in the sortd
// order, as its ranges arrive. `sort_block` sorts one block on the calling
// thread. `threads`: the most blocks sorted at once, and the merge's
// threads. UNAVAILABLE, before any range is taken, for input it does not
// handle (values, indices, fewer than two blocks' worth of keys) or when
// its scratch memory (the array's size) cannot be had: the keys are then
// untouched, sort them once complete. CANCELLED when the input is
// abandoned (the keys are then partly sorted).
absl::Status SortKeysArriving(const ArrivingSort& sort, int threads, size_t min_block,
                              const std::function<absl::Status(NumericSpan block)>& sort_block);

}  // namespace sortd::cpu

#endif  // SORTD_CORE_CPU_ARRIVING_SORT_H_
