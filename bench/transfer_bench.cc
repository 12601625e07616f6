// End-to-end transfer benchmark of a running sortd through the C++ client:
// for each array size and connection count, a large sort through a sort
// session (what users get), the same bytes moved up and back without the sort
// (transfer_only: needs sortd --diagnostics), and, for reference, the
// old single-stream SortChunked path. Every sort is checked (order and a
// checksum). Run it through scripts/gpu-host/transfer_bench.sh.
//
//   sortd_transfer_bench --target=127.0.0.1:50051 --sizes_mib=1,64,1024
//                        --connections=1,4,8 --repeat=3 [--values] [--chunked]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/sortd_client.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "sortd address");
ABSL_FLAG(std::string, sizes_mib, "1,16,64,256,1024", "key array sizes (MiB of uint32 keys)");
ABSL_FLAG(std::string, connections, "1,2,4,8", "connection counts");
ABSL_FLAG(int, repeat, 3, "runs per point (the best and the median are reported)");
ABSL_FLAG(bool, values, false, "also carry uint32 values (SortPairs)");
ABSL_FLAG(bool, transfer, true, "also time transfer_only sessions (sortd --diagnostics)");
ABSL_FLAG(bool, chunked, false, "also time SortChunked (one stream) at each size");
ABSL_FLAG(std::string, modes, "",
          "comma-separated subset of sort,coded,transfer,chunked,auto,unary (default: by "
          "flags); coded: a session with delta-coded keys (compress_keys); auto: SortInto (the "
          "client's choice of path); unary: one Sort message (sessions off)");
ABSL_FLAG(std::string, sizes_log2, "",
          "key array sizes as powers of two of u32 keys (e.g. 14,16,18,20); overrides sizes_mib");
ABSL_FLAG(int, receive_window_bytes, -1,
          "ClientOptions::receive_window_bytes (-1: the client's default; 0: gRPC's probe)");
ABSL_FLAG(int, key_bits, 32, "key width: 32 (uint32) or 64 (uint64); sizes count keys");
ABSL_FLAG(bool, retries, true, "the default service config's retry policy (false: none)");

namespace {

using Clock = std::chrono::steady_clock;

std::vector<int> ParseList(const std::string& text) {
  std::vector<int> out;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int v = 0;
    if (absl::SimpleAtoi(item, &v)) out.push_back(v);
  }
  return out;
}

double PeakRssMiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

struct Point {
  std::vector<double> seconds;
  void Report(const char* mode, size_t bytes, int connections, size_t moved) {
    const double first = seconds.front();  // a cold run (e.g. pinned memory not yet cached)
    std::sort(seconds.begin(), seconds.end());
    const double best = seconds.front();
    const double median = seconds[seconds.size() / 2];
    std::printf("cpp\t%s\t%zu\t%d\t%.6f\t%.6f\t%.6f\t%.2f\t%.0f\n", mode, bytes, connections,
                best, median, first, moved / best / 1e9, PeakRssMiB());
    std::fflush(stdout);
  }
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::vector<size_t> sizes;  // u32 keys
  if (!absl::GetFlag(FLAGS_sizes_log2).empty()) {
    for (int log2 : ParseList(absl::GetFlag(FLAGS_sizes_log2))) sizes.push_back(size_t{1} << log2);
  } else {
    for (int mib : ParseList(absl::GetFlag(FLAGS_sizes_mib))) {
      sizes.push_back((size_t{static_cast<size_t>(mib)} << 20) / 4);
    }
  }
  const std::vector<int> connection_counts = ParseList(absl::GetFlag(FLAGS_connections));
  const int repeat = std::max(1, absl::GetFlag(FLAGS_repeat));
  const bool values = absl::GetFlag(FLAGS_values);
  std::string modes = absl::GetFlag(FLAGS_modes);
  if (modes.empty()) {
    modes = "sort";
    if (absl::GetFlag(FLAGS_transfer)) modes += ",transfer";
    if (absl::GetFlag(FLAGS_chunked)) modes += ",chunked";
  }
  auto has_mode = [&](const char* m) {
    for (absl::string_view item : absl::StrSplit(modes, ',')) {
      if (item == m) return true;
    }
    return false;
  };

  sortd::client::ClientOptions options;
  if (absl::GetFlag(FLAGS_receive_window_bytes) >= 0) {
    options.receive_window_bytes = absl::GetFlag(FLAGS_receive_window_bytes);
  }
  if (!absl::GetFlag(FLAGS_retries)) {
    options.service_config_json = R"json({"loadBalancingConfig":[{"round_robin":{}}]})json";
  }
  auto client = sortd::client::SortClient::Connect(absl::GetFlag(FLAGS_target), options);
  if (!client.ok()) {
    std::fprintf(stderr, "connect: %s\n", client.status().ToString().c_str());
    return 1;
  }
  sortd::client::ClientOptions chunked_options = options;
  chunked_options.session_min_bytes = 0;
  auto chunked_client =
      sortd::client::SortClient::Connect(absl::GetFlag(FLAGS_target), chunked_options);

  std::printf(
      "client\tmode\tbytes\tconnections\tbest_s\tmedian_s\tfirst_s\tGB/s(up+down)\tclient_peak_rss_MiB\n");
  // Key width from --key_bits; values stay uint32. Returns the wrong
  // results counted, or -1 when a call failed outright.
  auto run_sizes = [&](auto key_tag) -> int {
    using K = decltype(key_tag);
    int failures = 0;
    for (const size_t n : sizes) {
      std::vector<K> keys(n);
      std::mt19937_64 rng(n);
      for (K& k : keys) k = static_cast<K>(rng());
      std::vector<uint32_t> vals;
      if (values) {
        vals.resize(n);
        std::iota(vals.begin(), vals.end(), 0u);
      }
      const uint64_t key_sum = std::accumulate(keys.begin(), keys.end(), uint64_t{0});
      std::vector<K> out(n);
      std::vector<uint32_t> out_values(values ? n : 0);
      const size_t payload = n * (sizeof(K) + (values ? 4 : 0));
      auto check = [&](const char* what) {
        const bool sorted = std::is_sorted(out.begin(), out.end());
        const bool same = std::accumulate(out.begin(), out.end(), uint64_t{0}) == key_sum;
        bool pairs = true;
        if (values) {
          for (size_t i = 0; i < n && pairs; i += 4099) pairs = out[i] == keys[out_values[i]];
        }
        if (!sorted || !same || !pairs) {
          std::fprintf(stderr, "%s: WRONG RESULT (sorted=%d checksum=%d pairs=%d)\n", what, sorted,
                       same, pairs);
          ++failures;
        }
      };
      for (int c : connection_counts) {
        for (const char* mode : {"sort", "coded", "transfer"}) {
          if (!has_mode(mode)) continue;
          const bool transfer_only = std::string(mode) == "transfer";
          const bool coded = std::string(mode) == "coded";
          Point point;
          for (int r = 0; r < repeat; ++r) {
            sortd::client::SortClient::SessionSort sort;
            sort.key_type = sizeof(K) == 8 ? sortd::v1::ELEMENT_TYPE_UINT64
                                           : sortd::v1::ELEMENT_TYPE_UINT32;
            sort.count = n;
            sort.keys = keys.data();
            sort.keys_out = out.data();
            if (values) {
              sort.value_type = sortd::v1::ELEMENT_TYPE_UINT32;
              sort.values = vals.data();
              sort.values_out = out_values.data();
            }
            sort.transfer_only = transfer_only;
            // Explicit both ways: the client's default asks for coded keys.
            sort.compress_keys = coded;
            sort.connections = c;
            const Clock::time_point t0 = Clock::now();
            absl::StatusOr<sortd::v1::Engine> engine = (*client)->SortInSession(sort);
            const double s = std::chrono::duration<double>(Clock::now() - t0).count();
            if (!engine.ok()) {
              std::fprintf(stderr, "%s %zu keys x%d: %s\n", mode, n, c,
                           engine.status().ToString().c_str());
              return -1;
            }
            if (!transfer_only) check(mode);
            point.seconds.push_back(s);
          }
          if (!point.seconds.empty()) point.Report(mode, payload, c, 2 * payload);
        }
      }
      // auto: SortInto as a user calls it (the client picks one message or a
      // session by size); unary: one message (sessions off).
      for (const char* mode : {"auto", "unary"}) {
        if (!has_mode(mode) || !chunked_client.ok()) continue;
        sortd::client::SortClient& by = std::string(mode) == "auto" ? **client : **chunked_client;
        Point point;
        for (int r = 0; r < repeat; ++r) {
          const Clock::time_point t0 = Clock::now();
          absl::Status status;
          if (values) {
            auto result = by.SortPairs<K, uint32_t>(keys, vals);
            status = result.status();
            if (result.ok()) {
              out = std::move(result->keys);
              out_values = std::move(result->values);
            }
          } else {
            status = by.SortInto<K>(keys, absl::MakeSpan(out)).status();
          }
          const double s = std::chrono::duration<double>(Clock::now() - t0).count();
          if (!status.ok()) {
            std::fprintf(stderr, "%s %zu keys: %s\n", mode, n, status.ToString().c_str());
            ++failures;
            break;
          }
          check(mode);
          point.seconds.push_back(s);
        }
        if (!point.seconds.empty()) point.Report(mode, payload, 0, 2 * payload);
      }
      if (has_mode("chunked") && chunked_client.ok()) {
        Point point;
        for (int r = 0; r < repeat; ++r) {
          const Clock::time_point t0 = Clock::now();
          absl::Status status;
          if (values) {
            auto result = (*chunked_client)->SortPairs<K, uint32_t>(keys, vals);
            status = result.status();
            if (result.ok()) {
              out = std::move(result->keys);
              out_values = std::move(result->values);
            }
          } else {
            auto result = (*chunked_client)->Sort<K>(keys);
            status = result.status();
            if (result.ok()) out = std::move(result->keys);
          }
          const double s = std::chrono::duration<double>(Clock::now() - t0).count();
          if (!status.ok()) {
            std::fprintf(stderr, "chunked %zu keys: %s\n", n, status.ToString().c_str());
            ++failures;
            break;
          }
          check("chunked");
          point.seconds.push_back(s);
        }
        if (!point.seconds.empty()) point.Report("chunked", payload, 1, 2 * payload);
      }
    }
    return failures;
  };
  const int key_bits = absl::GetFlag(FLAGS_key_bits);
  if (key_bits != 32 && key_bits != 64) {
    std::fprintf(stderr, "--key_bits: %d (32 or 64)\n", key_bits);
    return 2;
  }
  const int failures = key_bits == 64 ? run_sizes(uint64_t{}) : run_sizes(uint32_t{});
  if (failures < 0) return 1;
  return failures == 0 ? 0 : 1;
}
