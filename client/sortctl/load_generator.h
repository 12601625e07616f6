// `sortctl bench`: a closed-loop load generator for sortd, in the manner of
// ghz: N workers each keep one request (unary) or a window of requests
// (SortStream) outstanding for a fixed duration, then a summary is printed.
#ifndef SORTD_CLIENT_SORTCTL_LOAD_GENERATOR_H_
#define SORTD_CLIENT_SORTCTL_LOAD_GENERATOR_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace sortd::sortctl {

struct LoadOptions {
  std::string target;
  std::string method = "sort";  // sort | pairs | stream | echo | echo_stream
  std::string type = "uint32";  // numeric key type
  size_t keys_per_request = 1024;
  int concurrency = 8;          // workers; each has its own connection
  int stream_window = 16;       // stream: requests outstanding per worker
  absl::Duration duration = absl::Seconds(10);
  bool descending = false;
  int max_message_bytes = 64 << 20;
};

struct LoadReport {
  uint64_t ok = 0;
  std::map<std::string, uint64_t> errors;  // by status code name
  double seconds = 0;
  uint64_t payload_bytes = 0;  // request key (+value) bytes of ok requests
  std::vector<double> latencies_us;  // ok requests, sorted
  double Percentile(double p) const;
};

absl::StatusOr<LoadReport> RunLoad(const LoadOptions& options);
std::string FormatReport(const LoadOptions& options, const LoadReport& report);
// Sort (or SortStream) against Echo (EchoStream) of the same payload.
std::string FormatComparison(const LoadReport& echo, const LoadReport& sort);

}  // namespace sortd::sortctl

#endif  // SORTD_CLIENT_SORTCTL_LOAD_GENERATOR_H_
