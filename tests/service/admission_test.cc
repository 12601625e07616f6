// AdmissionControl's queue on its own: who is admitted when, in which order,
// and how a waiter leaves (deadline, cancellation, --max_queue_wait, the
// queue's bounds, shutdown), each decision observed through its callback.
#include "server/runtime/admission.h"

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace sortd {
namespace {

using Clock = AdmissionControl::Clock;

// A waiter's outcome, set once by its `done` callback.
struct Outcome {
  std::promise<absl::Status> promise;
  std::shared_future<absl::Status> future = promise.get_future().share();
  bool Decided() const {
    return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }
  absl::Status Get() const {
    EXPECT_EQ(future.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    return future.get();
  }
};

AdmissionQueueOptions Queue() {
  AdmissionQueueOptions queue;
  queue.max_waiting_requests = 8;
  queue.max_waiting_bytes = 1000;
  queue.bypass_bytes = 10;
  queue.small_reserve_bytes = 0;
  queue.poll = absl::Milliseconds(2);
  return queue;
}

AdmissionControl::Wait WaitFor(uint64_t bytes, std::string lane, Outcome* outcome,
                               std::vector<std::string>* order = nullptr,
                               std::mutex* order_mu = nullptr, std::string name = "") {
  AdmissionControl::Wait wait;
  wait.bytes = bytes;
  wait.lane = std::move(lane);
  wait.done = [=](absl::Status status, double) {
    if (order != nullptr && status.ok()) {
      std::lock_guard<std::mutex> lock(*order_mu);
      order->push_back(name);
    }
    outcome->promise.set_value(std::move(status));
  };
  return wait;
}

TEST(AdmissionQueueTest, AFittingRequestIsAdmittedAtOnce) {
  AdmissionControl admission(100, 10, Queue());
  Outcome outcome;
  std::optional<absl::Status> decided = admission.AcquireOrWait(WaitFor(60, "a", &outcome));
  ASSERT_TRUE(decided.has_value());
  EXPECT_TRUE(decided->ok()) << *decided;
  EXPECT_EQ(admission.inflight_bytes(), 60u);
  EXPECT_EQ(admission.inflight_requests(), 1u);
  EXPECT_FALSE(outcome.Decided());  // decided inline: `done` is not called
  admission.Release(60);
  EXPECT_EQ(admission.inflight_bytes(), 0u);
}

TEST(AdmissionQueueTest, ARequestLargerThanTheLimitIsRefusedAtOnceWithoutARetryHint) {
  AdmissionControl admission(100, 10, Queue());
  Outcome outcome;
  std::optional<absl::Status> decided = admission.AcquireOrWait(WaitFor(101, "a", &outcome));
  ASSERT_TRUE(decided.has_value());
  EXPECT_EQ(decided->code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(decided->message().find("--max_inflight_bytes"), std::string::npos) << *decided;
  EXPECT_NE(decided->message().find("can never run"), std::string::npos) << *decided;
  EXPECT_EQ(RetryPushbackMs(*decided), -1);
  EXPECT_EQ(admission.refusals()[static_cast<int>(RefusalReason::kTooLarge)], 1u);
  EXPECT_EQ(admission.queue_state().waiting_requests, 0u);
}

TEST(AdmissionQueueTest, WaitersAreAdmittedAsRoomReturnsTakingTurnsAcrossLanes) {
  AdmissionControl admission(100, 10, Queue());
  Outcome held, a1, a2, b1;
  std::vector<std::string> order;
  std::mutex order_mu;
  ASSERT_TRUE(admission.AcquireOrWait(WaitFor(100, "x", &held))->ok());
  // Lane a queues two, lane b one: a's second waits for b's turn.
  EXPECT_FALSE(admission.AcquireOrWait(WaitFor(60, "a", &a1, &order, &order_mu, "a1")));
  EXPECT_FALSE(admission.AcquireOrWait(WaitFor(60, "a", &a2, &order, &order_mu, "a2")));
  EXPECT_FALSE(admission.AcquireOrWait(WaitFor(60, "b", &b1, &order, &order_mu, "b1")));
  AdmissionControl::QueueState state = admission.queue_state();
  EXPECT_EQ(state.waiting_requests, 3u);
  EXPECT_EQ(state.waiting_bytes, 180u);

  admission.Release(100);
  ASSERT_TRUE(a1.Get().ok());
  EXPECT_FALSE(b1.Decided());  // 60 + 60 > 100: nobody else fits yet
  admission.Release(60);
  ASSERT_TRUE(b1.Get().ok());
  EXPECT_FALSE(a2.Decided());
  admission.Release(60);
  ASSERT_TRUE(a2.Get().ok());
  admission.Release(60);
  EXPECT_EQ(order, (std::vector<std::string>{"a1", "b1", "a2"}));
  EXPECT_EQ(admission.queue_state().waiting_requests, 0u);
  EXPECT_EQ(admission.inflight_bytes(), 0u);
  EXPECT_EQ(admission.inflight_requests(), 0u);
}

TEST(AdmissionQueueTest, SmallRequestsPassQueuedLargeOnesButMidSizedOnesWaitTheirTurn) {
  AdmissionControl admission(100, 10, Queue());
  Outcome held, large, mid, small;
  ASSERT_TRUE(admission.AcquireOrWait(WaitFor(50, "x", &held))->ok());
  EXPECT_FALSE(admission.AcquireOrWait(WaitFor(80, "a", &large)));
  // 30 would fit now, but it is larger than the bypass (10): behind `large`.
  EXPECT_FALSE(admission.AcquireOrWait(WaitFor(30, "b", &mid)));
  // 10 bytes are small: admitted at once, though others wait.
  std::optional<absl::Status> at_once = admission.AcquireOrWait(WaitFor(10, "c", &small));
  ASSERT_TRUE(at_once.has_value());
  EXPECT_TRUE(at_once->ok());
  admission.Release(10);
  admission.Release(50);
  ASSERT_TRUE(large.Get().ok());
  admission.Release(80);
  ASSERT_TRUE(mid.Get().ok());
  admission.Release(30);
  EXPECT_EQ(admission.inflight_bytes(), 0u);
}

TEST(AdmissionQueueTest, SmallRequestsRunInTheirReserveWhileLargeOnesFillTheLimit) {
  AdmissionQueueOptions queue = Queue();
  queue.small_reserve_bytes = 1000;  // capped at a sixteenth of the limit: 10
  AdmissionControl admission(160, 10, queue);
  Outcome held, large, small, second_small;
  ASSERT_TRUE(admission.AcquireOrWait(WaitFor(160, "x", &held))->ok());
  EXPECT_FALSE(admission.AcquireOrWait(WaitFor(100, "a", &large)));
  // The limit is full and a large request waits: a small one still runs.
  std::optional<absl::Status> at_once = admission.AcquireOrWait(WaitFor(10, "b", &small));
  ASSERT_TRUE(at_once.has_value());
  EXPECT_TRUE(at_once->ok());
  EXPECT_EQ(admission.inflight_bytes(), 170u);
  // The reserve is full: the next small one waits, and goes as soon as the
  // first ends, although the large waiter's turn comes first.
  EXPECT_FALSE(admission.AcquireOrWait(WaitFor(10, "c", &second_small)));
  admission.Release(10);
  ASSERT_TRUE(second_small.Get().ok());
  EXPECT_FALSE(large.Decided());
  admission.Release(10);
  admission.Release(160);
  ASSERT_TRUE(large.Get().ok());
  admission.Release(100);
  EXPECT_EQ(admission.inflight_bytes(), 0u);
}

TEST(AdmissionQueueTest, TheSmallReserveIsForSmallRequestsOnly) {
  AdmissionQueueOptions queue = Queue();
  queue.small_reserve_bytes = 10;
  AdmissionControl admission(160, 10, queue);
  ASSERT_TRUE(admission.Acquire(160).ok());
  // 11 bytes are over the bypass: the limit alone applies, and it is full.
  EXPECT_FALSE(admission.TryAcquire(11, 0).has_value());
  absl::Status immediate = admission.Acquire(11);
  EXPECT_EQ(immediate.code(), absl::StatusCode::kResourceExhausted) << immediate;
  ASSERT_TRUE(admission.Acquire(10).ok());
  EXPECT_EQ(admission.Acquire(1).code(), absl::StatusCode::kResourceExhausted);
  admission.Release(10);
  admission.Release(160);
  EXPECT_EQ(admission.inflight_bytes(), 0u);
}

TEST(AdmissionQueueTest, ADeadlinePassingInTheQueueRefusesTheWaiterAndHoldsNothing) {
  AdmissionControl admission(100, 10, Queue());
  Outcome held, late;
  ASSERT_TRUE(admission.AcquireOrWait(WaitFor(100, "x", &held))->ok());
  AdmissionControl::Wait wait = WaitFor(50, "a", &late);
  wait.held_bytes = 40;
  wait.deadline = Clock::now() + std::chrono::milliseconds(30);
  EXPECT_FALSE(admission.AcquireOrWait(std::move(wait)));
  EXPECT_EQ(admission.queue_state().held_bytes, 40u);
  const absl::Status status = late.Get();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_NE(status.message().find("waiting"), std::string::npos) << status;
  EXPECT_EQ(admission.queue_state().waiting_requests, 0u);
  EXPECT_EQ(admission.queue_state().held_bytes, 0u);
  EXPECT_EQ(admission.inflight_bytes(), 100u);  // only the held request's
  EXPECT_EQ(admission.inflight_requests(), 1u);
  EXPECT_EQ(admission.refusals()[static_cast<int>(RefusalReason::kDeadline)], 1u);
  admission.Release(100);
}

TEST(AdmissionQueueTest, ACancelledWaiterLeavesTheQueueAndTheNextOneMovesUp) {
  AdmissionControl admission(100, 10, Queue());
  Outcome held, gone, next;
  ASSERT_TRUE(admission.AcquireOrWait(WaitFor(100, "x", &held))->ok());
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  AdmissionControl::Wait wait = WaitFor(90, "a", &gone);
  wait.cancelled = [cancelled] { return cancelled->load(); };
  EXPECT_FALSE(admission.AcquireOrWait(std::move(wait)));
  EXPECT_FALSE(admission.AcquireOrWait(WaitFor(90, "b", &next)));
  cancelled->store(true);
  EXPECT_EQ(gone.Get().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(admission.queue_state().waiting_requests, 1u);
  admission.Release(100);
  ASSERT_TRUE(next.Get().ok());
  admission.Release(90);
  EXPECT_EQ(admission.refusals()[static_cast<int>(RefusalReason::kCancelled)], 1u);
}

TEST(AdmissionQueueTest, AFullQueueRefusesWithItsStateAndARetryHint) {
  AdmissionQueueOptions queue = Queue();
  queue.max_waiting_requests = 1;
  AdmissionControl admission(100, 10, queue);
  Outcome held, first, second, held_again, heavy;
  ASSERT_TRUE(admission.AcquireOrWait(WaitFor(100, "x", &held))->ok());
  EXPECT_FALSE(admission.AcquireOrWait(WaitFor(50, "a", &first)));
  std::optional<absl::Status> full = admission.AcquireOrWait(WaitFor(50, "b", &second));
  ASSERT_TRUE(full.has_value());
  EXPECT_EQ(full->code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full->message().find("admission queue is full"), std::string::npos) << *full;
  EXPECT_NE(full->message().find("waiting: 1 requests"), std::string::npos) << *full;
  EXPECT_NE(full->message().find("--max_inflight_bytes"), std::string::npos) << *full;
  ASSERT_TRUE(RetryPushbackMs(*full).has_value());
  EXPECT_GE(*RetryPushbackMs(*full), 50);
  EXPECT_LE(*RetryPushbackMs(*full), 5000);
  admission.Release(100);
  ASSERT_TRUE(first.Get().ok());
  admission.Release(50);

  // The received bytes waiting requests hold are bounded too.
  ASSERT_TRUE(admission.AcquireOrWait(WaitFor(100, "x", &held_again))->ok());
  AdmissionControl::Wait wait = WaitFor(50, "c", &heavy);
  wait.held_bytes = 1001;
  full = admission.AcquireOrWait(std::move(wait));
  ASSERT_TRUE(full.has_value());
  EXPECT_EQ(full->code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full->message().find("--max_waiting_bytes"), std::string::npos) << *full;
  EXPECT_EQ(admission.refusals()[static_cast<int>(RefusalReason::kQueueFull)], 2u);
  admission.Release(100);
}

TEST(AdmissionQueueTest, AWaiterPastMaxQueueWaitIsRefusedAsBusy) {
  AdmissionQueueOptions queue = Queue();
  queue.max_wait = absl::Milliseconds(20);
  AdmissionControl admission(100, 10, queue);
  Outcome held, waiter;
  ASSERT_TRUE(admission.AcquireOrWait(WaitFor(100, "x", &held))->ok());
  EXPECT_FALSE(admission.AcquireOrWait(WaitFor(50, "a", &waiter)));
  const absl::Status status = waiter.Get();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_NE(status.message().find("--max_queue_wait"), std::string::npos) << status;
  EXPECT_TRUE(RetryPushbackMs(status).has_value());
  EXPECT_EQ(admission.refusals()[static_cast<int>(RefusalReason::kMaxWait)], 1u);
  admission.Release(100);
}

TEST(AdmissionQueueTest, RequestSlotsBoundAdmissionLikeBytes) {
  AdmissionControl admission(1000, 1, Queue());
  Outcome held, waiter;
  ASSERT_TRUE(admission.AcquireOrWait(WaitFor(20, "x", &held))->ok());
  EXPECT_FALSE(admission.AcquireOrWait(WaitFor(20, "a", &waiter)));
  admission.Release(20);
  ASSERT_TRUE(waiter.Get().ok());
  EXPECT_EQ(admission.inflight_requests(), 1u);
  admission.Release(20);
}

TEST(AdmissionQueueTest, StoppingRefusesEveryWaiter) {
  Outcome held, waiter;
  {
    AdmissionControl admission(100, 10, Queue());
    ASSERT_TRUE(admission.AcquireOrWait(WaitFor(100, "x", &held))->ok());
    EXPECT_FALSE(admission.AcquireOrWait(WaitFor(50, "a", &waiter)));
  }
  EXPECT_EQ(waiter.Get().code(), absl::StatusCode::kUnavailable);
}

TEST(AdmissionQueueTest, WithoutAQueueABusyServerRefusesAtOnce) {
  AdmissionControl admission(100, 10, AdmissionControl::QueueOff());
  Outcome held, busy;
  ASSERT_TRUE(admission.AcquireOrWait(WaitFor(100, "x", &held))->ok());
  std::optional<absl::Status> refused = admission.AcquireOrWait(WaitFor(50, "a", &busy));
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused->message().find("server busy"), std::string::npos) << *refused;
  admission.Release(100);
}

}  // namespace
}  // namespace sortd
