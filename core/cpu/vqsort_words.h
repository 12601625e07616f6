// The CPU engine's numeric sort primitives, shared by its whole-array sort
// (core/cpu/cpu_engine.cc) and its sort of input still arriving
// (core/cpu/arriving_sort.cc), so that both produce the same bits.
#ifndef SORTD_CORE_CPU_VQSORT_WORDS_H_
#define SORTD_CORE_CPU_VQSORT_WORDS_H_

#include <cstddef>

#include "core/cpu/parallel.h"
#include "hwy/contrib/sort/vqsort.h"

namespace sortd::cpu {

// vqsort on one contiguous chunk, in the requested direction.
// A Sorter owns vqsort's small scratch buffer; one per thread is reused.
template <typename T>
void VqSortChunk(T* data, size_t n, bool descending) {
  thread_local hwy::Sorter sorter;
  if (descending) {
    sorter(data, n, hwy::SortDescending());
  } else {
    sorter(data, n, hwy::SortAscending());
  }
}

// Sorts words with vqsort, on one thread or partitioned across `threads`.
// Used for keys and for packed (key, index) words: equal words are
// bit-identical, so the partitioned sort needs no stability.
template <typename W>
void SortWords(W* data, size_t n, int threads, bool descending) {
  auto chunk = [descending](W* p, size_t len) { VqSortChunk(p, len, descending); };
  if (descending) {
    ParallelPartitionSort(data, n, threads, [](const W& a, const W& b) { return b < a; }, chunk);
  } else {
    ParallelPartitionSort(data, n, threads, [](const W& a, const W& b) { return a < b; }, chunk);
  }
}

}  // namespace sortd::cpu

#endif  // SORTD_CORE_CPU_VQSORT_WORDS_H_
