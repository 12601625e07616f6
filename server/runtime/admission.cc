// Lock-free admission: optimistic add, undo when over the limit.
#include "server/runtime/admission.h"

#include "absl/strings/str_cat.h"

namespace sortd {

absl::Status AdmissionControl::Acquire(uint64_t bytes) {
  if (bytes > max_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "request of ", bytes, " bytes exceeds the server's in-flight limit of ",
        max_bytes_, " bytes (--max_inflight_bytes)"));
  }
  if (requests_.fetch_add(1) + 1 > max_requests_) {
    requests_.fetch_sub(1);
    return absl::ResourceExhaustedError(absl::StrCat(
        "server busy: ", max_requests_,
        " requests already queued or running (--max_queued_requests)"));
  }
  if (bytes_.fetch_add(bytes) + bytes > max_bytes_) {
    bytes_.fetch_sub(bytes);
    requests_.fetch_sub(1);
    return absl::ResourceExhaustedError(absl::StrCat(
        "server busy: in-flight payload would exceed ", max_bytes_,
        " bytes (--max_inflight_bytes)"));
  }
  admitted_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status AdmissionControl::AcquireMoreBytes(uint64_t bytes) {
  if (bytes_.fetch_add(bytes) + bytes > max_bytes_) {
    bytes_.fetch_sub(bytes);
    return absl::ResourceExhaustedError(absl::StrCat(
        "server busy: in-flight payload would exceed ", max_bytes_,
        " bytes (--max_inflight_bytes)"));
  }
  return absl::OkStatus();
}

}  // namespace sortd
