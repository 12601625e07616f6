// Block sorts as ranges land, then one stable multiway merge
// (core/cpu/arriving_sort.h).
#include "core/cpu/arriving_sort.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cpu/parallel.h"
#include "core/key_transform.h"

namespace sortd::cpu {
namespace {

// Sorted blocks to merge: block b holds [bounds[b], bounds[b + 1]).
template <typename T>
struct Runs {
  T* data;
  std::vector<size_t> bounds;
  size_t count() const { return bounds.size() - 1; }
};

// The sortd order as a comparison on encoded words: every NaN is one key
// (after +inf), -0.0 before +0.0; descending reverses distinct keys.
template <typename T>
struct SortdLess {
  bool descending;
  bool operator()(const T& a, const T& b) const {
    const auto wa = OrderedBits<T>::Encode(a);
    const auto wb = OrderedBits<T>::Encode(b);
    return descending ? wb < wa : wa < wb;
  }
};

// Merges part `t` of `parts` of the runs into out: the elements between
// splitters t-1 and t (elements equal to a splitter go left, in every run,
// so equal keys never straddle parts and keep their run order).
template <typename T>
void MergePart(const Runs<T>& runs, const std::vector<T>& splitters, int t, int parts,
               SortdLess<T> less, T* out) {
  const size_t k = runs.count();
  std::vector<const T*> at(k), end(k);
  size_t out_begin = 0;
  for (size_t b = 0; b < k; ++b) {
    const T* begin = runs.data + runs.bounds[b];
    const T* stop = runs.data + runs.bounds[b + 1];
    const T* lo = t == 0 ? begin : std::upper_bound(begin, stop, splitters[t - 1], less);
    const T* hi = t == parts - 1 ? stop : std::upper_bound(begin, stop, splitters[t], less);
    at[b] = lo;
    end[b] = hi;
    // Elements of this run before the part: they come out first.
    out_begin += static_cast<size_t>(lo - begin);
  }
  T* o = out + out_begin;
  // A binary heap of run indices, ordered by (head key, run): ties take the
  // earlier run, which holds the earlier input positions.
  auto later = [&](size_t x, size_t y) {
    if (less(*at[y], *at[x])) return true;
    if (less(*at[x], *at[y])) return false;
    return x > y;
  };
  std::vector<size_t> heap;
  for (size_t b = 0; b < k; ++b) {
    if (at[b] != end[b]) heap.push_back(b);
  }
  std::make_heap(heap.begin(), heap.end(), later);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const size_t b = heap.back();
    *o++ = *at[b]++;
    if (at[b] != end[b]) {
      std::push_heap(heap.begin(), heap.end(), later);
    } else {
      heap.pop_back();
    }
  }
}

// One stable pass merging every run into scratch, then back into place.
template <typename T>
void MergeRuns(const Runs<T>& runs, size_t n, int threads, bool descending, T* scratch) {
  const SortdLess<T> less{descending};
  const int parts = std::max(1, threads);
  // Splitters from an even sample of every run.
  std::vector<T> sample;
  const size_t per_run = std::max<size_t>(1, size_t{64} * parts / runs.count());
  for (size_t b = 0; b < runs.count(); ++b) {
    const size_t len = runs.bounds[b + 1] - runs.bounds[b];
    for (size_t i = 0; i < per_run && len > 0; ++i) {
      sample.push_back(runs.data[runs.bounds[b] + len * i / per_run]);
    }
  }
  std::sort(sample.begin(), sample.end(), less);
  std::vector<T> splitters;
  for (int t = 1; t < parts; ++t) splitters.push_back(sample[sample.size() * t / parts]);
  RunTasks(parts, [&](int t) { MergePart(runs, splitters, t, parts, less, scratch); });
  RunTasks(parts, [&](int t) {
    const size_t b = PartBegin(n, parts, t), e = PartBegin(n, parts, t + 1);
    std::memcpy(runs.data + b, scratch + b, (e - b) * sizeof(T));
  });
}

// Ready blocks, sorted by a few threads while ranges keep arriving.
class BlockSorter {
 public:
  BlockSorter(int threads, std::function<void(size_t)> sort) : sort_(std::move(sort)) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { Run(); });
  }
  ~BlockSorter() { Finish(); }
  void Add(size_t block) {
    std::lock_guard<std::mutex> lock(mu_);
    ready_.push_back(block);
    wake_.notify_one();
  }
  // Sorts what is queued, then returns once every worker is done.
  void Finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      wake_.notify_all();
    }
    for (std::thread& w : workers_) {
      if (w.joinable()) w.join();
    }
  }

 private:
  void Run() {
    for (;;) {
      size_t block;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [this] { return closed_ || !ready_.empty(); });
        if (ready_.empty()) return;
        block = ready_.front();
        ready_.pop_front();
      }
      sort_(block);
    }
  }

  std::function<void(size_t)> sort_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<size_t> ready_;
  bool closed_ = false;
  std::vector<std::thread> workers_;
};

template <typename T>
absl::Status SortTyped(const ArrivingSort& sort, int threads, size_t min_block,
                       const std::function<absl::Status(NumericSpan)>& sort_block) {
  T* keys = static_cast<T*>(sort.keys.data);
  const size_t n = sort.keys.size;
  // Blocks: a few per thread so that sorting keeps up with the arrivals,
  // but no smaller than min_block (the merge's cost grows with their count).
  const size_t blocks = std::clamp<size_t>(n / std::max<size_t>(min_block, 1), 2,
                                           static_cast<size_t>(std::max(2, 4 * threads)));
  std::unique_ptr<T[]> scratch(new (std::nothrow) T[n]);
  if (!scratch) return absl::UnavailableError("no scratch memory for a sort while parts arrive");
  Runs<T> runs{keys, std::vector<size_t>(blocks + 1)};
  for (size_t b = 0; b <= blocks; ++b) runs.bounds[b] = PartBegin(n, static_cast<int>(blocks), static_cast<int>(b));
  std::vector<size_t> missing(blocks);
  for (size_t b = 0; b < blocks; ++b) missing[b] = runs.bounds[b + 1] - runs.bounds[b];
  std::mutex failed_mu;
  absl::Status failed;
  {
    BlockSorter sorter(std::max(1, threads), [&](size_t b) {
      absl::Status s = sort_block(
          NumericSpan(sort.keys.type, keys + runs.bounds[b], runs.bounds[b + 1] - runs.bounds[b]));
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(failed_mu);
        failed.Update(s);
      }
    });
    for (;;) {
      ArrivedRange range;
      const ArrivingInput::Next next = sort.input->Wait(&range);
      if (next == ArrivingInput::Next::kComplete) break;
      if (next == ArrivingInput::Next::kAbandoned) {
        sorter.Finish();
        return absl::CancelledError("the input was abandoned");
      }
      if (range.array != ArrivedRange::kKeys || range.begin >= range.end || range.end > n) continue;
      // The blocks this range fills; a block is ready once nothing is missing.
      size_t b = static_cast<size_t>(std::upper_bound(runs.bounds.begin(), runs.bounds.end(),
                                                      range.begin) - runs.bounds.begin()) - 1;
      for (; b < blocks && runs.bounds[b] < range.end; ++b) {
        const size_t lo = std::max(range.begin, runs.bounds[b]);
        const size_t hi = std::min(range.end, runs.bounds[b + 1]);
        missing[b] -= hi - lo;
        if (missing[b] == 0) sorter.Add(b);
      }
    }
    // Complete: every block was handed out, so every block is queued.
    sorter.Finish();
  }
  if (!failed.ok()) return failed;
  MergeRuns(runs, n, threads, sort.order == SortOrder::kDescending, scratch.get());
  return absl::OkStatus();
}

}  // namespace

absl::Status SortKeysArriving(const ArrivingSort& sort, int threads, size_t min_block,
                              const std::function<absl::Status(NumericSpan)>& sort_block) {
  if (sort.input == nullptr || sort.values != nullptr || !sort.indices.empty()) {
    return absl::UnavailableError("the CPU sorts keys-only input while it arrives");
  }
  if (sort.keys.size < 2 * std::max<size_t>(min_block, 1)) {
    return absl::UnavailableError("too small to sort while it arrives");
  }
  absl::Status status = absl::UnavailableError("not a numeric key type");
  VisitNumeric(sort.keys.type, [&](auto tag) {
    status = SortTyped<decltype(tag)>(sort, threads, min_block, sort_block);
  });
  return status;
}

}  // namespace sortd::cpu
