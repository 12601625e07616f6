// MSD partition while the ranges land, bucket sorts at the end
// (core/cpu/arriving_sort.h).
#include "core/cpu/arriving_sort.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/cpu/parallel.h"
#include "core/cpu/vqsort_words.h"
#include "core/key_transform.h"

namespace sortd::cpu {
namespace {

constexpr int kBucketBits = 8;
constexpr int kBuckets = 1 << kBucketBits;
// Ranges are scattered in pieces of at most this many keys, so that the
// workers share a large part evenly.
constexpr size_t kPieceKeys = size_t{1} << 16;
// The keys whose range picks the buckets (before any is scattered).
constexpr size_t kSampleKeys = size_t{1} << 16;
// Block sizes in bytes: small arrays take small blocks, so that the
// partly filled last block of every worker and bucket costs little.
constexpr size_t kMinBlockBytes = size_t{1} << 10;
constexpr size_t kMaxBlockBytes = size_t{16} << 10;

// Bits needed to write w (0 for 0).
template <typename Word>
int BitWidth(Word w) {
  int bits = 0;
  for (; w != 0; w >>= 1) ++bits;
  return bits;
}

// The bucket of an ordered word: (word - lo) >> shift, clamped to the
// buckets. Non-decreasing in the word, so bucket b's keys all come before
// bucket b + 1's in ascending order, whatever lo and shift are; they only
// decide how evenly the keys spread. Keys outside the range guessed from
// the first keys go to the first or last bucket.
template <typename Word>
struct Digit {
  Word lo = 0;
  int shift = sizeof(Word) * 8 - kBucketBits;
  uint32_t operator()(Word w) const {
    const Word d = w < lo ? Word{0} : static_cast<Word>(w - lo) >> shift;
    return d >= Word{kBuckets} ? uint32_t{kBuckets - 1} : static_cast<uint32_t>(d);
  }
};

// A worker's buckets: per bucket a chain of blocks (ids into the pool), the
// last one being filled through `cursor`.
template <typename S>
struct WorkerBuckets {
  struct Cursor {
    S* at = nullptr;
    S* end = nullptr;
  };
  Cursor cursor[kBuckets];
  std::vector<size_t> chain[kBuckets];
  size_t nans = 0;
  // Pieces that held NaNs: their NaNs are read back in input order at the end.
  std::vector<std::pair<size_t, size_t>> nan_pieces;
};

template <typename T>
class ArrivingPartition {
 public:
  using Bits = OrderedBits<T>;
  using Word = typename Bits::Word;
  static constexpr bool kFloat = std::is_floating_point_v<T>;
  // What the blocks hold: floats as ordered words (the engine sorts those),
  // integers as they are (the sorts order them natively).
  using Stored = std::conditional_t<kFloat, Word, T>;

  ArrivingPartition(const ArrivingSort& sort, const ArrivingSortOptions& options)
      : keys_(static_cast<T*>(sort.keys.data)),
        n_(sort.keys.size),
        descending_(sort.order == SortOrder::kDescending),
        threads_(std::max(1, options.threads)),
        min_keys_(options.min_keys),
        input_(sort.input),
        report_(options.report) {}

  ~ArrivingPartition() {
    Stop(/*drain=*/false);
    std::free(pool_);
  }

  // UNAVAILABLE when the pool cannot be had (nothing taken yet).
  absl::Status Allocate() {
    size_t block_bytes = n_ * sizeof(Stored) / (static_cast<size_t>(threads_) * kBuckets * 8);
    block_bytes = std::clamp(size_t{1} << (BitWidth(std::max<size_t>(block_bytes, 1)) - 1),
                             kMinBlockBytes, kMaxBlockBytes);
    block_ = block_bytes / sizeof(Stored);
    // Every (worker, bucket) chain holds floor(count / block) + 1 blocks at
    // most (its last one partly filled or empty), so this never runs out.
    blocks_ = n_ / block_ + static_cast<size_t>(threads_) * kBuckets + 1;
    try {
      pool_ = static_cast<Stored*>(AllocateScratch(blocks_ * block_ * sizeof(Stored)));
    } catch (const std::bad_alloc&) {
      return absl::UnavailableError("no memory for the pool of a sort while parts arrive");
    }
    return absl::OkStatus();
  }

  absl::Status Run() {
    std::vector<ArrivedRange> early;  // held until the buckets are chosen
    size_t early_keys = 0;
    for (;;) {
      ArrivedRange range;
      const ArrivingInput::Next next = input_->Wait(&range);
      if (next == ArrivingInput::Next::kAbandoned) {
        Stop(/*drain=*/false);
        return absl::CancelledError("the input was abandoned");
      }
      if (next == ArrivingInput::Next::kComplete) break;
      if (range.array != ArrivedRange::kKeys || range.begin >= range.end || range.end > n_) {
        continue;
      }
      if (workers_.empty()) {
        early.push_back(range);
        early_keys += range.end - range.begin;
        if (early_keys < kSampleKeys) continue;
        StartWorkers(early);
        early.clear();
        continue;
      }
      Enqueue(range);
    }
    if (workers_.empty()) StartWorkers(early);
    Stop(/*drain=*/true);
    WriteSorted();
    return absl::OkStatus();
  }

 private:
  // Chooses the buckets from the range of the first keys, then starts the
  // workers on them.
  void StartWorkers(const std::vector<ArrivedRange>& first) {
    size_t total = 0;
    for (const ArrivedRange& r : first) total += r.end - r.begin;
    const size_t stride = std::max<size_t>(1, total / kSampleKeys);
    bool any = false;
    Word lo = 0, hi = 0;
    for (const ArrivedRange& r : first) {
      for (size_t i = r.begin; i < r.end; i += stride) {
        const T k = keys_[i];
        if constexpr (kFloat) {
          if (k != k) continue;
        }
        const Word w = Bits::Encode(k);
        lo = any ? std::min(lo, w) : w;
        hi = any ? std::max(hi, w) : w;
        any = true;
      }
    }
    if (any) {
      digit_.lo = lo;
      const int width = BitWidth(static_cast<Word>(hi - lo));
      digit_.shift = std::max(0, width - kBucketBits);
    }
    buckets_.resize(threads_);
    for (int t = 0; t < threads_; ++t) {
      buckets_[t] = std::make_unique<WorkerBuckets<Stored>>();
      for (int b = 0; b < kBuckets; ++b) NextBlock(*buckets_[t], b);
    }
    for (const ArrivedRange& r : first) Enqueue(r);
    for (int t = 0; t < threads_; ++t) workers_.emplace_back([this, t] { Work(*buckets_[t]); });
  }

  void Enqueue(const ArrivedRange& range) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t b = range.begin; b < range.end; b += kPieceKeys) {
        pieces_.emplace_back(b, std::min(range.end, b + kPieceKeys));
      }
    }
    wake_.notify_all();
  }

  // drain: scatter what is queued first; else drop it.
  void Stop(bool drain) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      if (!drain) pieces_.clear();
    }
    wake_.notify_all();
    for (std::thread& w : workers_) {
      if (w.joinable()) w.join();
    }
  }

  void Work(WorkerBuckets<Stored>& mine) {
    for (;;) {
      std::pair<size_t, size_t> piece;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [this] { return closed_ || !pieces_.empty(); });
        if (pieces_.empty()) return;
        piece = pieces_.front();
        pieces_.pop_front();
      }
      Scatter(mine, piece.first, piece.second);
      if (report_ != nullptr) report_->keys_scattered.fetch_add(piece.second - piece.first);
    }
  }

  void NextBlock(WorkerBuckets<Stored>& mine, uint32_t b) {
    // The bound in Allocate keeps the id below blocks_.
    const size_t id = next_block_.fetch_add(1, std::memory_order_relaxed);
    mine.chain[b].push_back(id);
    mine.cursor[b].at = pool_ + id * block_;
    mine.cursor[b].end = mine.cursor[b].at + block_;
  }

  void Scatter(WorkerBuckets<Stored>& mine, size_t begin, size_t end) {
    const size_t nans_before = mine.nans;
    const Digit<Word> digit = digit_;
    for (size_t i = begin; i < end; ++i) {
      const T k = keys_[i];
      Stored s;
      Word w;
      if constexpr (kFloat) {
        if (k != k) {
          ++mine.nans;
          continue;
        }
        w = Bits::Encode(k);
        s = w;
      } else {
        w = Bits::Encode(k);
        s = k;
      }
      const uint32_t b = digit(w);
      typename WorkerBuckets<Stored>::Cursor& c = mine.cursor[b];
      *c.at++ = s;
      if (c.at == c.end) NextBlock(mine, b);
    }
    if (mine.nans != nans_before) mine.nan_pieces.emplace_back(begin, end);
  }

  Stored* Block(size_t id) const { return pool_ + id * block_; }
  // Keys in block i of w's chain for bucket b: full but for the last one.
  size_t BlockKeys(const WorkerBuckets<Stored>& w, int b, size_t i) const {
    return i + 1 < w.chain[b].size() ? block_
                                     : static_cast<size_t>(w.cursor[b].at - Block(w.chain[b][i]));
  }
  // Keys of worker t's bucket b.
  size_t Count(int t, int b) const {
    const WorkerBuckets<Stored>& w = *buckets_[t];
    const size_t last = w.chain[b].size() - 1;
    return last * block_ + BlockKeys(w, b, last);
  }

  // Bucket b's blocks, in order, as (source, keys) pairs.
  std::vector<std::pair<const Stored*, size_t>> Pieces(int b) const {
    std::vector<std::pair<const Stored*, size_t>> out;
    for (int t = 0; t < threads_; ++t) {
      const WorkerBuckets<Stored>& w = *buckets_[t];
      for (size_t i = 0; i < w.chain[b].size(); ++i) {
        const size_t len = BlockKeys(w, b, i);
        if (len > 0) out.emplace_back(Block(w.chain[b][i]), len);
      }
    }
    return out;
  }

  // Every key is in a bucket (or a NaN): place each bucket and sort it.
  void WriteSorted() {
    // NaNs in input order, read before the array is overwritten.
    std::vector<T> nans;
    if constexpr (kFloat) {
      std::vector<std::pair<size_t, size_t>> nan_pieces;
      for (const auto& w : buckets_) {
        nan_pieces.insert(nan_pieces.end(), w->nan_pieces.begin(), w->nan_pieces.end());
      }
      std::sort(nan_pieces.begin(), nan_pieces.end());
      for (const auto& [b, e] : nan_pieces) {
        for (size_t i = b; i < e; ++i) {
          if (keys_[i] != keys_[i]) nans.push_back(keys_[i]);
        }
      }
    }
    std::vector<size_t> count(kBuckets, 0);
    size_t numbers = 0;
    for (int b = 0; b < kBuckets; ++b) {
      for (int t = 0; t < threads_; ++t) count[b] += Count(t, b);
      numbers += count[b];
    }
    // Buckets in output order: descending writes the last bucket first,
    // after the NaNs.
    std::vector<size_t> begin(kBuckets);
    size_t at = descending_ ? nans.size() : 0;
    for (int i = 0; i < kBuckets; ++i) {
      const int b = descending_ ? kBuckets - 1 - i : i;
      begin[b] = at;
      at += count[b];
    }
    // Buckets holding much of the keys (narrow or skewed keys) are sorted
    // by all threads, one at a time; the others one per thread, in parallel.
    std::vector<int> small, large;
    for (int b = 0; b < kBuckets; ++b) {
      if (count[b] == 0) continue;
      const bool big = threads_ > 1 && count[b] >= min_keys_ &&
                       count[b] > numbers / (2 * static_cast<size_t>(threads_));
      (big ? large : small).push_back(b);
    }
    if (report_ != nullptr) report_->large_buckets = static_cast<int>(large.size());
    Stored* out = reinterpret_cast<Stored*>(keys_);
    std::atomic<size_t> next{0};
    RunTasks(threads_, [&](int) {
      for (size_t i; (i = next.fetch_add(1)) < small.size();) {
        const int b = small[i];
        Stored* slice = out + begin[b];
        for (const auto& [src, len] : Pieces(b)) {
          std::memcpy(slice, src, len * sizeof(Stored));
          slice += len;
        }
        SortChunk(out + begin[b], count[b], descending_);
        if constexpr (kFloat) Decode(begin[b], count[b]);
      }
    });
    // Large buckets: copied into place, the pool freed (the parallel sort
    // takes scratch of its own), then sorted one by one.
    for (int b : large) {
      const auto pieces = Pieces(b);
      std::vector<size_t> to(pieces.size());
      for (size_t i = 0, o = begin[b]; i < pieces.size(); o += pieces[i].second, ++i) to[i] = o;
      RunTasks(threads_, [&](int t) {
        for (size_t i = PartBegin(pieces.size(), threads_, t);
             i < PartBegin(pieces.size(), threads_, t + 1); ++i) {
          std::memcpy(out + to[i], pieces[i].first, pieces[i].second * sizeof(Stored));
        }
      });
    }
    std::free(pool_);
    pool_ = nullptr;
    for (int b : large) {
      SortWords(out + begin[b], count[b], threads_, descending_);
      if constexpr (kFloat) {
        RunTasks(threads_, [&](int t) {
          const size_t from = PartBegin(count[b], threads_, t);
          Decode(begin[b] + from, PartBegin(count[b], threads_, t + 1) - from);
        });
      }
    }
    if (!nans.empty()) {
      std::memcpy(keys_ + (descending_ ? 0 : numbers), nans.data(), nans.size() * sizeof(T));
    }
  }

  // Ordered words back to keys, in place.
  void Decode(size_t begin, size_t len) {
    for (size_t i = begin; i < begin + len; ++i) {
      Word w;
      std::memcpy(&w, keys_ + i, sizeof(w));
      keys_[i] = Bits::Decode(w);
    }
  }

  T* const keys_;
  const size_t n_;
  const bool descending_;
  const int threads_;
  const size_t min_keys_;
  ArrivingInput* const input_;
  ArrivingSortReport* const report_;  // may be null

  size_t block_ = 0;   // keys per block
  size_t blocks_ = 0;  // blocks in the pool
  Stored* pool_ = nullptr;
  std::atomic<size_t> next_block_{0};
  Digit<Word> digit_;
  std::vector<std::unique_ptr<WorkerBuckets<Stored>>> buckets_;  // one per worker

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::pair<size_t, size_t>> pieces_;  // [begin, end) to scatter
  bool closed_ = false;
  std::vector<std::thread> workers_;
};

template <typename T>
absl::Status SortTyped(const ArrivingSort& sort, const ArrivingSortOptions& options) {
  ArrivingPartition<T> partition(sort, options);
  absl::Status status = partition.Allocate();
  if (!status.ok()) return status;
  return partition.Run();
}

}  // namespace

absl::Status SortKeysArriving(const ArrivingSort& sort, const ArrivingSortOptions& options) {
  if (sort.input == nullptr || sort.values != nullptr || !sort.indices.empty()) {
    return absl::UnavailableError("the CPU sorts keys-only input while it arrives");
  }
  if (sort.keys.size < std::max<size_t>(options.min_keys, 1) || sort.keys.data == nullptr) {
    return absl::UnavailableError("too small to sort while it arrives");
  }
  switch (sort.keys.type) {
    case DataType::kUint32: return SortTyped<uint32_t>(sort, options);
    case DataType::kInt32: return SortTyped<int32_t>(sort, options);
    case DataType::kFloat32: return SortTyped<float>(sort, options);
    case DataType::kUint64: return SortTyped<uint64_t>(sort, options);
    case DataType::kInt64: return SortTyped<int64_t>(sort, options);
    case DataType::kFloat64: return SortTyped<double>(sort, options);
    case DataType::kBytes: break;
  }
  return absl::UnavailableError("not a numeric key type");
}

}  // namespace sortd::cpu
