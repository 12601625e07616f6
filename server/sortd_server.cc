// Server assembly and the drain sequence.
#include "server/sortd_server.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <thread>
#include <vector>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/gpu_info.h"
#include "server/grpc/region_service.h"
#include "server/grpc/sort_service.h"
#include "server/runtime/host_resources.h"
#include "sortd_build_info.h"  // generated: SORTD_GIT_COMMIT

namespace sortd {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeCredentials(
    const ServerOptions& options) {
  if (options.tls_cert_file.empty() && options.tls_key_file.empty()) {
    if (!options.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError("tls_client_ca: needs tls_cert and tls_key (TLS)");
    }
    return grpc::InsecureServerCredentials();
  }
  if (options.tls_cert_file.empty() || options.tls_key_file.empty()) {
    return absl::InvalidArgumentError("tls_cert and tls_key must be set together");
  }
  absl::StatusOr<std::string> cert = ReadFile(options.tls_cert_file, "tls_cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadFile(options.tls_key_file, "tls_key");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!options.tls_client_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadFile(options.tls_client_ca_file, "tls_client_ca");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

// GPU engine timings and pool sizes into the Prometheus metrics.
class GpuMetricsObserver final : public GpuEngineObserver {
 public:
  explicit GpuMetricsObserver(ServiceMetrics* metrics) : metrics_(metrics) {}
  void OnGpuSort(int gpu, double h2d_seconds, double kernel_seconds, double d2h_seconds,
                 size_t pool_bytes) override {
    metrics_->RecordTransfer(gpu, /*host_to_device=*/true, h2d_seconds);
    metrics_->RecordKernel(gpu, kernel_seconds);
    metrics_->RecordTransfer(gpu, /*host_to_device=*/false, d2h_seconds);
    metrics_->SetDevicePoolBytes(gpu, static_cast<double>(pool_bytes));
  }
  void OnGpuFallback(int gpu, GpuFallbackReason reason) override {
    metrics_->RecordGpuFallback(gpu, reason);
  }
  void OnGpuRotation(int gpu, bool in_rotation) override {
    metrics_->SetGpuInRotation(gpu, in_rotation);
  }

 private:
  ServiceMetrics* metrics_;
};

// A duration as a gRPC channel argument in milliseconds (INT_MAX = never).
int ChannelArgMillis(absl::Duration d) {
  if (d == absl::InfiniteDuration()) return std::numeric_limits<int>::max();
  return static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(d), 1,
                                              std::numeric_limits<int>::max()));
}

}  // namespace

absl::StatusOr<BatchingMode> ParseBatchingMode(absl::string_view text) {
  if (text == "auto") return BatchingMode::kAuto;
  if (text == "on") return BatchingMode::kOn;
  if (text == "off") return BatchingMode::kOff;
  return absl::InvalidArgumentError(
      absl::StrCat("batching: unknown value \"", text, "\" (expected auto, on or off)"));
}

namespace {

// chmod of the socket sortd just created, by file descriptor: the path is
// opened without following a symlink and must be a socket of this user, so
// that a directory others can write to cannot redirect the chmod.
absl::Status SetSocketMode(const std::string& path, uint32_t mode) {
  const int fd = open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) {
    if (fd >= 0) close(fd);
    return absl::UnavailableError(absl::StrCat("unix_socket: ", path,
                                               " is not a socket of this user after listening"));
  }
  // An O_PATH descriptor takes no fchmod; its /proc link names the inode.
  const std::string by_fd = absl::StrCat("/proc/self/fd/", fd);
  const int changed = chmod(by_fd.c_str(), static_cast<mode_t>(mode));
  const int err = errno;
  close(fd);
  if (changed != 0) {
    return absl::UnavailableError(absl::StrCat("unix_socket: cannot set the mode of ", path, ": ",
                                               std::strerror(err)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SortdServer>> SortdServer::Start(
    const ServerOptions& options) {
  std::unique_ptr<SortdServer> s(new SortdServer());
  s->options_ = options;
  s->StartRuntime();
  if (absl::Status status = s->StartEngine(); !status.ok()) return status;
  if (absl::Status status = s->StartMetricsExposer(); !status.ok()) return status;
  s->StartServiceContext();
  s->StartSessions();
  s->StartRegions();
  if (absl::Status status = s->StartGrpc(); !status.ok()) return status;
  if (options.serving_at_start) s->MarkServing();
  return s;
}

// The CPU work pool, admission control and the idle memory trim.
void SortdServer::StartRuntime() {
  int threads = options_.worker_threads;
  if (threads <= 0) threads = UsableCpus();
  pool_ = std::make_unique<WorkPool>(threads, "sortd-cpu");

  uint64_t max_bytes = options_.max_inflight_bytes;
  if (max_bytes == 0) max_bytes = std::max<uint64_t>(UsableMemoryBytes() / 2, uint64_t{1} << 30);
  admission_ = std::make_unique<AdmissionControl>(max_bytes, options_.max_queued_requests,
                                                  options_.admission_queue);
  if (options_.idle_memory_trim_interval > absl::ZeroDuration()) {
    memory_trimmer_ =
        std::make_unique<MemoryTrimmer>(admission_.get(), options_.idle_memory_trim_interval);
  }
}

// Metrics families, then the dispatcher (CPU and GPU engines) reporting to them, and the request log.
absl::Status SortdServer::StartEngine() {
  registry_ = std::make_shared<prometheus::Registry>();
  MetricsOptions metrics_options;
  metrics_options.version = SORTD_VERSION;
  metrics_options.git_commit = SORTD_GIT_COMMIT;
  metrics_options.cuda_built = CudaBuilt();
  metrics_options.gpu_devices = static_cast<int>(ListGpus().size());
  metrics_options.gpus_expected = options_.expect_gpus;
  metrics_ = std::make_unique<ServiceMetrics>(registry_, metrics_options);
  AdmissionControl* admission = admission_.get();
  metrics_->WatchAdmission([admission] {
    AdmissionGauges gauges{admission->inflight_requests(), admission->inflight_bytes(),
                           admission->max_requests(), admission->max_bytes()};
    const AdmissionControl::QueueState queue = admission->queue_state();
    gauges.waiting_requests = queue.waiting_requests;
    gauges.waiting_bytes = queue.waiting_bytes;
    gauges.waiting_held_bytes = queue.held_bytes;
    gauges.max_waiting_requests = admission->queue_options().max_waiting_requests;
    const auto refusals = admission->refusals();
    for (int i = 0; i < kRefusalReasons; ++i) {
      gauges.refusals.emplace_back(RefusalReasonName(static_cast<RefusalReason>(i)), refusals[i]);
    }
    return gauges;
  });
  gpu_observer_ = std::make_unique<GpuMetricsObserver>(metrics_.get());
  DispatcherOptions dispatcher_options = options_.dispatcher;
  if (dispatcher_options.cpu.max_threads <= 0) dispatcher_options.cpu.max_threads = UsableCpus();
  dispatcher_options.gpu.observer = gpu_observer_.get();
  absl::StatusOr<std::unique_ptr<Dispatcher>> dispatcher = Dispatcher::Create(dispatcher_options);
  if (!dispatcher.ok()) return dispatcher.status();
  dispatcher_ = std::move(*dispatcher);
  request_log_ = std::make_unique<RequestLog>(options_.request_log, &std::cerr);
  return absl::OkStatus();
}

// Prometheus /metrics on --metrics_listen (none when empty).
absl::Status SortdServer::StartMetricsExposer() {
  if (!options_.metrics_listen.empty()) {
    try {
      exposer_ = std::make_unique<prometheus::Exposer>(options_.metrics_listen);
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat(
          "metrics_listen: cannot bind ", options_.metrics_listen, ": ", e.what()));
    }
    exposer_->RegisterCollectable(registry_);
    exposer_->RegisterCollectable(metrics_->inflight_collectable());
    const std::vector<int> ports = exposer_->GetListeningPorts();
    metrics_port_ = ports.empty() ? 0 : ports.front();
  }
  return absl::OkStatus();
}

// What every handler shares: engines, pools, the batcher, limits.
void SortdServer::StartServiceContext() {
  context_ = std::make_unique<ServiceContext>();
  context_->metrics = metrics_.get();
  context_->request_log = request_log_.get();
  context_->dispatcher = dispatcher_.get();
  context_->pool = pool_.get();
  if (dispatcher_->has_gpu()) {
    // Enough threads to keep every slot busy plus as many queued behind it.
    gpu_pool_ = std::make_unique<WorkPool>(
        std::max(2, 2 * dispatcher_->gpu_count() * options_.dispatcher.gpu.slots_per_gpu),
        "sortd-gpu");
    context_->gpu_pool = gpu_pool_.get();
  }
  context_->admission = admission_.get();
  const bool batch = options_.batching_mode == BatchingMode::kOn ||
                     (options_.batching_mode == BatchingMode::kAuto && dispatcher_->BatchesOnGpu());
  if (batch) {
    BatcherOptions batching = options_.batching;
    batching.enabled = true;
    if (options_.batch_hold_while_busy) {
      // A batch holds one GPU stream slot or one CPU pool thread while it
      // sorts; more would only wait there, unable to take later arrivals.
      batching.max_running_gpu_batches =
          dispatcher_->gpu_count() * options_.dispatcher.gpu.slots_per_gpu;
      batching.max_running_cpu_batches = pool_->threads();
    }
    batcher_ = std::make_unique<Batcher>(batching, dispatcher_.get(), pool_.get(),
                                            gpu_pool_.get(), metrics_.get());
    context_->batcher = batcher_.get();
  }
  description_ = dispatcher_->description();
  absl::StrAppend(&description_, "; batching ",
                  batch ? absl::StrCat(dispatcher_->BatchesOnGpu() ? "on gpu_segmented" : "on cpu",
                                       " for requests of <= ", options_.batching.max_request_keys,
                                       " keys, delay <= ",
                                       absl::FormatDuration(options_.batching.max_delay))
                        : std::string("off"));
  context_->limits = options_.limits;
  context_->limits.max_response_bytes = static_cast<uint64_t>(options_.max_message_bytes);
  context_->test_site_hook = options_.test_site_hook;
  context_->inline_max_keys = options_.inline_max_keys;
  context_->cpu_threads = options_.dispatcher.cpu.max_threads > 0
                              ? options_.dispatcher.cpu.max_threads
                              : UsableCpus();
  if (options_.inline_max_keys > 0) {
    absl::StrAppend(&description_, "; CPU-routed requests of <= ", options_.inline_max_keys,
                    " keys sorted inline");
  }
}

// The sort-session store, its buffers from the pinned host pool.
void SortdServer::StartSessions() {
  SessionLimits session_limits = options_.sessions;
  session_limits.max_payload_bytes = options_.limits.max_chunked_bytes;
  // Room for the part's header fields within one message.
  session_limits.max_part_bytes =
      static_cast<uint64_t>(std::max(options_.max_message_bytes - 1024, 1024));
  session_limits.download_part_bytes =
      std::min(session_limits.download_part_bytes, session_limits.max_part_bytes);
  session_limits.allow_transfer_only = options_.enable_diagnostics;
  ServiceContext* context = context_.get();
  host_memory_ = std::make_unique<HostMemoryPool>(
      /*pin=*/dispatcher_->has_gpu(), /*min_pinned_bytes=*/size_t{1} << 20,
      std::min<uint64_t>(options_.pinned_cache_bytes, UsableMemoryBytes() / 8));
  sessions_ = std::make_unique<SessionStore>(
      session_limits, admission_.get(),
      [context](const SortSession& session, const absl::Status& status) {
        RequestRecord record;
        record.method = RpcMethod::kSortSession;
        record.key_type = session.key_type();
        record.seconds = SecondsSince(session.started());
        record.queue_seconds = session.spec().admission_wait_seconds;
        record.bytes_received = session.bytes_received();
        record.bytes_sent = session.bytes_sent();
        if (status.ok()) {
          record.engine = session.engine();
          record.keys_sorted = session.spec().transfer_only ? 0 : session.total_keys();
        }
        context->Report(record, session.spec().request_id, status);
      },
      host_memory_.get());
  context_->sessions = sessions_.get();
  context_->host_memory = host_memory_.get();
  SessionStore* store = sessions_.get();
  metrics_->WatchSessions([store] { return store->open_sessions(); },
                             [store] { return store->expired_total(); },
                             [store] { return store->sorted_arriving_total(); });
}

// The same-host region registry and its service.
void SortdServer::StartRegions() {
  RegionLimits region_limits = options_.regions;
  std::string regions_note;
  if (region_limits.allow_cuda && !dispatcher_->has_gpu()) {
    // Device memory is sorted only by a GPU engine: registering it here
    // would only lead to refused sorts.
    region_limits.allow_cuda = false;
    region_limits.cuda_off_reason =
        "--shared_memory asks for cuda, but no GPU engine runs (device memory is sorted on a GPU "
        "only)";
    regions_note = " (cuda regions off: no GPU engine)";
  }
  region_limits.cuda_devices = dispatcher_->gpu_devices();
  regions_ = std::make_unique<RegionRegistry>(region_limits);
  regions_->SetTestHook(options_.test_site_hook);
  context_->regions = regions_.get();
  region_service_ = std::make_unique<RegionServiceImpl>(context_.get());
  RegionRegistry* regions = regions_.get();
  metrics_->WatchRegions([regions] {
    const RegionCounts c = regions->counts();
    std::vector<RegionGauge> gauges;
    for (int k = 0; k < kRegionKinds; ++k) {
      gauges.push_back({RegionKindName(static_cast<RegionKind>(k)), c.regions[k], c.bytes[k],
                        c.requests[k]});
    }
    return gauges;
  });
  if (options_.regions.allow_system || options_.regions.allow_cuda) {
    absl::StrAppend(&description_, "; shared-memory regions: ",
                    region_limits.allow_system && region_limits.allow_cuda ? "system, cuda"
                    : region_limits.allow_system                          ? "system"
                    : region_limits.allow_cuda                            ? "cuda"
                                                                          : "none",
                    regions_note,
                    region_limits.unix_socket_only ? " for the Unix socket's peers"
                                                   : " for local peers");
  }
}

// The gRPC server: credentials, listeners and channel arguments, services, the drain-counting context allocator.
absl::Status SortdServer::StartGrpc() {
  service_ = std::make_unique<SortServiceImpl>(context_.get());
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds = MakeCredentials(options_);
  if (!creds.ok()) return creds.status();

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.listen_address, *creds, &port_);
  // gRPC binds with SO_REUSEPORT by default, so a second sortd given the
  // same address would start and share the port (and its traffic) with the
  // first; refusing to start is what an operator expects.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
  builder.SetMaxSendMessageSize(options_.max_message_bytes);
  if (options_.receive_window_bytes > 0) {
    builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, options_.receive_window_bytes);
  }
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                             ChannelArgMillis(options_.max_connection_age));
  for (const auto& [name, value] : options_.grpc_channel_args) {
    builder.AddChannelArgument(name, value);
  }
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                             ChannelArgMillis(options_.max_connection_age_grace));
  if (!options_.unix_socket.empty()) {
    // Plaintext: who may connect is decided by the socket file's
    // permissions (set below), not by TLS.
    builder.AddListeningPort("unix:" + options_.unix_socket, grpc::InsecureServerCredentials());
  }
  calls_in_flight_ = std::make_unique<CallsInFlight>();
  builder.SetContextAllocator(std::make_unique<DrainCountingContextAllocator>(
      calls_in_flight_.get(), &context_->draining));
  builder.RegisterService(service_.get());
  builder.RegisterService(region_service_.get());
  if (options_.enable_diagnostics) {
    diagnostics_ = std::make_unique<DiagnosticsServiceImpl>(&context_->draining);
    builder.RegisterService(diagnostics_.get());
  }
  // The Unix socket is created owner-only (umask), then opened up to
  // --unix_socket_mode below: never briefly wider than asked for.
  const mode_t umask_before = options_.unix_socket.empty() ? 0 : umask(0177);
  server_ = builder.BuildAndStart();
  if (!options_.unix_socket.empty()) umask(umask_before);
  if (server_ == nullptr && !options_.unix_socket.empty()) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve on ", options_.listen_address, " and unix:", options_.unix_socket,
        " (an address in use or not local, or a socket path that cannot be created?)"));
  }
  if (server_ == nullptr || port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("listen: cannot serve on ", options_.listen_address,
                     options_.tls_cert_file.empty()
                         ? " (address in use or not local?)"
                         : " (address in use or not local, or tls_key is not the key of "
                           "tls_cert?)"));
  }
  if (!options_.unix_socket.empty()) {
    absl::Status mode = SetSocketMode(options_.unix_socket, options_.unix_socket_mode);
    if (!mode.ok()) return mode;
  }
  return absl::OkStatus();
}

void SortdServer::MarkServing() {
  if (server_ == nullptr || context_->draining.load()) return;
  server_->GetHealthCheckService()->SetServingStatus(true);
  server_->GetHealthCheckService()->SetServingStatus("sortd.v1.SortService", true);
}

const std::string& SortdServer::engine_description() const {
  return description_;
}

void SortdServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  // A Start() that failed part-way leaves a server without a listener.
  if (context_ == nullptr || server_ == nullptr) return;
  context_->draining.store(true);
  server_->GetHealthCheckService()->SetServingStatus(false);
  if (options_.drain_delay > absl::ZeroDuration()) absl::SleepFor(options_.drain_delay);
  const absl::Time deadline = absl::Now() + options_.drain_timeout;
  // gRPC's Shutdown sends GOAWAY, and from then on closes each connection
  // as soon as its last call has ended, while that call's client may still
  // be reading the end of the response (CallsInFlight says what is lost
  // then). So the connections stay open, refusing new work, until the calls
  // that were in flight have ended and drain_linger has passed.
  calls_in_flight_->WaitQuiet(options_.drain_timeout, options_.drain_linger);
  // Waits for in-flight RPCs (their work is on the pool and finishes them);
  // past the deadline, remaining RPCs are cancelled.
  server_->Shutdown(absl::ToChronoTime(std::max(deadline, absl::Now())));
}

void SortdServer::Wait() {
  if (server_ != nullptr) server_->Wait();
}

SortdServer::~SortdServer() {
  Shutdown();
  Wait();
  if (batcher_ != nullptr) {
    // Every RPC has finished, so every batch has: what batching cost per
    // request, for the operator (and scripts/gpu-host/thread_cpu.sh).
    const Batcher::Stats st = batcher_->stats();
    if (st.requests > 0) {
      std::cerr << absl::StrFormat(
          "sortd: batcher: %u batches, %u requests (%.1f per batch); CPU per request: "
          "%.2f us in the engine, %.2f us completing\n",
          st.batches, st.requests, static_cast<double>(st.requests) / st.batches,
          st.engine_cpu_seconds * 1e6 / st.requests, st.completion_cpu_seconds * 1e6 / st.requests);
    }
  }
  batcher_.reset();   // launches what is queued; its batches run on the pools
  gpu_pool_.reset();  // runs any job still queued, then joins
  pool_.reset();
  server_.reset();
  exposer_.reset();
}

}  // namespace sortd
