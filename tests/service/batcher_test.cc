// The Batcher itself (CPU engine): while every engine slot runs a batch,
// due requests stay queued and launch together once a slot frees; without
// a limit each due request launches on its own.
#include "server/runtime/batcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "core/dispatcher.h"
#include "server/runtime/work_pool.h"

namespace sortd::testing {
namespace {

// A gate the first batch's cancellation check waits on: that batch holds
// the engine slot until the test opens it.
class Gate {
 public:
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    reached_ = true;
    cv_.notify_all();
    cv_.wait(lock, [this] { return open_; });
  }
  // Waits (bounded) until a batch is held here, i.e. running on its slot.
  bool WaitUntilReached() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(30), [this] { return reached_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool reached_ = false;
  bool open_ = false;
};

struct Completion {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<size_t> batch_sizes;  // per request, in completion order
};

class BatcherHoldTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DispatcherOptions options;
    options.engine = EngineChoice::kCpu;
    auto dispatcher = Dispatcher::Create(options);
    ASSERT_TRUE(dispatcher.ok()) << dispatcher.status();
    dispatcher_ = std::move(*dispatcher);
    pool_ = std::make_unique<WorkPool>(4);
  }

  std::unique_ptr<Batcher> MakeBatcher(int max_running_cpu_batches) {
    BatcherOptions options;
    options.max_delay = absl::Milliseconds(1);
    options.max_running_cpu_batches = max_running_cpu_batches;
    return std::make_unique<Batcher>(options, dispatcher_.get(), pool_.get(), nullptr, nullptr);
  }

  // Queues keys[i] (sorted into out[i]); `gate` (optional) is waited on by
  // the request's cancellation check, which runs inside its batch.
  void Enqueue(Batcher& batcher, std::vector<uint32_t>& keys, std::vector<uint32_t>& out,
               Gate* gate) {
    Batcher::Request request;
    request.type = DataType::kUint32;
    request.keys_in = keys.data();
    request.keys_out = out.data();
    request.size = keys.size();
    request.cancelled = [gate] {
      if (gate != nullptr) gate->Wait();
      return false;
    };
    request.done = [this](const absl::Status& status, EngineKind, double, size_t batch) {
      EXPECT_TRUE(status.ok()) << status;
      std::lock_guard<std::mutex> lock(done_.mu);
      done_.batch_sizes.push_back(batch);
      done_.cv.notify_all();
    };
    ASSERT_TRUE(batcher.Enqueue(std::move(request)).ok());
  }

  bool WaitForCompletions(size_t n) {
    std::unique_lock<std::mutex> lock(done_.mu);
    return done_.cv.wait_for(lock, std::chrono::seconds(30),
                             [&] { return done_.batch_sizes.size() >= n; });
  }

  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<WorkPool> pool_;
  Completion done_;
};

TEST_F(BatcherHoldTest, DueRequestsWaitForTheBusySlotAndLaunchTogether) {
  auto batcher = MakeBatcher(/*max_running_cpu_batches=*/1);
  std::vector<std::vector<uint32_t>> keys(4), out(4);
  for (int i = 0; i < 4; ++i) {
    keys[i] = {30u + i, 10u + i, 20u + i};
    out[i].assign(3, 0);
  }
  Gate gate;
  Enqueue(*batcher, keys[0], out[0], &gate);  // its batch holds the only slot
  ASSERT_TRUE(gate.WaitUntilReached()) << "the first batch never launched";
  // Each of the next three is due (1 ms) long before the next arrives: the
  // sleeps are lower bounds, so they only make the hold matter (without it
  // each would launch alone); what the test asserts waits on the gate.
  for (int i = 1; i < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    Enqueue(*batcher, keys[i], out[i], nullptr);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  {
    std::lock_guard<std::mutex> lock(done_.mu);
    EXPECT_TRUE(done_.batch_sizes.empty()) << "nothing may finish while the slot is held";
  }
  gate.Open();
  ASSERT_TRUE(WaitForCompletions(4));
  std::lock_guard<std::mutex> lock(done_.mu);
  std::vector<size_t> sizes = done_.batch_sizes;
  std::sort(sizes.begin(), sizes.end());
  // The gated batch alone, then the three held requests as one batch.
  EXPECT_EQ(sizes, (std::vector<size_t>{1, 3, 3, 3}));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], (std::vector<uint32_t>{10u + i, 20u + i, 30u + i}));
}

TEST_F(BatcherHoldTest, WithoutALimitEachDueRequestLaunchesAlone) {
  auto batcher = MakeBatcher(/*max_running_cpu_batches=*/0);
  std::vector<std::vector<uint32_t>> keys(3), out(3);
  for (int i = 0; i < 3; ++i) {
    keys[i] = {7u, 3u, 5u};
    out[i].assign(3, 0);
  }
  Gate gate;
  Enqueue(*batcher, keys[0], out[0], &gate);
  ASSERT_TRUE(gate.WaitUntilReached()) << "the first batch never launched";
  // Its batch is stuck at the gate, yet each next one launches past it and
  // finishes before the one after it is queued.
  for (int i = 1; i < 3; ++i) {
    Enqueue(*batcher, keys[i], out[i], nullptr);
    ASSERT_TRUE(WaitForCompletions(i)) << "request " << i << " waited for the held batch";
  }
  gate.Open();
  ASSERT_TRUE(WaitForCompletions(3));
  std::lock_guard<std::mutex> lock(done_.mu);
  EXPECT_EQ(done_.batch_sizes[0], 1u);
  EXPECT_EQ(done_.batch_sizes[1], 1u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[i], (std::vector<uint32_t>{3u, 5u, 7u}));
}

}  // namespace
}  // namespace sortd::testing
