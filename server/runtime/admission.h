// Admission control: bounds the payload bytes and the number of requests
// that are queued or running. A request that does not fit is refused at
// once with RESOURCE_EXHAUSTED rather than queued without bound.
#ifndef SORTD_SERVER_RUNTIME_ADMISSION_H_
#define SORTD_SERVER_RUNTIME_ADMISSION_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace sortd {

class AdmissionControl {
 public:
  AdmissionControl(uint64_t max_bytes, uint64_t max_requests)
      : max_bytes_(max_bytes), max_requests_(max_requests) {}

  // Reserves `bytes` and one request slot, or explains why not.
  absl::Status Acquire(uint64_t bytes);
  // Reserves more bytes for a request already admitted (chunked uploads).
  absl::Status AcquireMoreBytes(uint64_t bytes);
  void ReleaseBytes(uint64_t bytes) { bytes_.fetch_sub(bytes); }
  void ReleaseRequest() { requests_.fetch_sub(1); }
  void Release(uint64_t bytes) {
    bytes_.fetch_sub(bytes);
    requests_.fetch_sub(1);
  }

  uint64_t inflight_bytes() const { return bytes_.load(); }
  uint64_t inflight_requests() const { return requests_.load(); }
  // Requests admitted since start (a change means the server was used).
  uint64_t admitted_total() const { return admitted_.load(std::memory_order_relaxed); }
  uint64_t max_bytes() const { return max_bytes_; }
  uint64_t max_requests() const { return max_requests_; }

 private:
  const uint64_t max_bytes_;
  const uint64_t max_requests_;
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> admitted_{0};
};

// Releases an admission on destruction unless moved from.
class Admitted {
 public:
  Admitted() = default;
  Admitted(AdmissionControl* control, uint64_t bytes)
      : control_(control), bytes_(bytes) {}
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
      control_->ReleaseBytes(bytes_);
      if (holds_request_) control_->ReleaseRequest();
    }
    control_ = nullptr;
    bytes_ = 0;
    holds_request_ = true;
  }

 private:
  AdmissionControl* control_ = nullptr;
  uint64_t bytes_ = 0;
  bool holds_request_ = true;
};

}  // namespace sortd

#endif  // SORTD_SERVER_RUNTIME_ADMISSION_H_
