// Load generator. Requests are encoded once per worker and re-sent, so the
// client measures the service, not its own encoding. Every worker has its own
// channel (local subchannel pool) to spread load across connections, with the
// C++ client's channel config: with several addresses (`ipv4:a,b,c`, or a DNS
// name of a headless Service) each worker spreads its calls round-robin over
// every replica.
#include "client/sortctl/load_generator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/sortd_client.h"
#include "client/typed_codec.h"
#include "sortd/v1/sort.grpc.pb.h"

namespace sortd::sortctl {
namespace {

using Clock = std::chrono::steady_clock;

template <typename T>
std::vector<T> RandomKeys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> keys(n);
  for (T& k : keys) {
    if constexpr (std::is_floating_point_v<T>) {
      k = static_cast<T>(std::uniform_real_distribution<double>(-1e6, 1e6)(rng));
    } else {
      k = static_cast<T>(rng());
    }
  }
  return keys;
}

absl::Status FillKeys(const std::string& type, size_t n, uint64_t seed, v1::TypedArray* out) {
  if (type == "uint32") client::EncodeTo<uint32_t>(RandomKeys<uint32_t>(n, seed), out);
  else if (type == "int32") client::EncodeTo<int32_t>(RandomKeys<int32_t>(n, seed), out);
  else if (type == "float32") client::EncodeTo<float>(RandomKeys<float>(n, seed), out);
  else if (type == "uint64") client::EncodeTo<uint64_t>(RandomKeys<uint64_t>(n, seed), out);
  else if (type == "int64") client::EncodeTo<int64_t>(RandomKeys<int64_t>(n, seed), out);
  else if (type == "float64") client::EncodeTo<double>(RandomKeys<double>(n, seed), out);
  else return absl::InvalidArgumentError(absl::StrCat("type: unknown \"", type, "\""));
  return absl::OkStatus();
}

std::string CodeName(grpc::StatusCode code) {
  static const char* kNames[] = {
      "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
      "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
      "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  const int c = static_cast<int>(code);
  return c >= 0 && c <= 16 ? kNames[c] : absl::StrCat("CODE_", c);
}

double Micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

struct WorkerResult {
  uint64_t ok = 0;
  std::map<std::string, uint64_t> errors;
  std::vector<double> latencies_us;
};

std::shared_ptr<grpc::Channel> MakeChannel(const LoadOptions& options) {
  // The channel SortClient::Connect makes (round_robin, health checking,
  // retries of UNAVAILABLE), plus connections of the worker's own.
  client::ClientOptions client_options;
  client_options.max_message_bytes = options.max_message_bytes;
  grpc::ChannelArguments args = client::MakeChannelArguments(client_options);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(options.target, grpc::InsecureChannelCredentials(), args);
}

void UnaryWorker(const LoadOptions& options, int worker, Clock::time_point end,
                 WorkerResult* result) {
  auto channel = MakeChannel(options);
  auto stub = v1::SortService::NewStub(channel);
  auto diagnostics = v1::DiagnosticsService::NewStub(channel);
  v1::SortRequest sort;
  v1::SortPairsRequest pairs;
  const bool is_pairs = options.method == "pairs";
  const bool is_echo = options.method == "echo";
  if (is_pairs) {
    FillKeys(options.type, options.keys_per_request, worker, pairs.mutable_keys()).IgnoreError();
    FillKeys("uint32", options.keys_per_request, worker + 1000, pairs.mutable_values()).IgnoreError();
    pairs.set_order(options.descending ? v1::SORT_ORDER_DESCENDING : v1::SORT_ORDER_ASCENDING);
  } else {
    FillKeys(options.type, options.keys_per_request, worker, sort.mutable_keys()).IgnoreError();
    sort.set_order(options.descending ? v1::SORT_ORDER_DESCENDING : v1::SORT_ORDER_ASCENDING);
  }
  while (Clock::now() < end) {
    grpc::ClientContext ctx;
    const Clock::time_point start = Clock::now();
    grpc::Status status;
    if (is_pairs) {
      v1::SortPairsResponse response;
      status = stub->SortPairs(&ctx, pairs, &response);
    } else if (is_echo) {
      v1::SortResponse response;
      status = diagnostics->Echo(&ctx, sort, &response);
    } else {
      v1::SortResponse response;
      status = stub->Sort(&ctx, sort, &response);
    }
    const double us = Micros(Clock::now() - start);
    if (status.ok()) {
      ++result->ok;
      result->latencies_us.push_back(us);
    } else {
      ++result->errors[CodeName(status.error_code())];
    }
  }
}

void StreamWorker(const LoadOptions& options, int worker, Clock::time_point end,
                  WorkerResult* result) {
  auto channel = MakeChannel(options);
  auto stub = v1::SortService::NewStub(channel);
  auto diagnostics = v1::DiagnosticsService::NewStub(channel);
  grpc::ClientContext ctx;
  auto stream = options.method == "echo_stream" ? diagnostics->EchoStream(&ctx)
                                                 : stub->SortStream(&ctx);
  v1::SortRequest request;
  FillKeys(options.type, options.keys_per_request, worker, request.mutable_keys()).IgnoreError();
  request.set_order(options.descending ? v1::SORT_ORDER_DESCENDING : v1::SORT_ORDER_ASCENDING);

  std::mutex mu;
  std::condition_variable cv;
  int outstanding = 0;
  std::unordered_map<uint64_t, Clock::time_point> sent;
  std::thread reader([&] {
    v1::SortResponse response;
    while (stream->Read(&response)) {
      const Clock::time_point now = Clock::now();
      std::lock_guard<std::mutex> lock(mu);
      uint64_t id = std::stoull(response.request_id());
      auto it = sent.find(id);
      if (response.has_error()) {
        ++result->errors[CodeName(static_cast<grpc::StatusCode>(response.error().code()))];
      } else if (it != sent.end()) {
        ++result->ok;
        result->latencies_us.push_back(Micros(now - it->second));
      }
      if (it != sent.end()) sent.erase(it);
      --outstanding;
      cv.notify_one();
    }
  });
  uint64_t next_id = 0;
  while (Clock::now() < end) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return outstanding < options.stream_window; });
      ++outstanding;
      sent[next_id] = Clock::now();
    }
    request.set_request_id(std::to_string(next_id++));
    if (!stream->Write(request)) break;
  }
  stream->WritesDone();
  reader.join();
  grpc::Status status = stream->Finish();
  if (!status.ok()) ++result->errors[CodeName(status.error_code())];
}

}  // namespace

double LoadReport::Percentile(double p) const {
  if (latencies_us.empty()) return 0;
  const size_t i = std::min(latencies_us.size() - 1,
                            static_cast<size_t>(p / 100.0 * latencies_us.size()));
  return latencies_us[i];
}

absl::StatusOr<LoadReport> RunLoad(const LoadOptions& options) {
  if (options.method != "sort" && options.method != "pairs" && options.method != "stream" &&
      options.method != "echo" && options.method != "echo_stream") {
    return absl::InvalidArgumentError(
        "method: expected sort, pairs, stream, echo or echo_stream");
  }
  v1::TypedArray probe;
  absl::Status type_ok = FillKeys(options.type, 1, 0, &probe);
  if (!type_ok.ok()) return type_ok;
  if (options.concurrency < 1) return absl::InvalidArgumentError("concurrency: must be >= 1");

  std::vector<WorkerResult> results(options.concurrency);
  std::vector<std::thread> workers;
  const Clock::time_point start = Clock::now();
  const Clock::time_point end = start + absl::ToChronoNanoseconds(options.duration);
  for (int w = 0; w < options.concurrency; ++w) {
    workers.emplace_back([&, w] {
      if (options.method == "stream" || options.method == "echo_stream") {
        StreamWorker(options, w, end, &results[w]);
      } else {
        UnaryWorker(options, w, end, &results[w]);
      }
    });
  }
  for (auto& t : workers) t.join();
  LoadReport report;
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const size_t width = options.type.find("32") != std::string::npos ? 4 : 8;
  const size_t per_request =
      options.keys_per_request * (width + (options.method == "pairs" ? 4 : 0));
  for (WorkerResult& r : results) {
    report.ok += r.ok;
    for (const auto& [code, count] : r.errors) report.errors[code] += count;
    report.latencies_us.insert(report.latencies_us.end(), r.latencies_us.begin(),
                               r.latencies_us.end());
  }
  report.payload_bytes = report.ok * per_request;
  std::sort(report.latencies_us.begin(), report.latencies_us.end());
  return report;
}

std::string FormatReport(const LoadOptions& options, const LoadReport& report) {
  uint64_t errors = 0;
  std::string by_code;
  for (const auto& [code, count] : report.errors) {
    errors += count;
    absl::StrAppend(&by_code, " ", code, "=", count);
  }
  const double secs = std::max(report.seconds, 1e-9);
  std::string out = absl::StrFormat(
      "Summary:\n"
      "  method %s, type %s, %zu keys/request, concurrency %d, %.2f s\n"
      "  requests: %u ok, %u errors%s\n"
      "  throughput: %.1f req/s, payload %.3f GB/s (request bytes), %.3f Mkeys/s\n"
      "  latency: p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, max %.3f ms\n",
      options.method, options.type, options.keys_per_request, options.concurrency,
      report.seconds, report.ok, errors, by_code, report.ok / secs,
      report.payload_bytes / secs / 1e9,
      report.ok * static_cast<double>(options.keys_per_request) / secs / 1e6,
      report.Percentile(50) / 1e3, report.Percentile(90) / 1e3,
      report.Percentile(99) / 1e3,
      report.latencies_us.empty() ? 0.0 : report.latencies_us.back() / 1e3);
  return out;
}

std::string FormatComparison(const LoadReport& echo, const LoadReport& sort) {
  const double echo_rps = echo.ok / std::max(echo.seconds, 1e-9);
  const double sort_rps = sort.ok / std::max(sort.seconds, 1e-9);
  return absl::StrFormat(
      "Versus echo of the same payload:\n"
      "  requests/s: %.2fx echo (%.1f vs %.1f)\n"
      "  p50: %+.3f ms, p99: %+.3f ms (sort minus echo)\n",
      echo_rps > 0 ? sort_rps / echo_rps : 0.0, sort_rps, echo_rps,
      (sort.Percentile(50) - echo.Percentile(50)) / 1e3,
      (sort.Percentile(99) - echo.Percentile(99)) / 1e3);
}

}  // namespace sortd::sortctl
