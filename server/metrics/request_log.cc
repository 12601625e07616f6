// Token-bucket rate limit: one token per line, refilled at lines_per_second,
// bucket size one second's worth.
#include "server/metrics/request_log.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace sortd {
namespace {

// Client-chosen text in a log line: escaped (no quotes, newlines or control
// bytes can forge a line) and cut to a bounded length.
constexpr size_t kLoggedIdBytes = 128;

std::string LoggedId(const std::string& request_id) {
  std::string out = absl::CHexEscape(absl::string_view(request_id).substr(0, kLoggedIdBytes));
  if (request_id.size() > kLoggedIdBytes) {
    absl::StrAppend(&out, "...(", request_id.size(), " bytes)");
  }
  return out;
}

}  // namespace

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
      status.ok() ? "slow" : "failed", method, LoggedId(request_id),
      absl::StatusCodeToString(status.code()), seconds,
      status.ok() ? "" : absl::StrFormat(" message=\"%s\"", absl::CHexEscape(status.message())),
      suppressed_ > 0 ? absl::StrFormat(" (%u similar lines suppressed)", suppressed_) : "");
  suppressed_ = 0;
  *out_ << line << std::endl;
}

}  // namespace sortd
