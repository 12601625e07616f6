// Fork-join helpers for the CPU engine's large-array path: run tasks on
// short-lived threads, and a stable parallel merge sort built from a
// sequential chunk sort plus merge-path partitioned merges.
#ifndef SORTD_CORE_CPU_PARALLEL_H_
#define SORTD_CORE_CPU_PARALLEL_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

namespace sortd::cpu {

// Runs fn(0) .. fn(tasks-1), each on its own thread (task 0 on the caller's).
void RunTasks(int tasks, const std::function<void(int)>& fn);

// malloc-compatible (free()) allocation aligned for huge pages when large.
void* AllocateScratch(size_t bytes);

// Splits [0, n) into `parts` contiguous ranges of nearly equal size.
inline size_t PartBegin(size_t n, int parts, int p) {
  return n / parts * p + std::min<size_t>(p, n % parts);
}

// Number of elements of `a` among the first `d` outputs of a stable merge of
// a and b (elements of a go first among equals).
template <typename T, typename Less>
size_t MergePathSplit(const T* a, size_t na, const T* b, size_t nb, size_t d,
                      Less less) {
  size_t lo = d > nb ? d - nb : 0;
  size_t hi = std::min(d, na);
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (less(b[d - mid - 1], a[mid])) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// Stable merge of a and b into out using `parts` tasks per call.
template <typename T, typename Less>
void MergeSlice(const T* a, size_t na, const T* b, size_t nb, T* out,
                int parts, int p, Less less) {
  const size_t n = na + nb;
  const size_t d0 = PartBegin(n, parts, p);
  const size_t d1 = PartBegin(n, parts, p + 1);
  const size_t i0 = MergePathSplit(a, na, b, nb, d0, less);
  const size_t i1 = MergePathSplit(a, na, b, nb, d1, less);
  std::merge(a + i0, a + i1, b + (d0 - i0), b + (d1 - i1), out + d0, less);
}

// Sorts data[0, n) stably: `threads` chunks sorted by sort_chunk(ptr, len)
// in parallel, then rounds of pairwise merges, every merge split across all
// threads along its merge path. Uses n elements of scratch memory.
template <typename T, typename Less, typename ChunkSort>
void ParallelSort(T* data, size_t n, int threads, Less less,
                  ChunkSort sort_chunk) {
  if (threads <= 1 || n < 2 * static_cast<size_t>(threads)) {
    sort_chunk(data, n);
    return;
  }
  std::vector<size_t> bounds(threads + 1);
  for (int p = 0; p <= threads; ++p) bounds[p] = PartBegin(n, threads, p);
  RunTasks(threads, [&](int p) {
    sort_chunk(data + bounds[p], bounds[p + 1] - bounds[p]);
  });

  std::unique_ptr<T[]> scratch(new T[n]);
  T* src = data;
  T* dst = scratch.get();
  while (bounds.size() > 2) {
    const int runs = static_cast<int>(bounds.size()) - 1;
    const int pairs = runs / 2;
    const int parts = std::max(1, threads / std::max(1, pairs));
    RunTasks(pairs * parts + (runs % 2), [&](int task) {
      if (task == pairs * parts) {  // odd run out: carried over unchanged
        std::copy(src + bounds[runs - 1], src + n, dst + bounds[runs - 1]);
        return;
      }
      const int pair = task / parts;
      const size_t begin = bounds[2 * pair];
      const size_t mid = bounds[2 * pair + 1];
      const size_t end = bounds[2 * pair + 2];
      MergeSlice(src + begin, mid - begin, src + mid, end - mid, dst + begin,
                 parts, task % parts, less);
    });
    std::vector<size_t> next;
    for (size_t r = 0; r < bounds.size(); r += 2) next.push_back(bounds[r]);
    if (next.back() != n) next.push_back(n);
    bounds.swap(next);
    std::swap(src, dst);
  }
  if (src != data) {
    RunTasks(threads, [&](int p) {
      const size_t b = PartBegin(n, threads, p);
      const size_t e = PartBegin(n, threads, p + 1);
      std::copy(src + b, src + e, data + b);
    });
  }
}

// Uninitialised scratch memory for n elements, backed by transparent huge
// pages where the kernel allows: first-touch page faults of a 4 KiB-page
// buffer cost more than a partition pass over large arrays.
template <typename W>
class ScratchBuffer {
 public:
  explicit ScratchBuffer(size_t n) : data_(static_cast<W*>(AllocateScratch(n * sizeof(W)))) {}
  ~ScratchBuffer() { std::free(data_); }
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  W* get() const { return data_; }

 private:
  W* data_;
};

// Sorts words whose equal elements are interchangeable (bit-identical keys,
// or packed (key, index) words, which are all distinct), so stability needs
// no care. Instead of sorting chunks and merging (a merge costs about as
// much as a whole vqsort), it samples splitters, partitions the words into
// one bucket per thread (count, then scatter), sorts the buckets
// concurrently, and copies them back. Heavily duplicated keys can make one
// bucket large; the result is still correct, only less parallel.
template <typename W, typename Less, typename ChunkSort>
void ParallelPartitionSort(W* data, size_t n, int threads, Less less,
                           ChunkSort sort_chunk) {
  constexpr size_t kOversample = 64;
  if (threads <= 1 || n < kOversample * static_cast<size_t>(threads) * 4) {
    sort_chunk(data, n);
    return;
  }
  const int buckets = threads;
  // Splitters from a sorted pseudo-random sample (an LCG walk avoids
  // resonating with periodic inputs).
  std::vector<W> sample(kOversample * buckets);
  uint64_t state = 0x9E3779B97F4A7C15ull ^ n;
  for (W& w : sample) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    w = data[(state >> 11) % n];
  }
  std::sort(sample.begin(), sample.end(), less);
  std::vector<W> splitters(buckets - 1);
  for (int b = 0; b + 1 < buckets; ++b) splitters[b] = sample[(b + 1) * kOversample];
  // An element goes to the number of splitters strictly less than it.
  auto bucket_of = [&](const W& w) {
    int b = 0;
    for (const W& s : splitters) b += less(s, w) ? 1 : 0;
    return b;
  };

  std::vector<size_t> counts(static_cast<size_t>(threads) * buckets, 0);
  // Each thread counts (and later scatters) with its own local copy: the
  // shared arrays sit in one cache line and would bounce between cores.
  RunTasks(threads, [&](int t) {
    std::vector<size_t> local(buckets, 0);
    for (size_t i = PartBegin(n, threads, t), e = PartBegin(n, threads, t + 1); i < e; ++i) {
      ++local[bucket_of(data[i])];
    }
    std::copy(local.begin(), local.end(), counts.begin() + static_cast<size_t>(t) * buckets);
  });
  // offsets[t][b]: where thread t writes its first element of bucket b.
  std::vector<size_t> offsets(counts.size());
  std::vector<size_t> bucket_begin(buckets + 1, 0);
  size_t running = 0;
  for (int b = 0; b < buckets; ++b) {
    bucket_begin[b] = running;
    for (int t = 0; t < threads; ++t) {
      offsets[static_cast<size_t>(t) * buckets + b] = running;
      running += counts[static_cast<size_t>(t) * buckets + b];
    }
  }
  bucket_begin[buckets] = n;

  ScratchBuffer<W> scratch(n);
  RunTasks(threads, [&](int t) {
    std::vector<size_t> o(offsets.begin() + static_cast<size_t>(t) * buckets,
                          offsets.begin() + static_cast<size_t>(t + 1) * buckets);
    W* out = scratch.get();
    for (size_t i = PartBegin(n, threads, t), e = PartBegin(n, threads, t + 1); i < e; ++i) {
      out[o[bucket_of(data[i])]++] = data[i];
    }
  });
  RunTasks(buckets, [&](int b) {
    const size_t begin = bucket_begin[b];
    const size_t len = bucket_begin[b + 1] - begin;
    sort_chunk(scratch.get() + begin, len);
    std::copy(scratch.get() + begin, scratch.get() + begin + len, data + begin);
  });
}

}  // namespace sortd::cpu

#endif  // SORTD_CORE_CPU_PARALLEL_H_
