// The CPU engine's sort while parts arrive (core/cpu/arriving_sort.h):
// ranges handed over from another thread out of order and in many small
// pieces, every key type and pattern (NaN payloads, -0.0/+0.0, all-equal,
// skewed), both orders, compared bit for bit with CpuEngine::SortNumeric of
// the same input and with the reference sort; keys are scattered before
// the input completes; skewed keys take the all-threads sort of a large
// bucket; abandoned input writes nothing; input it does not take is left
// alone without waiting on it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "core/cpu/arriving_sort.h"
#include "core/cpu/cpu_engine.h"
#include "tests/core/sort_test_util.h"

namespace sortd::testing {
namespace {

// Ranges handed out as a feeder thread "receives" them.
class FedInput final : public ArrivingInput {
 public:
  void Add(ArrivedRange r) {
    std::lock_guard<std::mutex> lock(mu_);
    ranges_.push_back(r);
    wake_.notify_all();
  }
  void Complete() {
    std::lock_guard<std::mutex> lock(mu_);
    complete_ = true;
    wake_.notify_all();
  }
  void Abandon() {
    std::lock_guard<std::mutex> lock(mu_);
    abandoned_ = true;
    wake_.notify_all();
  }
  Next Wait(ArrivedRange* range) override {
    std::unique_lock<std::mutex> lock(mu_);
    ++waits_;
    wake_.notify_all();  // for WaitUntilTaken
    wake_.wait(lock, [&] { return abandoned_ || !ranges_.empty() || complete_; });
    if (abandoned_) return Next::kAbandoned;
    if (!ranges_.empty()) {
      *range = ranges_.front();
      ranges_.pop_front();
      ++taken_;
      return Next::kRange;
    }
    return Next::kComplete;
  }
  int waits() {
    std::lock_guard<std::mutex> lock(mu_);
    return waits_;
  }
  // Waits (bounded) until the sort has taken every range added so far and
  // has come back for the next one: what it took, it has dealt with.
  bool WaitUntilTaken() {
    std::unique_lock<std::mutex> lock(mu_);
    return wake_.wait_for(lock, std::chrono::seconds(30),
                          [&] { return ranges_.empty() && waits_ > taken_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<ArrivedRange> ranges_;
  bool complete_ = false;
  bool abandoned_ = false;
  int waits_ = 0;
  int taken_ = 0;  // ranges handed out
};

// Splits [0, n) into parts of 1..max_part keys, shuffled.
std::vector<ArrivedRange> RandomParts(size_t n, size_t max_part, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<ArrivedRange> parts;
  for (size_t at = 0; at < n;) {
    const size_t len = std::min<size_t>(n - at, 1 + rng() % max_part);
    parts.push_back({ArrivedRange::kKeys, at, at + len});
    at += len;
  }
  std::shuffle(parts.begin(), parts.end(), rng);
  return parts;
}

constexpr size_t kMinKeys = 4096;  // small arrays still take the arriving path

struct Outcome {
  absl::Status status;
  int large_buckets = 0;
};

// Runs the arriving sort of `keys` (in place) with `parts` fed from this
// thread while it runs on another.
template <typename T>
Outcome SortArriving(std::vector<T>& keys, SortOrder order, const std::vector<ArrivedRange>& parts,
                     int threads) {
  FedInput fed;
  ArrivingSort sort;
  sort.keys = NumericSpan(keys.data(), keys.size());
  sort.order = order;
  sort.input = &fed;
  cpu::ArrivingSortReport report;
  auto done = std::async(std::launch::async, [&] {
    return cpu::SortKeysArriving(sort, {threads, kMinKeys, &report});
  });
  for (const ArrivedRange& r : parts) fed.Add(r);
  fed.Complete();
  Outcome out;
  out.status = done.get();
  out.large_buckets = report.large_buckets;
  return out;
}

// What the engine itself returns once the input is complete.
template <typename T>
std::vector<T> EngineSort(const std::vector<T>& input, SortOrder order) {
  std::vector<T> keys = input;
  auto engine = CreateCpuEngine({2, kMinKeys});
  EXPECT_TRUE(engine->SortNumeric(NumericSpan(keys.data(), keys.size()), order, {}).ok());
  return keys;
}

template <typename T>
void ExpectSameAsTheEngine(const std::vector<T>& input, SortOrder order, size_t max_part,
                           int threads, const std::string& what, int* large_buckets = nullptr) {
  std::vector<T> keys = input;
  const Outcome got =
      SortArriving(keys, order, RandomParts(input.size(), max_part, input.size() + threads), threads);
  ASSERT_TRUE(got.status.ok()) << what << ": " << got.status;
  const char* dir = order == SortOrder::kDescending ? " desc" : " asc";
  EXPECT_TRUE(SameBits(keys, EngineSort(input, order))) << what << dir;
  EXPECT_TRUE(SameBits(keys, ReferenceSort(input, order).keys)) << what << dir;
  if (large_buckets != nullptr) *large_buckets = got.large_buckets;
}

template <typename T>
class CpuArrivingTest : public ::testing::Test {};
using KeyTypes = ::testing::Types<uint32_t, int32_t, float, uint64_t, int64_t, double>;
TYPED_TEST_SUITE(CpuArrivingTest, KeyTypes);

TYPED_TEST(CpuArrivingTest, MatchesTheEngineBitForBitForEveryPatternAndOrder) {
  using T = TypeParam;
  for (Pattern pattern : AllPatterns()) {
    for (SortOrder order : {SortOrder::kAscending, SortOrder::kDescending}) {
      for (size_t n : {kMinKeys, size_t{100003}}) {
        for (int threads : {1, 3}) {
          ExpectSameAsTheEngine(MakeInput<T>(pattern, n, 3), order, 20000, threads,
                                std::string(PatternName(pattern)) + " n=" + std::to_string(n) +
                                    " threads=" + std::to_string(threads));
        }
      }
    }
  }
}

TYPED_TEST(CpuArrivingTest, ManySmallPiecesInAnyOrder) {
  using T = TypeParam;
  for (SortOrder order : {SortOrder::kAscending, SortOrder::kDescending}) {
    // Pieces of 1..7 keys: far below a block, the first sample is tiny.
    ExpectSameAsTheEngine(MakeInput<T>(Pattern::kRandom, 50000, 5), order, 7, 2, "random");
    ExpectSameAsTheEngine(MakeInput<T>(Pattern::kSpecials, 50000, 6), order, 7, 2, "specials");
  }
}

// Keys whose leading bits are all equal (small integers, a narrow float
// range) or that mostly share one value: the buckets still come out right,
// and a bucket holding most keys is sorted by all threads.
TYPED_TEST(CpuArrivingTest, NarrowAndSkewedKeys) {
  using T = TypeParam;
  const size_t n = 200000;
  std::mt19937_64 rng(11);
  std::vector<T> narrow(n), skewed(n), first_low(n);
  for (size_t i = 0; i < n; ++i) {
    narrow[i] = static_cast<T>(rng() % (1 << 20));  // below 2^24: one top byte
    skewed[i] = rng() % 10 == 0 ? static_cast<T>(rng() % 1000) : static_cast<T>(77);
    // The first keys (a sample of which picks the buckets) are all small;
    // the rest lie far outside their range.
    if constexpr (std::is_floating_point_v<T>) {  // one exponent, then far above
      first_low[i] = i < n / 2 ? static_cast<T>(1 + (rng() % 100) / 256.0)
                               : static_cast<T>(100 + rng() % 100);
    } else {
      first_low[i] = i < n / 2 ? static_cast<T>(rng() % 100) : static_cast<T>(1000 + rng() % 100000);
    }
  }
  for (SortOrder order : {SortOrder::kAscending, SortOrder::kDescending}) {
    int large = 0;
    ExpectSameAsTheEngine(narrow, order, 30000, 2, "narrow", &large);
    // Integers below 2^20 spread over the buckets (the bucket range comes
    // from the first keys); floats of them crowd their top exponents.
    if (!std::is_floating_point_v<T>) {
      EXPECT_EQ(large, 0) << "narrow keys did not spread";
    }
    ExpectSameAsTheEngine(skewed, order, 30000, 2, "skewed", &large);
    EXPECT_GE(large, 1) << "90% equal keys: one large bucket";
    ExpectSameAsTheEngine(MakeInput<T>(Pattern::kAllEqual, n, 12), order, 30000, 3, "all-equal",
                          &large);
    EXPECT_EQ(large, 1);
    // Fed in array order, so that the sample sees only the small keys.
    std::vector<T> keys = first_low;
    std::vector<ArrivedRange> in_order;
    for (size_t at = 0; at < n; at += 25000) in_order.push_back({ArrivedRange::kKeys, at, at + 25000});
    const Outcome got = SortArriving(keys, order, in_order, 2);
    ASSERT_TRUE(got.status.ok()) << got.status;
    EXPECT_TRUE(SameBits(keys, EngineSort(first_low, order)));
    EXPECT_GE(got.large_buckets, 1) << "keys past the sampled range share the edge bucket";
  }
}

TEST(CpuArriving, KeysAreScatteredBeforeTheInputCompletes) {
  const size_t n = 64 * kMinKeys;
  const std::vector<uint32_t> input = MakeInput<uint32_t>(Pattern::kRandom, n, 9);
  std::vector<uint32_t> keys = input;
  FedInput fed;
  ArrivingSort sort;
  sort.keys = NumericSpan(keys.data(), n);
  sort.input = &fed;
  cpu::ArrivingSortReport report;
  auto done = std::async(std::launch::async, [&] {
    return cpu::SortKeysArriving(sort, {2, kMinKeys, &report});
  });
  // Everything but the last key.
  fed.Add({ArrivedRange::kKeys, 0, n - 1});
  for (int i = 0; i < 2000 && report.keys_scattered.load() < n - 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(report.keys_scattered.load(), n - 1) << "the arrived keys were not scattered";
  EXPECT_EQ(done.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  // Nothing is written to the array before the input completes.
  EXPECT_EQ(keys, input);
  fed.Add({ArrivedRange::kKeys, n - 1, n});
  fed.Complete();
  ASSERT_TRUE(done.get().ok());
  EXPECT_EQ(keys, EngineSort(input, SortOrder::kAscending));
}

TEST(CpuArriving, AbandonedInputIsCancelledAndWritesNothing) {
  // Abandoned with nothing arrived, with keys taken but held for the
  // bucket sample (fewer than it needs), and with keys already scattered.
  for (size_t arrived : {size_t{0}, size_t{1000}, size_t{200000}}) {
    const size_t n = 256 * 1024;
    const std::vector<double> input = MakeInput<double>(Pattern::kRandom, n, 4);
    std::vector<double> keys = input;
    FedInput fed;
    ArrivingSort sort;
    sort.keys = NumericSpan(keys.data(), n);
    sort.input = &fed;
    cpu::ArrivingSortReport report;
    auto done = std::async(std::launch::async, [&] {
      return cpu::SortKeysArriving(sort, {2, kMinKeys, &report});
    });
    if (arrived > 0) {
      fed.Add({ArrivedRange::kKeys, 0, arrived});
      // The keys have arrived before the input is abandoned: the sort took
      // them (and came back for more), and past the sample it scattered them.
      ASSERT_TRUE(fed.WaitUntilTaken()) << arrived << ": the sort never took the keys";
      if (arrived >= 65536) {  // arriving_sort.cc's kSampleKeys: the workers run
        for (int i = 0; i < 6000 && report.keys_scattered.load() < arrived; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        ASSERT_EQ(report.keys_scattered.load(), arrived) << "the arrived keys were not scattered";
      }
    } else {
      ASSERT_TRUE(fed.WaitUntilTaken());  // waiting for its first range
    }
    EXPECT_EQ(done.wait_for(std::chrono::seconds(0)), std::future_status::timeout) << arrived;
    fed.Abandon();
    EXPECT_EQ(done.get().code(), absl::StatusCode::kCancelled) << arrived;
    EXPECT_TRUE(SameBits(keys, input)) << arrived;
  }
}

TEST(CpuArriving, ValuesIndicesAndSmallArraysAreLeftToTheSortAfterUpload) {
  std::vector<uint32_t> keys(4 * kMinKeys, 1), values(keys.size(), 2);
  std::vector<uint64_t> indices(keys.size());
  FedInput fed;  // never fed: nothing may wait on it
  ArrivingSort sort;
  sort.keys = NumericSpan(keys.data(), keys.size());
  sort.input = &fed;
  sort.values = values.data();
  sort.value_width = 4;
  const cpu::ArrivingSortOptions options{2, kMinKeys, nullptr};
  EXPECT_EQ(cpu::SortKeysArriving(sort, options).code(), absl::StatusCode::kUnavailable);
  sort.values = nullptr;
  sort.indices = absl::MakeSpan(indices);
  EXPECT_EQ(cpu::SortKeysArriving(sort, options).code(), absl::StatusCode::kUnavailable);
  sort.indices = {};
  sort.keys.size = kMinKeys - 1;
  EXPECT_EQ(cpu::SortKeysArriving(sort, options).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(fed.waits(), 0);
}

// Through the engine interface: the CPU engine takes keys-only input from
// its parallel threshold up.
TEST(CpuArriving, TheEngineTakesKeysOnlyInputFromItsThreshold) {
  auto engine = CreateCpuEngine({2, kMinKeys});
  const std::vector<int64_t> input = MakeInput<int64_t>(Pattern::kRandom, 3 * kMinKeys, 8);
  std::vector<int64_t> keys = input;
  FedInput fed;
  ArrivingSort sort;
  sort.keys = NumericSpan(keys.data(), keys.size());
  sort.order = SortOrder::kDescending;
  sort.input = &fed;
  auto done = std::async(std::launch::async, [&] { return engine->SortArriving(sort); });
  for (const ArrivedRange& r : RandomParts(keys.size(), 1000, 1)) fed.Add(r);
  fed.Complete();
  ASSERT_TRUE(done.get().ok());
  EXPECT_TRUE(SameBits(keys, EngineSort(input, SortOrder::kDescending)));
}

}  // namespace
}  // namespace sortd::testing
