// sortctl: command-line client for sortd.
//   sortctl sort   --in=FILE --out=FILE [--type=T] [--format=auto] [--order=asc|desc] [--indices_out=FILE]
//   sortctl health [--service=NAME]
//   sortctl bench  --concurrency=8 --type=uint32 --keys=1024 --duration=10s [--method=sort|pairs|stream]
//   sortctl gen    --type=T --count=N --out=FILE [--format=auto] [--seed=S]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "client/sortctl/array_file.h"
#include "client/sortctl/load_generator.h"
#include "client/sortd_client.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051",
          "sortd address: host:port or any gRPC target, e.g. dns:///host:50051 or "
          "ipv4:127.0.0.1:5001,127.0.0.1:5002; calls are spread round-robin over every "
          "address it resolves to");
ABSL_FLAG(std::string, in, "", "sort: input file");
ABSL_FLAG(std::string, out, "", "sort/gen: output file");
ABSL_FLAG(std::string, indices_out, "",
          "sort: also write the permutation (uint64) here; topk: the kept keys' positions");
ABSL_FLAG(std::string, type, "", "element type: uint32 int32 float32 uint64 int64 float64 bytes");
ABSL_FLAG(std::string, format, "auto", "file format: auto bin text npy");
ABSL_FLAG(std::string, out_format, "", "output format (default: same as input)");
ABSL_FLAG(std::string, order, "asc", "asc or desc");
ABSL_FLAG(bool, shm, false,
          "sort: move the array through a shared-memory region instead of the wire (sortd on "
          "this host with --shared_memory=system; numeric types)");
ABSL_FLAG(std::string, service, "", "health: service name (empty = whole server)");
ABSL_FLAG(int, max_message_bytes, 64 << 20, "largest message; bigger arrays use SortChunked");
ABSL_FLAG(absl::Duration, timeout, absl::InfiniteDuration(), "per-call deadline");
ABSL_FLAG(bool, retry_busy, true,
          "retry calls the server refused as busy (RESOURCE_EXHAUSTED with a retry hint) after "
          "the hinted delay, within --timeout; false: report them at once");
ABSL_FLAG(std::string, tls_root_certs, "", "PEM root certificates; enables TLS");
ABSL_FLAG(std::string, tls_client_cert, "",
          "PEM certificate chain of this client (mutual TLS, with --tls_client_key)");
ABSL_FLAG(std::string, tls_client_key, "", "PEM private key of this client (mutual TLS)");
ABSL_FLAG(bool, with_echo, false,
          "bench: first run the same load against DiagnosticsService echo (sortd --diagnostics), "
          "then compare");
ABSL_FLAG(std::string, method, "sort", "bench: sort, pairs, stream, echo or echo_stream (echo needs sortd --diagnostics)");
ABSL_FLAG(int, concurrency, 8, "bench: concurrent workers (each with its own connection per address)");
ABSL_FLAG(int, stream_window, 16, "bench: outstanding requests per stream");
ABSL_FLAG(uint64_t, keys, 1024, "bench: keys per request");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10), "bench: how long to run");
ABSL_FLAG(std::vector<std::string>, columns, {},
          "table: the table's column files (comma-separated; .npy, or --type for bin/text), "
          "named by their file names without extension");
ABSL_FLAG(std::vector<std::string>, by, {}, "table: the key columns, most significant first");
ABSL_FLAG(std::vector<std::string>, orders, {},
          "table: asc or desc, one for every key or one per key (default asc)");
ABSL_FLAG(std::vector<std::string>, nulls, {},
          "table: last or first (NaT in datetime columns), one or one per key (default last)");
ABSL_FLAG(uint64_t, k, 0, "topk: how many keys to keep (of the array, or of every row)");
ABSL_FLAG(uint64_t, row_length, 0,
          "topk: the input is rows of this many keys (row-major): keep k of every row");
ABSL_FLAG(uint64_t, count, 0, "gen: number of elements");
ABSL_FLAG(uint64_t, seed, 1, "gen: random seed");

namespace sortd::sortctl {
namespace {

int Fail(const absl::Status& status) {
  std::cerr << "sortctl: " << status << "\n";
  return 1;
}

// A progress bar on stderr for transfers that take over a second, when
// stderr is a terminal: phase, MiB done of total, MB/s since the phase began.
class ProgressBar {
 public:
  void operator()(const client::TransferProgress& p) {
    using Clock = std::chrono::steady_clock;
    std::lock_guard<std::mutex> lock(mu_);
    const Clock::time_point now = Clock::now();
    if (p.phase != phase_ || !started_) {
      if (shown_) std::cerr << "\n";
      phase_ = p.phase;
      phase_start_ = now;
      started_ = true;
      shown_ = false;
      if (!first_) first_ = now;
    }
    if (now - *first_ < std::chrono::seconds(1) || now - last_draw_ < std::chrono::milliseconds(100)) {
      if (!(shown_ && p.bytes_done == p.bytes_total)) return;
    }
    last_draw_ = now;
    const double seconds = std::chrono::duration<double>(now - phase_start_).count();
    const char* name = p.phase == client::TransferProgress::Phase::kUpload   ? "upload"
                       : p.phase == client::TransferProgress::Phase::kSort ? "sort"
                                                                           : "download";
    if (p.phase == client::TransferProgress::Phase::kSort) {
      std::cerr << absl::StrFormat("\r%-8s %s", name, p.bytes_done == 1 ? "done" : "...");
    } else {
      std::cerr << absl::StrFormat("\r%-8s %8.1f / %.1f MiB  %7.1f MB/s", name,
                                   p.bytes_done / 1048576.0, p.bytes_total / 1048576.0,
                                   seconds > 0 ? p.bytes_done / seconds / 1e6 : 0.0);
    }
    shown_ = true;
    if (p.phase == client::TransferProgress::Phase::kDownload && p.bytes_done == p.bytes_total) {
      std::cerr << "\n";  // the last phase is complete: end the line
      shown_ = false;
    }
  }
  ~ProgressBar() {
    if (shown_) std::cerr << "\n";
  }

 private:
  std::mutex mu_;
  client::TransferProgress::Phase phase_ = client::TransferProgress::Phase::kUpload;
  bool started_ = false;
  bool shown_ = false;
  std::optional<std::chrono::steady_clock::time_point> first_;
  std::chrono::steady_clock::time_point phase_start_, last_draw_;
};

absl::StatusOr<std::unique_ptr<client::SortClient>> MakeClient(ProgressBar* progress = nullptr) {
  client::ClientOptions options;
  if (progress != nullptr && isatty(STDERR_FILENO)) {
    options.progress = [progress](const client::TransferProgress& p) { (*progress)(p); };
  }
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.timeout = absl::GetFlag(FLAGS_timeout);
  options.retry_busy = absl::GetFlag(FLAGS_retry_busy);
  options.tls_root_certs_file = absl::GetFlag(FLAGS_tls_root_certs);
  options.tls_client_cert_file = absl::GetFlag(FLAGS_tls_client_cert);
  options.tls_client_key_file = absl::GetFlag(FLAGS_tls_client_key);
  return client::SortClient::Connect(absl::GetFlag(FLAGS_target), options);
}

template <typename T>
absl::Status SortTyped(client::SortClient& c, HostArray& array, v1::SortOrder order,
                       bool want_indices, std::vector<uint64_t>* indices) {
  v1::Engine engine = v1::ENGINE_UNSPECIFIED;
  size_t count = 0;
  if constexpr (std::is_same_v<T, std::string>) {
    auto result = c.Sort<T>(array.strings, order, want_indices);
    if (!result.ok()) return result.status();
    array.strings = std::move(result->keys);
    *indices = std::move(result->indices);
    engine = result->engine;
    count = array.strings.size();
  } else {
    // In place over the file's bytes: no typed copy, no result vector (a
    // large array goes up from and comes back into this one buffer).
    count = array.raw.size() / sizeof(T);
    auto* keys = reinterpret_cast<T*>(array.raw.data());
    if (want_indices) indices->resize(count);
    auto sorted = c.SortInto<T>(absl::MakeConstSpan(keys, count), absl::MakeSpan(keys, count),
                                order, absl::MakeSpan(*indices));
    if (!sorted.ok()) return sorted.status();
    engine = *sorted;
  }
  std::cerr << "sorted " << count << " keys on " << v1::Engine_Name(engine) << "\n";
  return absl::OkStatus();
}

v1::ElementType ElementTypeFromName(const std::string& type) {
  if (type == "uint32") return v1::ELEMENT_TYPE_UINT32;
  if (type == "int32") return v1::ELEMENT_TYPE_INT32;
  if (type == "float32") return v1::ELEMENT_TYPE_FLOAT32;
  if (type == "uint64") return v1::ELEMENT_TYPE_UINT64;
  if (type == "int64") return v1::ELEMENT_TYPE_INT64;
  if (type == "float64") return v1::ELEMENT_TYPE_FLOAT64;
  return v1::ELEMENT_TYPE_UNSPECIFIED;
}

// sort --shm: the array goes into a fresh shared-memory region (keys, then
// room for the permutation), the server sorts it there, and it comes back
// out; only the reference crosses the socket.
absl::Status SortThroughRegion(client::SortClient& client, HostArray& array, v1::SortOrder order,
                               bool want_indices, std::vector<uint64_t>* indices) {
  const int width = TypeWidth(array.type);
  if (width == 0) return absl::InvalidArgumentError("shm: numeric types only");
  const size_t n = array.raw.size() / width;
  const size_t keys_bytes = (array.raw.size() + 7) / 8 * 8;
  const size_t bytes = std::max<size_t>(keys_bytes + (want_indices ? n * 8 : 0), 8);
  absl::StatusOr<std::unique_ptr<client::SharedRegion>> region =
      client::SharedRegion::Create(client, absl::StrCat("sortctl-", getpid()), bytes);
  if (!region.ok()) return region.status();
  if (!array.raw.empty()) std::memcpy((*region)->data(), array.raw.data(), array.raw.size());
  client::RegionSort sort;
  sort.keys = {(*region)->name(), 0, n, ElementTypeFromName(array.type)};
  sort.order = order;
  if (want_indices) {
    sort.return_indices = true;
    sort.indices_out = client::RegionRef{(*region)->name(), keys_bytes, n, v1::ELEMENT_TYPE_UINT64};
  }
  absl::StatusOr<v1::Engine> engine = client.SortRegion(sort);
  if (!engine.ok()) return engine.status();
  if (!array.raw.empty()) std::memcpy(array.raw.data(), (*region)->data(), array.raw.size());
  if (want_indices) {
    const auto* at = reinterpret_cast<const uint64_t*>((*region)->data() + keys_bytes);
    indices->assign(at, at + n);
  }
  return absl::OkStatus();
}

// What sort and topk share: the --in array, where the answer goes (--out
// in --out_format, the positions to --indices_out) and --order.
struct ArrayJob {
  HostArray array;
  std::string out;
  FileFormat out_format = FileFormat::kNpy;
  v1::SortOrder order = v1::SORT_ORDER_ASCENDING;
  bool want_indices = false;
};

absl::StatusOr<ArrayJob> ReadArrayJob(absl::string_view command) {
  ArrayJob job;
  const std::string in = absl::GetFlag(FLAGS_in);
  job.out = absl::GetFlag(FLAGS_out);
  if (in.empty() || job.out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(command, ": --in and --out are required"));
  }
  auto in_format = ParseFormat(absl::GetFlag(FLAGS_format), in);
  if (!in_format.ok()) return in_format.status();
  const std::string out_format_name = absl::GetFlag(FLAGS_out_format);
  auto out_format = out_format_name.empty() ? in_format : ParseFormat(out_format_name, job.out);
  if (!out_format.ok()) return out_format.status();
  job.out_format = *out_format;
  const std::string order_name = absl::GetFlag(FLAGS_order);
  if (order_name != "asc" && order_name != "desc") {
    return absl::InvalidArgumentError("order: expected asc or desc");
  }
  job.order = order_name == "desc" ? v1::SORT_ORDER_DESCENDING : v1::SORT_ORDER_ASCENDING;
  auto array = ReadArray(in, *in_format, absl::GetFlag(FLAGS_type));
  if (!array.ok()) return array.status();
  job.array = *std::move(array);
  job.want_indices = !absl::GetFlag(FLAGS_indices_out).empty();
  return job;
}

absl::Status WriteArrayJob(const ArrayJob& job, const std::vector<uint64_t>& indices) {
  absl::Status status = WriteArray(job.out, job.out_format, job.array);
  if (!status.ok() || !job.want_indices) return status;
  const std::string path = absl::GetFlag(FLAGS_indices_out);
  HostArray idx{"uint64", {}, {}};
  idx.raw.resize(indices.size() * 8);
  if (!indices.empty()) std::memcpy(idx.raw.data(), indices.data(), idx.raw.size());
  auto idx_format = ParseFormat("auto", path);
  if (!idx_format.ok()) return idx_format.status();
  return WriteArray(path, *idx_format, idx);
}

// fn(T{}) for the C++ type of an array type name (std::string: bytes).
template <typename Fn>
absl::Status VisitArrayType(const std::string& t, Fn fn) {
  if (t == "uint32") return fn(uint32_t{});
  if (t == "int32") return fn(int32_t{});
  if (t == "float32") return fn(float{});
  if (t == "uint64") return fn(uint64_t{});
  if (t == "int64") return fn(int64_t{});
  if (t == "float64") return fn(double{});
  return fn(std::string{});
}

int RunSort() {
  absl::StatusOr<ArrayJob> job = ReadArrayJob("sort");
  if (!job.ok()) return Fail(job.status());
  ProgressBar progress;
  auto c = MakeClient(&progress);
  if (!c.ok()) return Fail(c.status());
  std::vector<uint64_t> indices;
  absl::Status status =
      absl::GetFlag(FLAGS_shm)
          ? SortThroughRegion(**c, job->array, job->order, job->want_indices, &indices)
          : VisitArrayType(job->array.type, [&](auto t) {
              return SortTyped<decltype(t)>(**c, job->array, job->order, job->want_indices,
                                            &indices);
            });
  if (status.ok()) status = WriteArrayJob(*job, indices);
  return status.ok() ? 0 : Fail(status);
}

template <typename T>
absl::Status TopKTyped(client::SortClient& c, HostArray& array, uint64_t k, v1::SortOrder order,
                       bool want_indices, const client::TopKSegments& segments,
                       std::vector<uint64_t>* indices) {
  absl::StatusOr<client::TopKResult<T>> result;
  if constexpr (std::is_same_v<T, std::string>) {
    result = c.TopK<T>(array.strings, k, order, want_indices, segments);
    if (!result.ok()) return result.status();
    array.strings = std::move(result->keys);
  } else {
    const size_t count = array.raw.size() / sizeof(T);
    result = c.TopK<T>(absl::MakeConstSpan(reinterpret_cast<const T*>(array.raw.data()), count),
                       k, order, want_indices, segments);
    if (!result.ok()) return result.status();
    array.raw.resize(result->keys.size() * sizeof(T));
    if (!result->keys.empty()) std::memcpy(array.raw.data(), result->keys.data(), array.raw.size());
  }
  *indices = std::move(result->indices);
  std::cerr << "kept " << array.size() << " keys on " << v1::Engine_Name(result->engine) << "\n";
  return absl::OkStatus();
}

// sortctl topk: the first k keys of the file's array (or of every row) in
// --order (asc: the smallest; desc: the largest), written sorted.
int RunTopK() {
  const uint64_t k = absl::GetFlag(FLAGS_k);
  if (k == 0) return Fail(absl::InvalidArgumentError("topk: --k must be at least 1"));
  absl::StatusOr<ArrayJob> job = ReadArrayJob("topk");
  if (!job.ok()) return Fail(job.status());
  auto c = MakeClient();
  if (!c.ok()) return Fail(c.status());
  client::TopKSegments segments;
  segments.row_length = absl::GetFlag(FLAGS_row_length);
  std::vector<uint64_t> indices;
  absl::Status status = VisitArrayType(job->array.type, [&](auto t) {
    return TopKTyped<decltype(t)>(**c, job->array, k, job->order, job->want_indices, segments,
                                  &indices);
  });
  if (status.ok()) status = WriteArrayJob(*job, indices);
  return status.ok() ? 0 : Fail(status);
}

int RunHealth() {
  auto c = MakeClient();
  if (!c.ok()) return Fail(c.status());
  auto status = (*c)->Health(absl::GetFlag(FLAGS_service));
  if (!status.ok()) return Fail(status.status());
  std::cout << *status << "\n";
  return *status == "SERVING" ? 0 : 3;
}

int RunBench() {
  LoadOptions options;
  options.target = absl::GetFlag(FLAGS_target);
  options.method = absl::GetFlag(FLAGS_method);
  options.type = absl::GetFlag(FLAGS_type).empty() ? "uint32" : absl::GetFlag(FLAGS_type);
  options.keys_per_request = absl::GetFlag(FLAGS_keys);
  options.concurrency = absl::GetFlag(FLAGS_concurrency);
  options.stream_window = absl::GetFlag(FLAGS_stream_window);
  options.duration = absl::GetFlag(FLAGS_duration);
  options.descending = absl::GetFlag(FLAGS_order) == "desc";
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  std::optional<LoadReport> echo;
  if (absl::GetFlag(FLAGS_with_echo)) {
    if (options.method != "sort" && options.method != "stream") {
      return Fail(absl::InvalidArgumentError("with_echo: needs --method=sort or stream"));
    }
    LoadOptions echo_options = options;
    echo_options.method = options.method == "sort" ? "echo" : "echo_stream";
    auto echo_report = RunLoad(echo_options);
    if (!echo_report.ok()) return Fail(echo_report.status());
    std::cout << FormatReport(echo_options, *echo_report);
    if (echo_report->ok == 0) {
      return Fail(absl::FailedPreconditionError(
          "with_echo: no echo succeeded (is sortd running with --diagnostics?)"));
    }
    echo = std::move(*echo_report);
  }
  auto report = RunLoad(options);
  if (!report.ok()) return Fail(report.status());
  std::cout << FormatReport(options, *report);
  if (echo) std::cout << FormatComparison(*echo, *report);
  return report->ok > 0 ? 0 : 1;
}

// The column's array as a TypedArray (the file's element type).
void SetTypedArray(const HostArray& array, v1::TypedArray* out) {
  const std::string& t = array.type;
  auto add = [&](auto* field, auto tag) {
    using T = decltype(tag);
    const size_t n = array.raw.size() / sizeof(T);
    field->Resize(static_cast<int>(n), T{});
    if (n > 0) std::memcpy(field->mutable_data(), array.raw.data(), n * sizeof(T));
  };
  if (t == "uint32") add(out->mutable_uint32()->mutable_values(), uint32_t{});
  else if (t == "int32") add(out->mutable_int32()->mutable_values(), int32_t{});
  else if (t == "float32") add(out->mutable_float32()->mutable_values(), float{});
  else if (t == "uint64") add(out->mutable_uint64()->mutable_values(), uint64_t{});
  else if (t == "int64") add(out->mutable_int64()->mutable_values(), int64_t{});
  else if (t == "float64") add(out->mutable_float64()->mutable_values(), double{});
  else for (const std::string& s : array.strings) out->mutable_bytes()->add_values(s);
}

// One value for every key, or one per key: `values` as given, or `fallback`.
absl::StatusOr<std::vector<std::string>> PerKey(const std::vector<std::string>& values,
                                                size_t keys, const char* flag,
                                                const std::string& fallback) {
  if (values.empty()) return std::vector<std::string>(keys, fallback);
  if (values.size() == 1) return std::vector<std::string>(keys, values[0]);
  if (values.size() != keys) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": ", values.size(), " values for ", keys, " keys"));
  }
  return values;
}

// sortctl table: SortTable over column files; writes the permutation
// (uint64) to --out.
int RunTable() {
  const std::vector<std::string> files = absl::GetFlag(FLAGS_columns);
  const std::vector<std::string> by = absl::GetFlag(FLAGS_by);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (files.empty() || by.empty() || out.empty()) {
    return Fail(absl::InvalidArgumentError("table: --columns, --by and --out are required"));
  }
  auto orders = PerKey(absl::GetFlag(FLAGS_orders), by.size(), "orders", "asc");
  if (!orders.ok()) return Fail(orders.status());
  auto nulls = PerKey(absl::GetFlag(FLAGS_nulls), by.size(), "nulls", "last");
  if (!nulls.ok()) return Fail(nulls.status());
  v1::SortTableRequest request;
  std::vector<std::string> names;
  for (const std::string& file : files) {
    auto format = ParseFormat(absl::GetFlag(FLAGS_format), file);
    if (!format.ok()) return Fail(format.status());
    auto array = ReadArray(file, *format, absl::GetFlag(FLAGS_type));
    if (!array.ok()) return Fail(array.status());
    std::string name = file.substr(file.find_last_of('/') + 1);
    name = name.substr(0, name.find('.'));
    names.push_back(name);
    v1::TableColumn* column = request.add_columns();
    column->set_name(name);
    SetTypedArray(*array, column->mutable_values());
  }
  for (size_t k = 0; k < by.size(); ++k) {
    auto it = std::find(names.begin(), names.end(), by[k]);
    if (it == names.end()) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--by: no column \"", by[k], "\" in --columns")));
    }
    if ((*orders)[k] != "asc" && (*orders)[k] != "desc") {
      return Fail(absl::InvalidArgumentError("--orders: expected asc or desc"));
    }
    if ((*nulls)[k] != "last" && (*nulls)[k] != "first") {
      return Fail(absl::InvalidArgumentError("--nulls: expected last or first"));
    }
    v1::SortKey* key = request.add_by();
    key->set_column(static_cast<uint32_t>(it - names.begin()));
    key->set_order((*orders)[k] == "desc" ? v1::SORT_ORDER_DESCENDING : v1::SORT_ORDER_ASCENDING);
    key->set_nulls((*nulls)[k] == "first" ? v1::NULL_PLACEMENT_FIRST : v1::NULL_PLACEMENT_LAST);
  }
  auto c = MakeClient();
  if (!c.ok()) return Fail(c.status());
  absl::StatusOr<v1::SortTableResponse> response = (*c)->SortTable(request);
  if (!response.ok()) return Fail(response.status());
  HostArray perm{"uint64", {}, {}};
  perm.raw.resize(static_cast<size_t>(response->indices_size()) * 8);
  if (!perm.raw.empty()) std::memcpy(perm.raw.data(), response->indices().data(), perm.raw.size());
  auto out_format = ParseFormat(absl::GetFlag(FLAGS_out_format).empty() ? "auto" : absl::GetFlag(FLAGS_out_format), out);
  if (!out_format.ok()) return Fail(out_format.status());
  absl::Status status = WriteArray(out, *out_format, perm);
  if (!status.ok()) return Fail(status);
  std::cerr << "sorted " << response->indices_size() << " rows by " << by.size() << " keys on "
            << v1::Engine_Name(response->engine()) << "\n";
  return 0;
}

int RunGen() {
  const std::string type = absl::GetFlag(FLAGS_type);
  const std::string out = absl::GetFlag(FLAGS_out);
  const int width = TypeWidth(type);
  if (width <= 0 || out.empty()) {
    return Fail(absl::InvalidArgumentError("gen: --out and a numeric --type are required"));
  }
  auto format = ParseFormat(absl::GetFlag(FLAGS_format), out);
  if (!format.ok()) return Fail(format.status());
  HostArray array{type, {}, {}};
  const uint64_t n = absl::GetFlag(FLAGS_count);
  array.raw.resize(n * width);
  std::mt19937_64 rng(absl::GetFlag(FLAGS_seed));
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t bits = rng();
    if (type == "float32") {
      float f = static_cast<float>(static_cast<int64_t>(bits)) * 1e-12f;
      std::memcpy(array.raw.data() + i * 4, &f, 4);
    } else if (type == "float64") {
      double d = static_cast<double>(static_cast<int64_t>(bits)) * 1e-12;
      std::memcpy(array.raw.data() + i * 8, &d, 8);
    } else {
      std::memcpy(array.raw.data() + i * width, &bits, width);
    }
  }
  absl::Status status = WriteArray(out, *format, array);
  return status.ok() ? 0 : Fail(status);
}

}  // namespace
}  // namespace sortd::sortctl

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "sortctl <sort|table|topk|health|bench|gen> [flags]: command-line client for sortd");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 2) {
    std::cerr << "usage: sortctl <sort|table|topk|health|bench|gen> [flags]  (--help for flags)\n";
    return 2;
  }
  const std::string command = args[1];
  if (command == "sort") return sortd::sortctl::RunSort();
  if (command == "table") return sortd::sortctl::RunTable();
  if (command == "topk") return sortd::sortctl::RunTopK();
  if (command == "health") return sortd::sortctl::RunHealth();
  if (command == "bench") return sortd::sortctl::RunBench();
  if (command == "gen") return sortd::sortctl::RunGen();
  std::cerr << "sortctl: unknown command \"" << command << "\"\n";
  return 2;
}
