// Logs failed and slow requests (with request id and status) to stderr,
// rate-limited so that a flood of bad requests cannot flood the log.
#ifndef SORTD_SERVER_METRICS_REQUEST_LOG_H_
#define SORTD_SERVER_METRICS_REQUEST_LOG_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace sortd {

struct RequestLogOptions {
  // Requests slower than this are logged even when they succeed.
  double slow_seconds = 1.0;
  // At most this many lines per second; the rest are counted and the count
  // is reported with the next line that is written.
  double lines_per_second = 10;
};

class RequestLog {
 public:
  RequestLog(const RequestLogOptions& options, std::ostream* out);

  // Logs when the request failed or was slow (and the rate allows).
  void Maybe(const char* method, const std::string& request_id,
             const absl::Status& status, double seconds);

  uint64_t suppressed_total() const { return suppressed_total_; }

 private:
  RequestLogOptions options_;
  std::ostream* out_;
  std::mutex mu_;
  double tokens_;
  std::chrono::steady_clock::time_point last_refill_;
  uint64_t suppressed_ = 0;
  uint64_t suppressed_total_ = 0;
};

}  // namespace sortd

#endif  // SORTD_SERVER_METRICS_REQUEST_LOG_H_
