// The sortd server: builds the gRPC server with SortService, health and
// reflection, owns the engines and worker pool, and drains on shutdown.
#ifndef SORTD_SERVER_SORTD_SERVER_H_
#define SORTD_SERVER_SORTD_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/server.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/dispatcher.h"
#include "server/grpc/diagnostics_service.h"
#include "server/grpc/service_context.h"
#include "server/regions/regions.h"
#include "server/runtime/admission.h"
#include "server/runtime/batcher.h"
#include "server/runtime/calls_in_flight.h"
#include "server/runtime/memory_trimmer.h"
#include "server/sessions/session_store.h"

namespace sortd {

class SortServiceImpl;
class RegionServiceImpl;

// --batching: on (the default) batches small numeric requests on the GPU's
// segmented kernel, or on the CPU engine where no GPU serves; auto batches
// only when batches run on a GPU; off never batches (docs/benchmarks.md has
// the measurements behind the default).
enum class BatchingMode { kAuto, kOn, kOff };
absl::StatusOr<BatchingMode> ParseBatchingMode(absl::string_view text);

struct ServerOptions {
  // host:port to listen on; port 0 picks a free port (see port()).
  std::string listen_address = "0.0.0.0:50051";
  // Largest message received or sent; larger requests get RESOURCE_EXHAUSTED.
  int max_message_bytes = 64 << 20;
  // HTTP/2 receive window per stream, with gRPC's bandwidth (BDP) probe
  // off: bounds what a connection can have in flight to the server. 0:
  // gRPC's own window, which the probe grows on fast connections; received
  // bytes then wait in the server's memory (on an H100 host, 8 warm
  // connections: peak RSS 1397 MiB around a 1 GiB sort against 1230 MiB
  // with 8 MiB windows, at the same sort time; docs/benchmarks.md).
  int receive_window_bytes = 8 << 20;
  // Extra integer channel arguments (--grpc_channel_args), applied last.
  std::vector<std::pair<std::string, int>> grpc_channel_args;
  // Engine choice and CPU engine tuning.
  DispatcherOptions dispatcher;
  // Worker threads running sorts; 0 means one per core.
  int worker_threads = 0;
  // Payload bytes admitted at once (requests plus responses); 0 means half
  // of physical memory.
  uint64_t max_inflight_bytes = 0;
  // Requests admitted at once (running, or holding a response being
  // written); more wait in the admission queue.
  uint64_t max_queued_requests = 4096;
  // The admission queue: where requests that fit the limits but not the
  // moment wait their turn (docs/operations.md, "Admission").
  AdmissionQueueOptions admission_queue;
  // Per-RPC limits (SortStream flow control, SortChunked sizes).
  ServiceLimits limits;
  // PEM files; both set enables TLS, neither means plaintext.
  std::string tls_cert_file;
  std::string tls_key_file;
  // PEM CA certificates: when set (with TLS), every client must present a
  // certificate signed by one of them (mutual TLS).
  std::string tls_client_ca_file;
  // After health goes NOT_SERVING, how long new work is refused with
  // UNAVAILABLE before the drain waits for in-flight RPCs (lets load
  // balancers notice).
  absl::Duration drain_delay = absl::ZeroDuration();
  // host:port for the Prometheus /metrics endpoint; empty disables it.
  std::string metrics_listen = "0.0.0.0:9464";
  // GPUs this server should have; exported for the "GPU missing" alert.
  int expect_gpus = 0;
  // Request log: slow threshold and rate limit.
  RequestLogOptions request_log;
  // Connections older than this get a GOAWAY so that clients reconnect and
  // re-resolve (a client-side round-robin spreads over replicas added
  // since); infinite (the default) keeps connections for good.
  absl::Duration max_connection_age = absl::InfiniteDuration();
  // After that GOAWAY, how long RPCs already on the connection may still run
  // before it is closed; infinite waits for them however long they take.
  absl::Duration max_connection_age_grace = absl::InfiniteDuration();
  // How long Shutdown() waits for in-flight RPCs before cancelling them.
  absl::Duration drain_timeout = absl::Seconds(30);
  // After the last RPC in flight at the drain has ended, how long the
  // connections stay open before GOAWAY closes them: time for its client to
  // read the end of the response (CallsInFlight says why). 0 here, so that
  // in-process tests stop at once; the sortd binary's --drain_linger is 1 s.
  absl::Duration drain_linger = absl::ZeroDuration();
  // Serve sortd.v1.DiagnosticsService (Echo, EchoStream) for benchmarks.
  bool enable_diagnostics = false;
  BatchingMode batching_mode = BatchingMode::kOn;
  BatcherOptions batching;  // `enabled` is decided from batching_mode
  // Due batches wait in their queue (still growing) while every GPU slot
  // or CPU pool thread already runs one (BatcherOptions::max_running_*).
  bool batch_hold_while_busy = true;
  // Requests of at most this many numeric keys that stay on the CPU are
  // sorted on the receiving gRPC thread (ServiceContext::inline_max_keys).
  // 0 here, so in-process tests exercise the batcher with small arrays;
  // the sortd binary's --inline_max_keys sets the measured default.
  size_t inline_max_keys = 0;
  // When idle (nothing admitted) after serving, freed heap memory is given
  // back to the OS this often; zero disables (server/runtime/memory_trimmer.h).
  absl::Duration idle_memory_trim_interval = absl::Seconds(1);
  // Sort sessions (idle timeout, how many at once); the payload limit is
  // limits.max_chunked_bytes, the part size follows max_message_bytes.
  SessionLimits sessions;
  // Where a GPU serves, session buffers are pinned host memory (DMA without
  // staging copies); this much of it is kept for reuse after sessions end.
  // Resolved to at most an eighth of usable memory.
  uint64_t pinned_cache_bytes = uint64_t{8} << 30;
  // Whether health reports SERVING as soon as Start returns; false leaves
  // it NOT_SERVING until MarkServing() (sortd's main: once its port files
  // are written, so that nobody sees a server that is about to exit).
  bool serving_at_start = true;
  // Tests only: ServiceContext::test_site_hook.
  std::function<bool(absl::string_view site)> test_site_hook;
  // Same-host regions (RegionService; --shared_memory, --max_shm_regions,
  // --max_shm_bytes): all kinds off by default.
  RegionLimits regions;
  // A Unix domain socket to listen on as well (plaintext: its file
  // permissions decide who may connect); empty: none.
  std::string unix_socket;
  // Permission bits set on the socket file once it exists.
  uint32_t unix_socket_mode = 0660;
};

class SortdServer {
 public:
  static absl::StatusOr<std::unique_ptr<SortdServer>> Start(
      const ServerOptions& options);
  ~SortdServer();

  // The port actually bound (useful with port 0).
  int port() const { return port_; }
  // The bound metrics port (0 when metrics are disabled).
  int metrics_port() const { return metrics_port_; }
  ServiceMetrics& metrics() { return *metrics_; }
  const std::string& engine_description() const;
  // The host buffers of sessions and announced SortChunked keys (pinned on
  // GPU servers): what they hold, for tests.
  const HostMemoryPool& host_memory() const { return *host_memory_; }

  // Health goes SERVING (with ServerOptions::serving_at_start false).
  void MarkServing();
  // Drains: health goes NOT_SERVING, new work is refused with UNAVAILABLE,
  // in-flight work completes (up to drain_timeout), the connections stay
  // open for drain_linger after it, then the server stops.
  void Shutdown();
  // Blocks until the server has shut down.
  void Wait();

 private:
  SortdServer() = default;

  // Start's stages, in the order it runs them (each on options_).
  void StartRuntime();
  absl::Status StartEngine();
  absl::Status StartMetricsExposer();
  void StartServiceContext();
  void StartSessions();
  void StartRegions();
  absl::Status StartGrpc();

  ServerOptions options_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<WorkPool> pool_;
  std::unique_ptr<WorkPool> gpu_pool_;  // requests routed to a GPU
  std::unique_ptr<Batcher> batcher_;    // null: batching off
  std::string description_;             // engines and batching, for the log
  std::unique_ptr<AdmissionControl> admission_;
  std::unique_ptr<MemoryTrimmer> memory_trimmer_;  // null: trimming disabled
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<ServiceMetrics> metrics_;
  // Feeds GPU engine timings into metrics_ (outlives no sort: the dispatcher
  // is only used by RPCs, which end before members are destroyed).
  std::unique_ptr<GpuEngineObserver> gpu_observer_;
  std::unique_ptr<RequestLog> request_log_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int metrics_port_ = 0;
  std::unique_ptr<ServiceContext> context_;
  std::unique_ptr<HostMemoryPool> host_memory_;  // session buffers; outlives sessions_
  std::unique_ptr<SessionStore> sessions_;  // before context_ and admission_ go
  std::unique_ptr<SortServiceImpl> service_;
  std::unique_ptr<RegionRegistry> regions_;  // outlives every call that uses it
  std::unique_ptr<RegionServiceImpl> region_service_;
  std::unique_ptr<DiagnosticsServiceImpl> diagnostics_;  // --diagnostics
  // Calls the drain waits for before gRPC's Shutdown (outlives server_).
  std::unique_ptr<CallsInFlight> calls_in_flight_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool shut_down_ = false;
};

}  // namespace sortd

#endif  // SORTD_SERVER_SORTD_SERVER_H_
