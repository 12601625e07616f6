// The CPU engine's numeric sort primitives, shared by its whole-array sort
// (core/cpu/cpu_engine.cc) and its sort of input still arriving
// (core/cpu/arriving_sort.cc), so that both produce the same bits: our LSD
// radix sort (core/cpu/radix_sort.h) where it measures faster, vqsort
// (Highway) elsewhere.
#ifndef SORTD_CORE_CPU_VQSORT_WORDS_H_
#define SORTD_CORE_CPU_VQSORT_WORDS_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "core/cpu/cpu_tuning.h"
#include "core/cpu/parallel.h"
#include "core/cpu/parallel_radix.h"
#include "core/cpu/radix_sort.h"
#include "core/cpu/scratch_lease.h"
#include "hwy/contrib/sort/vqsort.h"

namespace sortd::cpu {

// Crossovers from vqsort to the radix sort, one thread: per CPU tuning
// (core/cpu/cpu_tuning.h). 64-bit keys only stay with vqsort under every
// tuning: its 64-bit path beat the radix sort at every size measured on
// Zen 4 (2^12: 21 vs 37 us; 2^24: 160 vs 348 ms with 8 passes) and on the
// Intel Xeon (3-4x); on Zen 3 the radix sort alone was 1.14-1.20x faster
// at 2^22-2^24, but through the engine even (the scratch of a 2^24-key
// sort is fresh memory each call).
// - Packed (32-bit key << 32 | index) words: radixsorting their key half
//   (RadixSortWordsAbove) won in isolation from 2^14 up (2^24: 125 vs 157
//   ms) but lost in the engine (2^20: 72 vs 88 Mkeys/s): the packed array
//   and the scratch are fresh memory per call, whose page faults cost
//   about what the sort gains on the Zen 4 VM. Hence the argsort's own route
//   (CpuEngine::ArgsortRadix32).
// - Permutations above the parallel threshold on an engine of at most this
//   many threads take the radix route (pairs sorted together, argsorts by
//   the radix sort; across the threads per kParallelRadixMaxThreads), not
//   the parallel argsort + gather or vqsort of packed words. Measured with
//   the radix route on one thread (the Zen 4 VM's 2 vCPUs): pairs sorted
//   together against the parallel argsort + gather
//   (`--benchmark_min_time=3`): 2^22 101.6 vs 32.6 Mkeys/s, 2^24 67.1 vs
//   31.1; stable argsort, one-thread radix vs the parallel vqsort of packed
//   words: u32 2^22 34.5 vs 56.3 ms, 2^24 162-175 vs 265-364 ms; u64 2^22
//   63 vs 132 ms, 2^24 285 vs 552-799 ms (2^20: 7.5 vs 7.2 ms, even). Not
//   measured with more threads (a many-core CPU-only host): there the
//   parallel routes stay until they are.
inline constexpr int kRadixPermutationMaxThreads = 2;
// - Above the parallel threshold on an engine of at most this many threads:
//   the parallel radix sort (core/cpu/parallel_radix.h) for 4-byte keys
//   (instead of the sample partition with a radix sort per bucket) and for
//   the pairs and argsorts that take the radix sort (instead of one
//   thread); measured on the Zen 4 VM's 2 vCPUs (docs/benchmarks.md). Not
//   yet measured on a many-core host: there the other routes stay until it
//   is.
inline constexpr int kParallelRadixMaxThreads = 2;
// - The parallel radix sort of 4-byte keys from this many keys, under every
//   CPU tuning (SortWords).
inline constexpr size_t kParallelRadixMinKeys32 = 512;

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

// One chunk of keys (or of bit-identical-when-equal words) on one thread:
// the radix sort for 4-byte integer words from the tuning's
// radix_min_keys32 up, vqsort otherwise. Both give the same bits: equal
// keys are identical.
template <typename T>
void SortChunk(T* data, size_t n, bool descending) {
  if constexpr (std::is_integral_v<T> && sizeof(T) == 4) {
    if (n >= ActiveCpuCrossovers().radix_min_keys32) {
      const ScratchLease scratch(n * sizeof(T));
      RadixSortKeys(data, n, descending, scratch.as<T>());
      return;
    }
  }
  VqSortChunk(data, n, descending);
}

// RadixSortPairs, across `threads` by the parallel radix sort where that
// applies (see kParallelRadixMaxThreads) and the keys spread, else on the
// calling thread.
template <typename K, typename V>
void RadixSortPairsAcross(int threads, K* keys, V* values, size_t n, bool descending, void* scratch) {
  if (threads > 1 && threads <= kParallelRadixMaxThreads &&
      ParallelRadixSortPairs(keys, values, n, descending, scratch, threads)) {
    return;
  }
  RadixSortPairs(keys, values, n, descending, scratch);
}

// Sorts words, on one thread, by the parallel radix sort (4-byte words on
// engines of at most kParallelRadixMaxThreads threads), or partitioned
// across `threads`. Used for keys and for 128-bit packed (key, index)
// words: equal words are bit-identical, so no route needs stability.
template <typename W>
void SortWords(W* data, size_t n, int threads, bool descending) {
  if constexpr (std::is_integral_v<W> && sizeof(W) == 4) {
    // Across 2 threads the radix sort won on Zen 4 and on Zen 3 too, where
    // vqsort wins on one thread (2 threads, u32 2^18 / 2^20: 1.3-1.8 / 4.4
    // ms against 2.2-2.4 / 9.2 ms partitioned into vqsort chunks), so this
    // gate is not the tuning's (a 2-thread Intel engine: not measured).
    if (threads > 1 && threads <= kParallelRadixMaxThreads && n >= kParallelRadixMinKeys32) {
      // The lease ends before the partition route takes its own leases.
      const ScratchLease scratch(n * sizeof(W));
      if (ParallelRadixSortKeys(data, n, descending, scratch.as<W>(), threads)) return;
    }
  }
  auto chunk = [descending](W* p, size_t len) { SortChunk(p, len, descending); };
  if (descending) {
    ParallelPartitionSort(data, n, threads, [](const W& a, const W& b) { return b < a; }, chunk);
  } else {
    ParallelPartitionSort(data, n, threads, [](const W& a, const W& b) { return a < b; }, chunk);
  }
}

}  // namespace sortd::cpu

#endif  // SORTD_CORE_CPU_VQSORT_WORDS_H_
