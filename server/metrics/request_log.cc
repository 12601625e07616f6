// Token-bucket rate limit: one token per line, refilled at lines_per_second,
// bucket size one second's worth.
#include "server/metrics/request_log.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace sortd {

RequestLog::RequestLog(const RequestLogOptions& options, std::ostream* out)
    : options_(options),
      out_(out),
      tokens_(std::max(1.0, options.lines_per_second)),
      last_refill_(std::chrono::steady_clock::now()) {}

void RequestLog::Maybe(const char* method, const std::string& request_id,
                       const absl::Status& status, double seconds) {
  const bool slow = seconds >= options_.slow_seconds;
  if (status.ok() && !slow) return;
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - last_refill_).count();
  last_refill_ = now;
  const double capacity = std::max(1.0, options_.lines_per_second);
  tokens_ = std::min(capacity, tokens_ + elapsed * options_.lines_per_second);
  if (tokens_ < 1.0) {
    ++suppressed_;
    ++suppressed_total_;
    return;
  }
  tokens_ -= 1.0;
  std::string line = absl::StrFormat(
      "%s sortd: %s %s request_id=\"%s\" code=%s duration=%.6fs%s%s",
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()),
      status.ok() ? "slow" : "failed", method, request_id,
      absl::StatusCodeToString(status.code()), seconds,
      status.ok() ? "" : absl::StrFormat(" message=\"%s\"", status.message()),
      suppressed_ > 0 ? absl::StrFormat(" (%u similar lines suppressed)", suppressed_) : "");
  suppressed_ = 0;
  *out_ << line << std::endl;
}

}  // namespace sortd
