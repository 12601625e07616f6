#include "server/runtime/calls_in_flight.h"

#include <algorithm>
#include <chrono>

#include "absl/time/clock.h"

namespace sortd {
namespace {

using SteadyClock = std::chrono::steady_clock;

int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             SteadyClock::now().time_since_epoch())
      .count();
}

}  // namespace

void CallsInFlight::End() {
  // The latest end wins, also when two calls end at once. The time is
  // stored first, so that a waiter that sees the count reach zero also sees
  // this end (the fetch_sub releases it).
  const int64_t now = SteadyNanos();
  int64_t last = last_end_ns_.load(std::memory_order_relaxed);
  while (last < now &&
         !last_end_ns_.compare_exchange_weak(last, now, std::memory_order_relaxed)) {
  }
  count_.fetch_sub(1, std::memory_order_acq_rel);
}

bool CallsInFlight::WaitQuiet(absl::Duration timeout, absl::Duration linger) {
  // On the steady clock: a wall-clock step must not stretch the drain.
  const int64_t start = SteadyNanos();
  const int64_t timeout_ns = absl::ToInt64Nanoseconds(std::max(timeout, absl::ZeroDuration()));
  const int64_t linger_ns = absl::ToInt64Nanoseconds(linger);
  // Saturating: an infinite --drain_timeout waits for the calls however long.
  const int64_t deadline_ns = timeout_ns > INT64_MAX - start ? INT64_MAX : start + timeout_ns;
  const auto nap = [](int64_t ns) {
    absl::SleepFor(std::min(absl::Nanoseconds(ns), absl::Milliseconds(5)));
  };
  for (;;) {
    const int64_t now = SteadyNanos();
    if (count_.load(std::memory_order_acquire) == 0) {
      const int64_t quiet_at = last_end_ns_.load(std::memory_order_relaxed) + linger_ns;
      if (now >= quiet_at) return true;
      nap(quiet_at - now);
      continue;
    }
    if (now >= deadline_ns) return false;
    nap(deadline_ns - now);
  }
}

void DrainCountedContext::Count() {
  // A call that reads the flag just before the drain sets it may begin after
  // WaitQuiet saw none in flight: it then gets no linger, but the draining
  // check in its handler refuses it with a small UNAVAILABLE, so nothing of
  // a result can be cut off.
  if (counted_ || draining_->load(std::memory_order_relaxed)) return;
  counted_ = true;
  calls_->Begin();
}

}  // namespace sortd
