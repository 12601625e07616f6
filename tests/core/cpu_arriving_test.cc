// The CPU engine's sort while parts arrive (core/cpu/arriving_sort.h):
// ranges handed over from another thread in random order and sizes, every
// key type and pattern (NaN payloads, -0.0/+0.0, many ties), both orders,
// compared bit for bit with the reference stable sort; block sorts really
// start before the input completes; abandoned input; input it leaves alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
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
    wake_.wait(lock, [&] { return abandoned_ || !ranges_.empty() || complete_; });
    if (abandoned_) return Next::kAbandoned;
    if (!ranges_.empty()) {
      *range = ranges_.front();
      ranges_.pop_front();
      return Next::kRange;
    }
    return Next::kComplete;
  }

 private:
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<ArrivedRange> ranges_;
  bool complete_ = false;
  bool abandoned_ = false;
};

// Splits [0, n) into parts of random sizes, shuffled.
std::vector<ArrivedRange> RandomParts(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<ArrivedRange> parts;
  for (size_t at = 0; at < n;) {
    const size_t len = std::min<size_t>(n - at, 1 + rng() % 20000);
    parts.push_back({ArrivedRange::kKeys, at, at + len});
    at += len;
  }
  std::shuffle(parts.begin(), parts.end(), rng);
  return parts;
}

constexpr size_t kMinBlock = 4096;  // small blocks: many runs to merge

template <typename T>
class CpuArrivingTest : public ::testing::Test {};
using KeyTypes = ::testing::Types<uint32_t, int32_t, float, uint64_t, int64_t, double>;
TYPED_TEST_SUITE(CpuArrivingTest, KeyTypes);

TYPED_TEST(CpuArrivingTest, MatchesTheStableSortForEveryPatternAndOrder) {
  using T = TypeParam;
  auto single = CreateCpuEngine({1, size_t{1} << 30});
  for (Pattern pattern : AllPatterns()) {
    for (SortOrder order : {SortOrder::kAscending, SortOrder::kDescending}) {
      for (size_t n : {size_t{2 * kMinBlock}, size_t{100003}}) {
        const std::vector<T> input = MakeInput<T>(pattern, n, 3);
        std::vector<T> keys = input;
        FedInput fed;
        ArrivingSort sort;
        sort.keys = NumericSpan(keys.data(), n);
        sort.order = order;
        sort.input = &fed;
        auto done = std::async(std::launch::async, [&] {
          return cpu::SortKeysArriving(sort, 4, kMinBlock, [&](NumericSpan block) {
            return single->SortNumeric(block, order, {});
          });
        });
        for (const ArrivedRange& r : RandomParts(n, n + static_cast<int>(pattern))) fed.Add(r);
        fed.Complete();
        ASSERT_TRUE(done.get().ok());
        EXPECT_TRUE(SameBits(keys, ReferenceSort(input, order).keys))
            << PatternName(pattern) << (order == SortOrder::kDescending ? " desc " : " asc ") << n;
      }
    }
  }
}

TEST(CpuArriving, BlocksAreSortedBeforeTheInputCompletes) {
  const size_t n = 64 * kMinBlock;
  std::vector<uint32_t> input = MakeInput<uint32_t>(Pattern::kRandom, n, 9);
  std::vector<uint32_t> keys = input;
  FedInput fed;
  ArrivingSort sort;
  sort.keys = NumericSpan(keys.data(), n);
  sort.input = &fed;
  std::atomic<int> sorted_blocks{0};
  auto single = CreateCpuEngine({1, size_t{1} << 30});
  auto done = std::async(std::launch::async, [&] {
    return cpu::SortKeysArriving(sort, 2, kMinBlock, [&](NumericSpan block) {
      absl::Status s = single->SortNumeric(block, SortOrder::kAscending, {});
      ++sorted_blocks;
      return s;
    });
  });
  // Everything but the last element: every block but the last can sort.
  fed.Add({ArrivedRange::kKeys, 0, n - 1});
  for (int i = 0; i < 2000 && sorted_blocks.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GT(sorted_blocks.load(), 0) << "no block was sorted while the input was incomplete";
  EXPECT_EQ(done.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  fed.Add({ArrivedRange::kKeys, n - 1, n});
  fed.Complete();
  ASSERT_TRUE(done.get().ok());
  std::sort(input.begin(), input.end());
  EXPECT_EQ(keys, input);
}

TEST(CpuArriving, AbandonedInputIsCancelled) {
  const size_t n = 8 * kMinBlock;
  std::vector<uint64_t> keys(n, 7);
  FedInput fed;
  ArrivingSort sort;
  sort.keys = NumericSpan(keys.data(), n);
  sort.input = &fed;
  auto single = CreateCpuEngine({1, size_t{1} << 30});
  auto done = std::async(std::launch::async, [&] {
    return cpu::SortKeysArriving(sort, 2, kMinBlock, [&](NumericSpan block) {
      return single->SortNumeric(block, SortOrder::kAscending, {});
    });
  });
  fed.Add({ArrivedRange::kKeys, 0, n / 2});
  fed.Abandon();
  EXPECT_EQ(done.get().code(), absl::StatusCode::kCancelled);
}

TEST(CpuArriving, ValuesIndicesAndSmallArraysAreLeftToTheSortAfterUpload) {
  std::vector<uint32_t> keys(4 * kMinBlock, 1), values(keys.size(), 2);
  std::vector<uint64_t> indices(keys.size());
  FedInput fed;  // never fed: nothing may wait on it
  auto unused = [](NumericSpan) { return absl::InternalError("must not run"); };
  ArrivingSort sort;
  sort.keys = NumericSpan(keys.data(), keys.size());
  sort.input = &fed;
  sort.values = values.data();
  sort.value_width = 4;
  EXPECT_EQ(cpu::SortKeysArriving(sort, 2, kMinBlock, unused).code(), absl::StatusCode::kUnavailable);
  sort.values = nullptr;
  sort.indices = absl::MakeSpan(indices);
  EXPECT_EQ(cpu::SortKeysArriving(sort, 2, kMinBlock, unused).code(), absl::StatusCode::kUnavailable);
  sort.indices = {};
  sort.keys.size = kMinBlock;  // under two blocks
  EXPECT_EQ(cpu::SortKeysArriving(sort, 2, kMinBlock, unused).code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace sortd::testing
