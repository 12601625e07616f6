// Admission control: bounds the payload bytes and the number of requests
// that are running (or held by a response being written). A request that
// fits the limits but not the moment waits in a bounded queue, in turn (fair
// between connections), until it fits, its deadline passes, it is cancelled
// or it has waited --max_queue_wait; one that can never fit, or finds the
// queue full, is refused at once with RESOURCE_EXHAUSTED and a retry hint.
#ifndef SORTD_SERVER_RUNTIME_ADMISSION_H_
#define SORTD_SERVER_RUNTIME_ADMISSION_H_

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace sortd {

// The queue's bounds (flags: --max_queued_waits, --max_waiting_bytes,
// --max_queue_wait, --queue_bypass_bytes; docs/operations.md, "Admission").
struct AdmissionQueueOptions {
  // Requests waiting at once; 0 turns the queue off (refused at once).
  uint64_t max_waiting_requests = 256;
  // Payload already received (a unary request's message, a first chunk)
  // that waiting requests hold; sessions wait holding nothing.
  uint64_t max_waiting_bytes = uint64_t{256} << 20;
  // The longest a request waits before it is refused (RESOURCE_EXHAUSTED).
  absl::Duration max_wait = absl::Seconds(60);
  // Requests of at most this many bytes are admitted whenever they fit,
  // ahead of larger waiters: small (batched, inline) requests are never
  // starved by queued large ones. The large are bounded (max_bytes), so
  // they still get their turn as the small ones come and go.
  uint64_t bypass_bytes = uint64_t{1} << 20;
  // Such small requests may also use this much beyond max_bytes (at most a
  // sixteenth of it): where large requests fill the limit, the small still
  // run at once instead of waiting for a large one to end. The bound on
  // memory is then max_bytes plus this.
  uint64_t small_reserve_bytes = uint64_t{64} << 20;
  // How often waiters are checked for cancellation and deadlines.
  absl::Duration poll = absl::Milliseconds(10);
};

// Why a request was refused, for sortd_admission_refusals_total{reason}.
enum class RefusalReason {
  kTooLarge,   // larger than the limit: it can never run
  kQueueFull,  // the queue's count or waiting-bytes bound was reached
  kMaxWait,    // waited --max_queue_wait
  kDeadline,   // the call's deadline passed while it waited
  kCancelled,  // the client went away while it waited
  kShutdown,   // the server stopped while it waited
};
inline constexpr int kRefusalReasons = 6;
const char* RefusalReasonName(RefusalReason reason);

// The payload key of a refusal's retry hint (milliseconds; -1: do not
// retry), sent as gRPC's `grpc-retry-pushback-ms` trailing metadata.
inline constexpr char kRetryPushbackPayload[] = "sortd/retry-pushback-ms";
std::optional<int64_t> RetryPushbackMs(const absl::Status& status);

class AdmissionControl {
 public:
  using Clock = std::chrono::system_clock;  // gRPC deadlines are system time

  // One request that asks to be admitted, waiting if it must.
  struct Wait {
    uint64_t bytes = 0;         // to reserve against the in-flight limit
    bool request_slot = true;   // also takes a request slot
    uint64_t held_bytes = 0;    // received payload held while it waits
    std::string lane;           // fairness: the connection (peer) it came on
    Clock::time_point deadline = Clock::time_point::max();
    std::function<bool()> cancelled;  // may be empty
    // Called once when a queued request is decided, on the admission
    // thread: OK when admitted (the bytes and slot are then the caller's
    // to release), else the refusal. `waited_seconds`: time queued.
    std::function<void(absl::Status, double waited_seconds)> done;
  };

  AdmissionControl(uint64_t max_bytes, uint64_t max_requests,
                   AdmissionQueueOptions queue = QueueOff());
  ~AdmissionControl();  // refuses whoever still waits (UNAVAILABLE)
  AdmissionControl(const AdmissionControl&) = delete;
  AdmissionControl& operator=(const AdmissionControl&) = delete;

  static AdmissionQueueOptions QueueOff() {
    AdmissionQueueOptions off;
    off.max_waiting_requests = 0;
    off.small_reserve_bytes = 0;
    return off;
  }

  // Admits now or refuses now: never waits (SortStream's messages, which
  // must answer in order, and callers that cannot wait).
  absl::Status Acquire(uint64_t bytes);
  // Reserves more bytes for a request already admitted, now or not at all.
  absl::Status AcquireMoreBytes(uint64_t bytes);
  // Admits or refuses now (returns the decision; `done` is not called), or
  // queues `wait` until it is decided (returns nullopt; `done` will be).
  std::optional<absl::Status> AcquireOrWait(Wait wait);
  // AcquireOrWait's decision when it is immediate (a request slot and
  // `bytes`), nullopt when the request would wait: lets a caller build its
  // Wait (callbacks, the peer's name) only for requests that queue.
  std::optional<absl::Status> TryAcquire(uint64_t bytes, uint64_t held_bytes);

  void ReleaseBytes(uint64_t bytes) { Release(bytes, 0); }
  void ReleaseRequest() { Release(0, 1); }
  void Release(uint64_t bytes) { Release(bytes, 1); }

  uint64_t inflight_bytes() const { return bytes_.load(); }
  uint64_t inflight_requests() const { return requests_.load(); }
  // Requests admitted since start (a change means the server was used).
  uint64_t admitted_total() const { return admitted_.load(std::memory_order_relaxed); }
  uint64_t max_bytes() const { return max_bytes_; }
  uint64_t max_requests() const { return max_requests_; }
  const AdmissionQueueOptions& queue_options() const { return queue_; }

  // The queue now (gauges), and refusals since start by reason.
  struct QueueState {
    uint64_t waiting_requests = 0;
    uint64_t waiting_bytes = 0;  // what the waiters ask to reserve
    uint64_t held_bytes = 0;     // what they hold while waiting
  };
  QueueState queue_state() const;
  std::array<uint64_t, kRefusalReasons> refusals() const;

 private:
  struct Waiter {
    Wait wait;
    std::chrono::steady_clock::time_point since;
  };
  struct Decision {  // a callback to run outside the lock
    std::function<void(absl::Status, double)> done;
    absl::Status status;
    double waited = 0;
  };

  void Release(uint64_t bytes, uint64_t requests);
  // What a request of `bytes` may fill: the limit, plus the small reserve
  // for small requests.
  uint64_t RoomFor(uint64_t bytes) const;
  bool FitsLocked(const Wait& wait) const;
  // Admits (OK), refuses, or nullopt: the request must wait.
  std::optional<absl::Status> DecideLocked(const Wait& wait);
  void TakeLocked(uint64_t bytes, bool request_slot);
  absl::Status RefuseLocked(RefusalReason reason, std::string message, int64_t pushback_ms);
  int64_t BusyPushbackMsLocked() const;
  // The refusal of a request that does not fit now (slots or bytes), with
  // the busy retry hint.
  absl::Status BusyLocked(const Wait& wait);
  std::string StateLocked() const;
  // Grants waiters in turn while the next one fits, then small waiters
  // that fit whoever's turn it is; expires the rest.
  void GrantLocked(std::deque<Decision>* out);
  // Admits the first waiter of `lane` (it fits) and returns true when the
  // lane is now empty (and gone).
  bool GrantHeadLocked(std::map<std::string, std::deque<Waiter>>::iterator lane,
                       std::chrono::steady_clock::time_point now, std::deque<Decision>* out);
  void ExpireLocked(std::deque<Decision>* out);
  void Run();  // the admission thread

  const uint64_t max_bytes_;
  const uint64_t max_requests_;
  const AdmissionQueueOptions queue_;
  const uint64_t small_reserve_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> admitted_{0};
  // Waiters by lane, and the lanes in turn order (each lane once).
  std::map<std::string, std::deque<Waiter>> lanes_;
  std::deque<std::string> turns_;
  QueueState waiting_;
  double recent_wait_seconds_ = 0;  // EWMA of granted waits: the busy hint
  std::array<uint64_t, kRefusalReasons> refusals_{};
  bool released_ = false;  // capacity came back since the thread last looked
  bool stopping_ = false;
  std::thread thread_;
};

// Releases an admission on destruction unless moved from.
class Admitted {
 public:
  Admitted() = default;
  Admitted(AdmissionControl* control, uint64_t bytes, bool holds_request = true)
      : control_(control), bytes_(bytes), holds_request_(holds_request) {}
  Admitted(Admitted&& other) noexcept { *this = std::move(other); }
  Admitted& operator=(Admitted&& other) noexcept {
    Reset();
    control_ = other.control_;
    bytes_ = other.bytes_;
    holds_request_ = other.holds_request_;
    other.control_ = nullptr;
    return *this;
  }
  Admitted(const Admitted&) = delete;
  Admitted& operator=(const Admitted&) = delete;
  ~Admitted() { Reset(); }

  // Adds bytes to this admission (already reserved by AcquireMoreBytes).
  void AddBytes(uint64_t bytes) { bytes_ += bytes; }
  // Reserves `bytes` more for this admission and holds them with it, or
  // explains why not (nothing reserved then). OK without a control.
  absl::Status AcquireMoreBytes(uint64_t bytes) {
    if (control_ == nullptr) return absl::OkStatus();
    absl::Status status = control_->AcquireMoreBytes(bytes);
    if (status.ok()) bytes_ += bytes;
    return status;
  }
  // Gives the request slot back now and keeps the bytes (a response that
  // waits to be written holds memory, not a place in the queue).
  void ReleaseRequestSlot() {
    if (control_ != nullptr && holds_request_) control_->ReleaseRequest();
    holds_request_ = false;
  }
  void Reset() {
    if (control_ != nullptr) {
      if (holds_request_) {
        control_->Release(bytes_);
      } else {
        control_->ReleaseBytes(bytes_);
      }
    }
    control_ = nullptr;
    bytes_ = 0;
    holds_request_ = true;
  }
  uint64_t bytes() const { return bytes_; }

 private:
  AdmissionControl* control_ = nullptr;
  uint64_t bytes_ = 0;
  bool holds_request_ = true;
};

}  // namespace sortd

#endif  // SORTD_SERVER_RUNTIME_ADMISSION_H_
