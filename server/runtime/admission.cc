// Admission under one mutex: the counters, the waiters by lane and their
// turn order. Callbacks always run outside the lock; grants and expiries
// run on the admission thread, which Release wakes when capacity returns.
#include "server/runtime/admission.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sortd {
namespace {

using SteadyClock = std::chrono::steady_clock;

double SecondsBetween(SteadyClock::time_point from, SteadyClock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

std::string Mib(uint64_t bytes) {
  if (bytes < (uint64_t{16} << 20)) return absl::StrCat(bytes, " bytes");
  return absl::StrCat(bytes >> 20, " MiB");
}

}  // namespace

const char* RefusalReasonName(RefusalReason reason) {
  switch (reason) {
    case RefusalReason::kTooLarge:
      return "too_large";
    case RefusalReason::kQueueFull:
      return "queue_full";
    case RefusalReason::kMaxWait:
      return "max_wait";
    case RefusalReason::kDeadline:
      return "deadline";
    case RefusalReason::kCancelled:
      return "cancelled";
    case RefusalReason::kShutdown:
      return "shutdown";
  }
  return "unknown";
}

std::optional<int64_t> RetryPushbackMs(const absl::Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(kRetryPushbackPayload);
  int64_t ms = 0;
  if (!payload || !absl::SimpleAtoi(std::string(*payload), &ms)) return std::nullopt;
  return ms;
}

AdmissionControl::AdmissionControl(uint64_t max_bytes, uint64_t max_requests,
                                   AdmissionQueueOptions queue)
    : max_bytes_(max_bytes),
      max_requests_(max_requests),
      queue_(queue),
      small_reserve_(std::min(queue.small_reserve_bytes, max_bytes / 16)) {
  if (queue_.max_waiting_requests > 0) thread_ = std::thread([this] { Run(); });
}

AdmissionControl::~AdmissionControl() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

uint64_t AdmissionControl::RoomFor(uint64_t bytes) const {
  return max_bytes_ + (bytes <= queue_.bypass_bytes ? small_reserve_ : 0);
}

bool AdmissionControl::FitsLocked(const Wait& wait) const {
  if (wait.request_slot && requests_.load() + 1 > max_requests_) return false;
  return bytes_.load() + wait.bytes <= RoomFor(wait.bytes);
}

void AdmissionControl::TakeLocked(uint64_t bytes, bool request_slot) {
  bytes_.fetch_add(bytes);
  if (request_slot) {
    requests_.fetch_add(1);
    admitted_.fetch_add(1, std::memory_order_relaxed);
  }
}

absl::Status AdmissionControl::RefuseLocked(RefusalReason reason, std::string message,
                                            int64_t pushback_ms) {
  ++refusals_[static_cast<int>(reason)];
  absl::Status status;
  switch (reason) {
    case RefusalReason::kDeadline:
      status = absl::DeadlineExceededError(message);
      break;
    case RefusalReason::kCancelled:
      status = absl::CancelledError(message);
      break;
    case RefusalReason::kShutdown:
      status = absl::UnavailableError(message);
      break;
    default:
      status = absl::ResourceExhaustedError(message);
      break;
  }
  if (reason == RefusalReason::kTooLarge || reason == RefusalReason::kQueueFull ||
      reason == RefusalReason::kMaxWait) {
    status.SetPayload(kRetryPushbackPayload, absl::Cord(absl::StrCat(pushback_ms)));
  }
  return status;
}

// About as long as recent waiters waited, within [50 ms, 5 s]: a client that
// comes back then finds room about as often as a waiter did.
int64_t AdmissionControl::BusyPushbackMsLocked() const {
  const double ms = recent_wait_seconds_ * 1000.0;
  return static_cast<int64_t>(std::clamp(ms, 50.0, 5000.0));
}

std::string AdmissionControl::StateLocked() const {
  return absl::StrCat("in flight: ", requests_.load(), " requests, ", Mib(bytes_.load()),
                      " of ", Mib(max_bytes_), "; waiting: ", waiting_.waiting_requests,
                      " requests for ", Mib(waiting_.waiting_bytes), ", holding ",
                      Mib(waiting_.held_bytes), " received");
}

absl::Status AdmissionControl::Acquire(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > max_bytes_) {
    return RefuseLocked(RefusalReason::kTooLarge,
                        absl::StrCat("request of ", bytes,
                                     " bytes exceeds the server's in-flight limit of ",
                                     max_bytes_, " bytes (--max_inflight_bytes)"),
                        -1);
  }
  Wait wait;
  wait.bytes = bytes;
  if (!FitsLocked(wait)) return BusyLocked(wait);
  TakeLocked(bytes, true);
  return absl::OkStatus();
}

absl::Status AdmissionControl::BusyLocked(const Wait& wait) {
  const bool slots = wait.request_slot && requests_.load() + 1 > max_requests_;
  return RefuseLocked(
      RefusalReason::kQueueFull,
      slots ? absl::StrCat("server busy: ", max_requests_,
                           " requests already queued or running (--max_queued_requests)")
            : absl::StrCat("server busy: in-flight payload would exceed ", max_bytes_,
                           " bytes (--max_inflight_bytes)"),
      BusyPushbackMsLocked());
}

absl::Status AdmissionControl::AcquireMoreBytes(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes_.load() + bytes > max_bytes_) {
    // Part-way through an upload the server has accepted: a retry would
    // send it all again, so the hint says not to (the caller decides).
    return RefuseLocked(RefusalReason::kQueueFull,
                        absl::StrCat("server busy: in-flight payload would exceed ", max_bytes_,
                                     " bytes (--max_inflight_bytes) part-way through the upload"),
                        -1);
  }
  bytes_.fetch_add(bytes);
  return absl::OkStatus();
}

std::optional<absl::Status> AdmissionControl::DecideLocked(const Wait& wait) {
  absl::Status status;
  {
    if (wait.bytes > max_bytes_) {
      status = RefuseLocked(
          RefusalReason::kTooLarge,
          absl::StrCat("request of ", wait.bytes, " bytes exceeds the server's in-flight limit of ",
                       max_bytes_,
                       " bytes (--max_inflight_bytes): it can never run on this server; split "
                       "it or raise the limit"),
          -1);
    } else if (FitsLocked(wait) &&
               (waiting_.waiting_requests == 0 || wait.bytes <= queue_.bypass_bytes)) {
      TakeLocked(wait.bytes, wait.request_slot);
    } else if (queue_.max_waiting_requests == 0) {
      status = BusyLocked(wait);
    } else if (waiting_.waiting_requests + 1 > queue_.max_waiting_requests ||
               waiting_.held_bytes + wait.held_bytes > queue_.max_waiting_bytes) {
      status = RefuseLocked(
          RefusalReason::kQueueFull,
          absl::StrCat("server busy: in-flight payload would exceed ", max_bytes_,
                       " bytes (--max_inflight_bytes) and the admission queue is full (",
                       StateLocked(), "; --max_queued_waits=", queue_.max_waiting_requests,
                       ", --max_waiting_bytes=", queue_.max_waiting_bytes, ")"),
          BusyPushbackMsLocked());
    } else {
      return std::nullopt;  // it waits
    }
  }
  return status;
}

std::optional<absl::Status> AdmissionControl::TryAcquire(uint64_t bytes, uint64_t held_bytes) {
  Wait wait;
  wait.bytes = bytes;
  wait.held_bytes = held_bytes;
  std::lock_guard<std::mutex> lock(mu_);
  return DecideLocked(wait);
}

std::optional<absl::Status> AdmissionControl::AcquireOrWait(Wait wait) {
  std::lock_guard<std::mutex> lock(mu_);
  if (std::optional<absl::Status> decided = DecideLocked(wait)) return decided;
  waiting_.waiting_requests += 1;
  waiting_.waiting_bytes += wait.bytes;
  waiting_.held_bytes += wait.held_bytes;
  auto [lane, added] = lanes_.try_emplace(wait.lane);
  if (added) turns_.push_back(wait.lane);
  lane->second.push_back(Waiter{std::move(wait), SteadyClock::now()});
  released_ = true;  // it may fit already, behind nobody of its lane
  wake_.notify_all();
  return std::nullopt;
}

void AdmissionControl::Release(uint64_t bytes, uint64_t requests) {
  std::lock_guard<std::mutex> lock(mu_);
  bytes_.fetch_sub(bytes);
  requests_.fetch_sub(requests);
  if (!lanes_.empty()) {
    released_ = true;
    wake_.notify_all();
  }
}

void AdmissionControl::GrantLocked(std::deque<Decision>* out) {
  const SteadyClock::time_point now = SteadyClock::now();
  while (!turns_.empty()) {
    const std::string lane_name = turns_.front();
    auto lane = lanes_.find(lane_name);
    Waiter& head = lane->second.front();
    // The waiter whose turn it is blocks the others: no overtaking, so a
    // large request is not passed over forever by smaller ones behind it.
    if (!FitsLocked(head.wait)) break;
    turns_.pop_front();
    if (!GrantHeadLocked(lane, now, out)) turns_.push_back(lane_name);
  }
  // Small requests (at most bypass_bytes) at the head of their lane go
  // when they fit, whoever's turn it is: their reserve is theirs alone, and
  // they end soon.
  for (auto turn = turns_.begin(); turn != turns_.end();) {
    auto lane = lanes_.find(*turn);
    const Wait& head = lane->second.front().wait;
    if (head.bytes <= queue_.bypass_bytes && FitsLocked(head) &&
        GrantHeadLocked(lane, now, out)) {
      turn = turns_.erase(turn);
    } else {
      ++turn;
    }
  }
}

bool AdmissionControl::GrantHeadLocked(std::map<std::string, std::deque<Waiter>>::iterator lane,
                                       SteadyClock::time_point now, std::deque<Decision>* out) {
  Waiter& head = lane->second.front();
  TakeLocked(head.wait.bytes, head.wait.request_slot);
  const double waited = SecondsBetween(head.since, now);
  recent_wait_seconds_ = 0.8 * recent_wait_seconds_ + 0.2 * waited;
  waiting_.waiting_requests -= 1;
  waiting_.waiting_bytes -= head.wait.bytes;
  waiting_.held_bytes -= head.wait.held_bytes;
  out->push_back(Decision{std::move(head.wait.done), absl::OkStatus(), waited});
  lane->second.pop_front();
  if (!lane->second.empty()) return false;
  lanes_.erase(lane);
  return true;
}

void AdmissionControl::ExpireLocked(std::deque<Decision>* out) {
  const SteadyClock::time_point now = SteadyClock::now();
  const Clock::time_point wall = Clock::now();
  for (auto lane = lanes_.begin(); lane != lanes_.end();) {
    std::deque<Waiter>& waiters = lane->second;
    for (auto it = waiters.begin(); it != waiters.end();) {
      const double waited = SecondsBetween(it->since, now);
      std::optional<RefusalReason> reason;
      if (stopping_) {
        reason = RefusalReason::kShutdown;
      } else if (it->wait.deadline <= wall) {
        // Before cancellation: gRPC cancels a call whose deadline passed.
        reason = RefusalReason::kDeadline;
      } else if (it->wait.cancelled && it->wait.cancelled()) {
        reason = RefusalReason::kCancelled;
      } else if (waited >= absl::ToDoubleSeconds(queue_.max_wait)) {
        reason = RefusalReason::kMaxWait;
      }
      if (!reason) {
        ++it;
        continue;
      }
      const std::string what =
          absl::StrCat(" after waiting ", absl::SixDigits(waited), " s for admission of ",
                       it->wait.bytes, " bytes (", StateLocked(), ")");
      absl::Status status;
      switch (*reason) {
        case RefusalReason::kShutdown:
          status = RefuseLocked(*reason, absl::StrCat("server stopping: not run", what), 0);
          break;
        case RefusalReason::kCancelled:
          status = RefuseLocked(*reason, absl::StrCat("request cancelled", what), 0);
          break;
        case RefusalReason::kDeadline:
          status = RefuseLocked(*reason, absl::StrCat("deadline exceeded", what), 0);
          break;
        default:
          status = RefuseLocked(*reason,
                                absl::StrCat("server busy: not admitted within --max_queue_wait=",
                                             absl::FormatDuration(queue_.max_wait), what),
                                BusyPushbackMsLocked());
          break;
      }
      waiting_.waiting_requests -= 1;
      waiting_.waiting_bytes -= it->wait.bytes;
      waiting_.held_bytes -= it->wait.held_bytes;
      out->push_back(Decision{std::move(it->wait.done), std::move(status), waited});
      it = waiters.erase(it);
    }
    if (waiters.empty()) {
      turns_.erase(std::find(turns_.begin(), turns_.end(), lane->first));
      lane = lanes_.erase(lane);
    } else {
      ++lane;
    }
  }
}

void AdmissionControl::Run() {
  const auto poll = absl::ToChronoMilliseconds(queue_.poll);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (lanes_.empty()) {
      if (stopping_) return;
      wake_.wait(lock, [this] { return stopping_ || !lanes_.empty(); });
      continue;
    }
    wake_.wait_for(lock, poll, [this] { return stopping_ || released_; });
    released_ = false;
    std::deque<Decision> decisions;
    if (!stopping_) GrantLocked(&decisions);
    ExpireLocked(&decisions);
    if (decisions.empty()) continue;
    lock.unlock();
    for (Decision& decision : decisions) decision.done(std::move(decision.status), decision.waited);
    lock.lock();
  }
}

AdmissionControl::QueueState AdmissionControl::queue_state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_;
}

std::array<uint64_t, kRefusalReasons> AdmissionControl::refusals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refusals_;
}

}  // namespace sortd
