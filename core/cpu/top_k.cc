#include "core/cpu/top_k.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/cpu/parallel.h"
#include "core/key_transform.h"

namespace sortd::cpu {
namespace {

template <typename T>
using Word = typename OrderedBits<T>::Word;

// (word, position): the total order whose k smallest are the answer.
template <typename W>
using Candidate = std::pair<W, uint64_t>;

// Where k is this large a share of a part (1/kTopKSelectShare or more),
// the heap takes most keys in, each a pop and a push: selecting among all
// the part's candidates at once (RadixSelect) is cheaper. Measured on the
// dev VM (Zen 3), 4096 rows of 1024 float32, k = 100: 52 ms against 74 ms
// by the heap; rows of 256: 22 against 40 ms (bench/top_k_bench.cc,
// BM_TopKRows). Parts are capped at kTopKSelectMaxKeys there, so its
// scratch stays small (1 MiB a task).

// The k smallest of `pairs` (positions rising) replace them, in no
// particular order: a radix select by bytes from the most significant.
// Each pass counts the live pairs' digit, keeps every pair below the digit
// where rank k falls and goes on with the pairs at that digit only,
// compacted in place in position order; so when the digits run out (the
// words equal) the pairs still needed are the earliest.
template <typename W>
void RadixSelect(std::vector<Candidate<W>>* pairs, size_t k) {
  std::vector<Candidate<W>>& live = *pairs;
  std::vector<Candidate<W>> kept;
  kept.reserve(k);
  size_t count_live = live.size();
  for (int shift = static_cast<int>(sizeof(W) * 8) - 8;; shift -= 8) {
    const size_t need = k - kept.size();
    uint32_t count[256] = {};
    for (size_t i = 0; i < count_live; ++i) ++count[(live[i].first >> shift) & 0xFF];
    size_t below = 0;
    uint32_t digit = 0;
    while (below + count[digit] < need) below += count[digit++];
    if (count[digit] != count_live) {  // else every live pair is at this digit
      size_t w = 0;
      for (size_t i = 0; i < count_live; ++i) {
        const uint32_t d = static_cast<uint32_t>(live[i].first >> shift) & 0xFF;
        if (d < digit) {
          kept.push_back(live[i]);
        } else if (d == digit) {
          live[w++] = live[i];
        }
      }
      count_live = w;
    }
    const size_t still = k - kept.size();
    if (still == count_live || shift == 0) {
      kept.insert(kept.end(), live.begin(), live.begin() + still);
      break;
    }
  }
  live.swap(kept);
}

// The k smallest candidates of keys[begin, end), in no particular order.
template <typename T>
std::vector<Candidate<Word<T>>> ScanPart(absl::Span<const T> keys, size_t begin, size_t end,
                                         size_t k, bool descending) {
  using W = Word<T>;
  if (k * kTopKSelectShare >= end - begin && k < end - begin &&
      end - begin <= kTopKSelectMaxKeys) {
    const W flip = descending ? ~W{0} : W{0};
    std::vector<Candidate<W>> all;
    all.reserve(end - begin);
    for (size_t i = begin; i < end; ++i) all.emplace_back(OrderedBits<T>::Encode(keys[i]) ^ flip, i);
    RadixSelect(&all, k);
    return all;
  }
  std::vector<Candidate<W>> heap;
  heap.reserve(k);
  const W flip = descending ? ~W{0} : W{0};
  size_t i = begin;
  for (; i < end && heap.size() < k; ++i) {
    heap.emplace_back(OrderedBits<T>::Encode(keys[i]) ^ flip, i);
  }
  std::make_heap(heap.begin(), heap.end());
  if (heap.empty()) return heap;
  W worst = heap.front().first;
  for (; i < end; ++i) {
    const W word = OrderedBits<T>::Encode(keys[i]) ^ flip;
    // Strictly below: an equal word comes later, so it ranks after.
    if (word < worst) {
      std::pop_heap(heap.begin(), heap.end());
      heap.back() = Candidate<W>(word, i);
      std::push_heap(heap.begin(), heap.end());
      worst = heap.front().first;
    }
  }
  return heap;
}

// Unsigned bytewise, a prefix first (the CPU engine's byte-string order).
int CompareBytes(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  const int c = n == 0 ? 0 : std::memcmp(a.data(), b.data(), n);
  if (c != 0) return c;
  return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
}

}  // namespace

template <typename T>
void TopKPositions(absl::Span<const T> keys, size_t k, SortOrder order, int threads,
                   uint64_t* out) {
  using W = Word<T>;
  const size_t n = keys.size();
  k = std::min(k, n);
  if (k == 0) return;
  const bool descending = order == SortOrder::kDescending;
  const int parts = static_cast<int>(std::clamp<size_t>(
      n / std::max<size_t>(kTopKParallelMinKeys, 4 * k), 1, std::max(threads, 1)));
  std::vector<std::vector<Candidate<W>>> heaps(parts);
  RunTasks(parts, [&](int p) {
    heaps[p] = ScanPart(keys, PartBegin(n, parts, p), PartBegin(n, parts, p + 1), k, descending);
  });
  std::vector<Candidate<W>> all = std::move(heaps[0]);
  for (int p = 1; p < parts; ++p) all.insert(all.end(), heaps[p].begin(), heaps[p].end());
  // One part: exactly k pairs, which a sort orders faster than a heap.
  if (all.size() == k) {
    std::sort(all.begin(), all.end());
  } else {
    std::partial_sort(all.begin(), all.begin() + k, all.end());
  }
  for (size_t j = 0; j < k; ++j) out[j] = all[j].second;
}

template <typename T>
TopKResult<T> TopK(absl::Span<const T> keys, size_t k, SortOrder order, int threads) {
  TopKResult<T> result;
  result.indices.resize(std::min(k, keys.size()));
  TopKPositions(keys, k, order, threads, result.indices.data());
  result.keys.reserve(result.indices.size());
  for (uint64_t i : result.indices) result.keys.push_back(keys[i]);  // as given: NaN payloads kept
  return result;
}

std::vector<uint64_t> TopKStrings(absl::Span<const std::string_view> keys, size_t k,
                                  SortOrder order) {
  const size_t n = keys.size();
  k = std::min(k, n);
  std::vector<uint64_t> heap;
  if (k == 0) return heap;
  const bool descending = order == SortOrder::kDescending;
  // The sort's order of positions: by key in `order`, then by position.
  auto before = [&](uint64_t a, uint64_t b) {
    const int c = CompareBytes(keys[a], keys[b]);
    if (c != 0) return descending ? c > 0 : c < 0;
    return a < b;
  };
  heap.reserve(k);
  size_t i = 0;
  for (; i < k; ++i) heap.push_back(i);
  std::make_heap(heap.begin(), heap.end(), before);  // the worst kept on top
  for (; i < n; ++i) {
    if (before(i, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), before);
      heap.back() = i;
      std::push_heap(heap.begin(), heap.end(), before);
    }
  }
  std::sort_heap(heap.begin(), heap.end(), before);
  return heap;
}

template TopKResult<uint32_t> TopK(absl::Span<const uint32_t>, size_t, SortOrder, int);
template void TopKPositions(absl::Span<const uint32_t>, size_t, SortOrder, int, uint64_t*);
template TopKResult<int32_t> TopK(absl::Span<const int32_t>, size_t, SortOrder, int);
template void TopKPositions(absl::Span<const int32_t>, size_t, SortOrder, int, uint64_t*);
template TopKResult<float> TopK(absl::Span<const float>, size_t, SortOrder, int);
template void TopKPositions(absl::Span<const float>, size_t, SortOrder, int, uint64_t*);
template TopKResult<uint64_t> TopK(absl::Span<const uint64_t>, size_t, SortOrder, int);
template void TopKPositions(absl::Span<const uint64_t>, size_t, SortOrder, int, uint64_t*);
template TopKResult<int64_t> TopK(absl::Span<const int64_t>, size_t, SortOrder, int);
template void TopKPositions(absl::Span<const int64_t>, size_t, SortOrder, int, uint64_t*);
template TopKResult<double> TopK(absl::Span<const double>, size_t, SortOrder, int);
template void TopKPositions(absl::Span<const double>, size_t, SortOrder, int, uint64_t*);

}  // namespace sortd::cpu
