// GPU worker, input still arriving (sort sessions, GpuWorker::SortArriving):
// ranges handed out in any order are copied to the device when they are
// handed out, not at the end; values are sorted with the keys on the
// device; positions; the arriving slot is the job's own (busy for a second
// arriving job, never taken from requests); abandoning frees it; arrays over
// the pool are refused untouched. Skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "core/cuda/gpu_worker.h"
#include "tests/gpu/radix_reference.h"

namespace sortd::cuda {
namespace {

using namespace sortd::cuda::testing;  // NOLINT: test helpers

std::unique_ptr<GpuWorker> MakeWorker(size_t max_pool = 0, int slots = 2) {
  GpuWorkerOptions o;
  o.slots = slots;
  o.staging_chunk_bytes = 1 << 16;  // small: ranges span several chunks
  o.max_pool_bytes = max_pool;
  std::string error;
  auto w = GpuWorker::Create(o, &error);
  EXPECT_NE(w, nullptr) << error;
  return w;
}

// Hands out a scripted list of ranges, one per Wait, then kComplete (or
// kAbandoned). `before_wait(k)` runs as the k-th Wait starts, k ranges
// having been handed out.
class ScriptedInput final : public ArrivingInput {
 public:
  explicit ScriptedInput(std::vector<ArrivedRange> ranges, Next last = Next::kComplete)
      : ranges_(std::move(ranges)), last_(last) {}
  std::function<void(size_t handed)> before_wait;
  size_t waits() const { return waits_; }

  Next Wait(ArrivedRange* range) override {
    if (before_wait) before_wait(next_);
    ++waits_;
    if (next_ < ranges_.size()) {
      *range = ranges_[next_++];
      return Next::kRange;
    }
    return last_;
  }

 private:
  std::vector<ArrivedRange> ranges_;
  Next last_;
  size_t next_ = 0;
  size_t waits_ = 0;
};

// Parts of random lengths covering [0, n) of keys (and of values), in a
// shuffled order with the two arrays interleaved.
std::vector<ArrivedRange> ShuffledParts(size_t n, bool values, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<ArrivedRange> parts;
  for (int array = 0; array < (values ? 2 : 1); ++array) {
    for (size_t at = 0; at < n;) {
      const size_t len = std::min<size_t>(n - at, 1 + rng() % 40000);
      parts.push_back({array == 0 ? ArrivedRange::kKeys : ArrivedRange::kValues, at, at + len});
      at += len;
    }
  }
  std::shuffle(parts.begin(), parts.end(), rng);
  return parts;
}

template <typename T>
std::vector<T> Input(size_t n, uint64_t seed) {
  return std::is_floating_point_v<T> ? FloatSpecials<T>(n, seed) : Random<T>(n, seed, 1000);
}

template <typename T>
class GpuArrivingTest : public ::testing::Test {};
using KeyTypes = ::testing::Types<uint32_t, int32_t, float, uint64_t, int64_t, double>;
TYPED_TEST_SUITE(GpuArrivingTest, KeyTypes);

// Heap (unpinned) arrays go through staging, synchronously per range: once
// the worker asks for the next range, the previous one is on the device.
// Scribbling over it then must not change the result, which proves each
// range was copied as it was handed out (before the input completed).
TYPED_TEST(GpuArrivingTest, EachRangeIsCopiedWhenHandedOutAndTheSortMatches) {
  SKIP_WITHOUT_GPU();
  auto worker = MakeWorker();
  for (bool desc : {false, true}) {
    const size_t n = 250001;
    const std::vector<TypeParam> input = Input<TypeParam>(n, desc ? 5 : 6);
    std::vector<TypeParam> keys = input;
    std::vector<uint64_t> perm(n, ~uint64_t{0});
    const std::vector<ArrivedRange> parts = ShuffledParts(n, false, desc ? 7 : 8);
    ScriptedInput in(parts);
    in.before_wait = [&](size_t handed) {
      if (handed == 0) return;
      const ArrivedRange& r = parts[handed - 1];
      std::memset(&keys[r.begin], 0xA5, (r.end - r.begin) * sizeof(TypeParam));
    };
    GpuArrivingJob job;
    job.key_type = TypeOf<TypeParam>();
    job.descending = desc;
    job.num_items = n;
    job.keys = keys.data();
    job.indices = perm.data();
    job.input = &in;
    const GpuSortReport report = worker->SortArriving(job);
    ASSERT_EQ(report.outcome, GpuSortOutcome::kOk) << report.message;
    EXPECT_EQ(in.waits(), parts.size() + 1);
    const std::vector<uint64_t> ref = ReferenceOrder(input, desc);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::memcmp(&keys[i], &input[ref[i]], sizeof(TypeParam)), 0) << "key at " << i;
      ASSERT_EQ(perm[i], ref[i]) << "index at " << i;
    }
  }
}

// Values ride with the keys on the device (no host gather): pinned keys
// and values by DMA, and heap values through staging; 4- and 8-byte values.
TYPED_TEST(GpuArrivingTest, ValuesAreSortedWithTheKeysOnTheDevice) {
  SKIP_WITHOUT_GPU();
  auto worker = MakeWorker();
  const size_t n = 300007;
  for (int value_bytes : {4, 8}) {
    for (bool pinned_values : {true, false}) {
      const bool desc = value_bytes == 8;
      const std::vector<TypeParam> input = Input<TypeParam>(n, value_bytes * 10 + pinned_values);
      TypeParam* keys = nullptr;
      ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&keys), n * sizeof(TypeParam),
                              cudaHostAllocPortable),
                cudaSuccess);
      std::memcpy(keys, input.data(), n * sizeof(TypeParam));
      std::vector<char> heap_values(pinned_values ? 0 : n * value_bytes);
      char* values = heap_values.data();
      if (pinned_values) {
        ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&values), n * value_bytes,
                                cudaHostAllocPortable),
                  cudaSuccess);
      }
      // Value i is 3i + 1: distinct, so each one's place is checkable.
      for (size_t i = 0; i < n; ++i) {
        const uint64_t v = 3 * i + 1;
        std::memcpy(values + i * value_bytes, &v, value_bytes);
      }
      ScriptedInput in(ShuffledParts(n, true, value_bytes + pinned_values));
      GpuArrivingJob job;
      job.key_type = TypeOf<TypeParam>();
      job.descending = desc;
      job.num_items = n;
      job.keys = keys;
      job.values = values;
      job.value_bytes = value_bytes;
      job.input = &in;
      const GpuSortReport report = worker->SortArriving(job);
      ASSERT_EQ(report.outcome, GpuSortOutcome::kOk) << report.message;
      const std::vector<uint64_t> ref = ReferenceOrder(input, desc);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(std::memcmp(&keys[i], &input[ref[i]], sizeof(TypeParam)), 0) << "key at " << i;
        uint64_t v = 0;
        std::memcpy(&v, values + i * value_bytes, value_bytes);
        ASSERT_EQ(v, 3 * ref[i] + 1) << value_bytes << "-byte value at " << i;
      }
      cudaFreeHost(keys);
      if (pinned_values) cudaFreeHost(values);
    }
  }
}

// Blocks in Wait until released, then answers `release_with`.
class GatedInput final : public ArrivingInput {
 public:
  Next Wait(ArrivedRange*) override {
    std::unique_lock<std::mutex> lock(mu_);
    waiting_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return released_; });
    return release_with_;
  }
  void AwaitWaiting() {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return waiting_; });
  }
  void Release(Next with) {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    release_with_ = with;
    changed_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  bool waiting_ = false;
  bool released_ = false;
  Next release_with_ = Next::kAbandoned;
};

TEST(GpuArriving, TheArrivingSlotIsBusyForASecondJobNeverTakenFromRequestsAndFreedByAbandon) {
  SKIP_WITHOUT_GPU();
  auto worker = MakeWorker(/*max_pool=*/0, /*slots=*/1);
  const size_t n = 100000;
  std::vector<uint32_t> first_keys = Random<uint32_t>(n, 1, 32);
  GatedInput gate;
  GpuArrivingJob first;
  first.num_items = n;
  first.keys = first_keys.data();
  first.input = &gate;
  GpuSortReport first_report;
  std::thread holder([&] { first_report = worker->SortArriving(first); });
  gate.AwaitWaiting();  // the first job holds the arriving slot, waiting for input

  // A second arriving job is turned away at once, its input untouched.
  std::vector<uint32_t> second_keys = Random<uint32_t>(n, 2, 32);
  const std::vector<uint32_t> second_before = second_keys;
  ScriptedInput second_input({{ArrivedRange::kKeys, 0, n}});
  GpuArrivingJob second = first;
  second.keys = second_keys.data();
  second.input = &second_input;
  EXPECT_EQ(worker->SortArriving(second).outcome, GpuSortOutcome::kBusy);
  EXPECT_EQ(second_input.waits(), 0u);
  EXPECT_EQ(second_keys, second_before);

  // A request still gets the one request slot.
  std::vector<uint32_t> request = Random<uint32_t>(n, 3, 32);
  GpuSortJob sort;
  sort.num_items = n;
  sort.keys = request.data();
  ASSERT_EQ(worker->Sort(sort).outcome, GpuSortOutcome::kOk);
  EXPECT_TRUE(std::is_sorted(request.begin(), request.end()));

  gate.Release(ArrivingInput::Next::kAbandoned);
  holder.join();
  EXPECT_EQ(first_report.outcome, GpuSortOutcome::kAbandoned) << first_report.message;

  // The slot is free again: the second job now runs.
  const GpuSortReport again = worker->SortArriving(second);
  ASSERT_EQ(again.outcome, GpuSortOutcome::kOk) << again.message;
  std::vector<uint32_t> expected = second_before;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(second_keys, expected);
}

TEST(GpuArriving, ArraysOverThePoolAreRefusedWithoutReadingTheInput) {
  SKIP_WITHOUT_GPU();
  auto worker = MakeWorker(/*max_pool=*/size_t{4} << 20);
  const size_t n = size_t{1} << 21;  // 8 MiB of keys: over the 4 MiB pool
  std::vector<uint32_t> keys = Random<uint32_t>(n, 9, 32);
  const std::vector<uint32_t> before = keys;
  ScriptedInput in({{ArrivedRange::kKeys, 0, n}});
  GpuArrivingJob job;
  job.num_items = n;
  job.keys = keys.data();
  job.input = &in;
  EXPECT_EQ(worker->SortArriving(job).outcome, GpuSortOutcome::kNoMemory);
  EXPECT_EQ(in.waits(), 0u);
  EXPECT_EQ(keys, before);
}

TEST(GpuArriving, AbandonedAfterSomeRangesWritesNothing) {
  SKIP_WITHOUT_GPU();
  auto worker = MakeWorker();
  const size_t n = 200000;
  std::vector<uint64_t> keys = Random<uint64_t>(n, 4);
  const std::vector<uint64_t> before = keys;
  ScriptedInput in({{ArrivedRange::kKeys, 0, n / 2}}, ArrivingInput::Next::kAbandoned);
  GpuArrivingJob job;
  job.key_type = RadixKeyType::kUint64;
  job.num_items = n;
  job.keys = keys.data();
  job.input = &in;
  EXPECT_EQ(worker->SortArriving(job).outcome, GpuSortOutcome::kAbandoned);
  EXPECT_EQ(keys, before);
}

}  // namespace
}  // namespace sortd::cuda
