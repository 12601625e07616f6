// Every sortd flag (abseil) and its translation into ServerOptions: the
// values the types allow but the server cannot run with are refused here,
// naming the flag, so main() only starts, serves and drains.
#include "server/server_flags.h"

#include <malloc.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <tuple>
#include <vector>
#include <type_traits>

#include "absl/flags/flag.h"
#include "absl/flags/marshalling.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "core/cpu/cpu_tuning.h"

ABSL_FLAG(std::string, listen, "0.0.0.0:50051",
          "host:port for gRPC; port 0 picks a free port");
ABSL_FLAG(std::string, port_file, "",
          "if set, write the bound gRPC port to this file once serving");
ABSL_FLAG(std::string, metrics_listen, "0.0.0.0:9464",
          "host:port for Prometheus /metrics; empty disables; port 0 picks a free port");
ABSL_FLAG(std::string, metrics_port_file, "",
          "if set, write the bound metrics port to this file once serving");
ABSL_FLAG(int, expect_gpus, 0,
          "GPUs this server should see; exported as sortd_gpus_expected for alerting");
ABSL_FLAG(double, slow_request_seconds, 1.0, "log requests slower than this");
ABSL_FLAG(double, log_lines_per_second, 10, "rate limit of the request log");
ABSL_FLAG(std::string, engine, "auto",
          "auto (GPU when present, else CPU), cpu, or gpu");
ABSL_FLAG(std::string, gpu_min_keys, "auto",
          "engine=auto: numeric arrays with fewer keys sort on the CPU; auto: the crossover "
          "measured for the GPU's kind (h100 and h200 16384; docs/benchmarks.md)");
ABSL_FLAG(uint64_t, gpu_min_bytes_keys, uint64_t{1} << 14,
          "engine=auto: byte-string arrays with fewer strings sort on the CPU; "
          "larger ones on the GPU merge sort");
ABSL_FLAG(std::string, gpu_merge_argsort_max_keys, "auto",
          "numeric argsorts (indices wanted) of fewer keys, and more than 4096, run on the GPU "
          "merge sort instead of radix; 0 = never; auto: the crossover measured for the GPU's "
          "kind (h100 589824, h200 589824; docs/benchmarks.md)");
ABSL_FLAG(int, gpu_streams, 2,
          "requests each GPU works on at once (streams with their own buffers)");
ABSL_FLAG(int, gpu_arriving_streams, 1,
          "sort sessions each GPU takes while their parts still arrive (a stream and "
          "buffers of their own, held from the first part to the sort, so each part goes "
          "on to the device as it lands); further sessions sort after their upload; 0 = none");
ABSL_FLAG(int, gpu_errors_to_bench, 3,
          "CUDA errors in a row that take a GPU out of rotation for a cooldown (10 s, doubling "
          "after each failed probe up to 5 min; the CPU and other GPUs serve meanwhile); 0 = never");
ABSL_FLAG(uint64_t, gpu_pool_bytes, 0,
          "device memory cap of each GPU's buffer pool; 0 = 80% of free memory; "
          "larger numeric arrays are sorted in chunks and merged on the GPU, "
          "larger string arrays on the CPU");
ABSL_FLAG(uint64_t, gpu_staging_chunk_bytes, uint64_t{8} << 20,
          "pinned host staging chunk per transfer step (two per stream)");
ABSL_FLAG(std::string, gpu_radix_tuning, "auto",
          "radix pass tuning: auto (each GPU's own profile, from its L2 size: h200 from 56 MiB, "
          "else h100), h100 or h200 (every GPU pinned to that profile); the startup line names "
          "each GPU's");
ABSL_FLAG(std::string, gpu_radix_ranks, "auto",
          "how radix passes rank keys: auto (count order on each GPU whose atomics pass a "
          "check at startup, else matched), count-order or matched (every GPU pinned); the "
          "startup line names each GPU's");
ABSL_FLAG(bool, gpu_blocking_wait, false,
          "threads waiting for a GPU sleep until it is done instead of spinning on a core "
          "(spinning answers sooner; sleeping leaves the cores to other work)");
ABSL_FLAG(std::string, batching, "on",
          "dynamic batching of small numeric requests: on (GPU segmented kernel, or CPU "
          "engine batches without a GPU), auto (only when batches run on a GPU), off");
ABSL_FLAG(uint64_t, max_batch_request_keys, 16384,
          "requests of at most this many keys are batched (on the GPU, segments past the "
          "segmented kernel's shared-memory bins are merge sorted together)");
ABSL_FLAG(uint64_t, max_batch_keys, uint64_t{1} << 20,
          "a GPU batch launches once it holds this many keys");
ABSL_FLAG(uint64_t, max_cpu_batch_keys, uint64_t{1} << 16,
          "a CPU batch launches once it holds this many keys");
ABSL_FLAG(int64_t, max_batch_delay_us, 100,
          "a batch launches when its oldest request has waited this long (microseconds)");
ABSL_FLAG(bool, batch_hold_while_busy, true,
          "while every GPU stream slot (or CPU pool thread) runs a batch, due requests keep "
          "gathering in their queue and launch as one larger batch when a slot frees");
ABSL_FLAG(uint64_t, inline_max_keys, 1024,
          "numeric requests of at most this many keys (that the dispatcher keeps on the CPU) "
          "are sorted on the gRPC thread that received them, before batching: cheaper than "
          "any hand-off at this size (docs/architecture.md); 0 = never");
ABSL_FLAG(uint64_t, max_batch_queue, 65536,
          "small requests waiting for a batch; past it, RESOURCE_EXHAUSTED");
ABSL_FLAG(bool, diagnostics, false,
          "serve sortd.v1.DiagnosticsService (Echo, EchoStream): the gRPC baseline for "
          "sortctl bench --with_echo");
ABSL_FLAG(int, max_message_bytes, 64 << 20,
          "largest gRPC message received or sent (bytes)");
ABSL_FLAG(int, receive_window_bytes, 8 << 20,
          "HTTP/2 receive window per stream (bytes), gRPC's bandwidth probe off: bounds what "
          "the server buffers per connection; 0 = gRPC's own window, grown by its probe");
ABSL_FLAG(std::vector<std::string>, grpc_channel_args, {},
          "extra gRPC channel arguments of integer value, NAME=VALUE,... (e.g. "
          "grpc.http2.max_frame_size=1048576), applied after sortd's own: for tuning the "
          "transport where docs/operations.md says so");
ABSL_FLAG(int, worker_threads, 0,
          "threads running sorts; 0 = one per usable core (the container's CPU limit where lower)");
ABSL_FLAG(int, cpu_sort_threads, 0,
          "threads one large CPU sort may use; 0 = one per usable core");
ABSL_FLAG(uint64_t, cpu_parallel_threshold, uint64_t{1} << 18,
          "arrays with at least this many elements use the multi-threaded CPU path");
ABSL_FLAG(std::string, cpu_sort_tuning, "auto",
          "where CPU sorts of 4-byte keys switch from vqsort to the radix sort: auto (by the "
          "CPU's vendor, family and SIMD level), zen4 (radix from 512 keys), zen5 or avx512 "
          "(vqsort at every size; they differ in the permutations' crossovers) or avx2 (radix "
          "from 2^21 keys); the startup line names it");
ABSL_FLAG(uint64_t, max_inflight_bytes, 0,
          "payload bytes admitted at once; 0 = half of usable memory (physical, or the "
          "container's memory limit where lower)");
ABSL_FLAG(uint64_t, max_queued_requests, 4096,
          "requests admitted at once (running, or writing their response); more wait in the "
          "admission queue");
ABSL_FLAG(uint64_t, max_queued_waits, 256,
          "requests that may wait in the admission queue for room under --max_inflight_bytes "
          "and --max_queued_requests; more are refused (RESOURCE_EXHAUSTED with a retry hint); "
          "0 = no queue, refuse at once");
ABSL_FLAG(uint64_t, max_waiting_bytes, uint64_t{256} << 20,
          "received payload (unary messages) that waiting requests may hold; sort sessions wait "
          "holding nothing");
ABSL_FLAG(absl::Duration, max_queue_wait, absl::Seconds(60),
          "the longest a request waits for admission before RESOURCE_EXHAUSTED (its own "
          "deadline ends the wait earlier: DEADLINE_EXCEEDED)");
ABSL_FLAG(uint64_t, queue_bypass_bytes, uint64_t{1} << 20,
          "requests of at most this many in-flight bytes are admitted whenever they fit, ahead "
          "of larger waiters (small requests are not starved by a burst of large ones)");
ABSL_FLAG(uint64_t, small_reserve_bytes, uint64_t{64} << 20,
          "in-flight bytes beyond --max_inflight_bytes (at most a sixteenth of it) that only "
          "requests of at most --queue_bypass_bytes may use: where large requests fill the "
          "limit, small ones still run at once");
ABSL_FLAG(uint64_t, max_chunked_bytes, uint64_t{8} << 30,
          "largest total payload of one SortChunked upload (bytes)");
ABSL_FLAG(absl::Duration, session_idle_timeout, absl::Seconds(60),
          "a sort session with no call in progress for this long is freed");
ABSL_FLAG(std::string, key_encoding, "auto",
          "which sort sessions asking for delta-coded sorted keys get them: auto (clients on "
          "other hosts; on this host only 32-bit keys sorted on the GPU, where coding was "
          "measured to pay), always, never (docs/api.md, \"Compressed downloads\")");
ABSL_FLAG(std::string, advertise_address, "",
          "gRPC target that reaches this very server (e.g. $(POD_IP):50051 behind a Kubernetes "
          "Service): sort-session clients open their parallel connections there; empty: the "
          "address that answered");
ABSL_FLAG(uint32_t, transfer_streams, 0,
          "connections suggested to all open sort sessions together, shared among them (0: one "
          "a usable core, at least 8): a burst of large sessions keeps cores for other calls; lower "
          "favours small requests' latency over the burst's throughput");
ABSL_FLAG(int, max_sessions, 64, "sort sessions open at once before RESOURCE_EXHAUSTED");
ABSL_FLAG(uint64_t, pinned_cache_bytes, uint64_t{8} << 30,
          "GPU servers: pinned host memory of ended sort sessions kept for reuse (at most an "
          "eighth of usable memory); session buffers larger than this are not pinned; 0: "
          "never pin");
ABSL_FLAG(uint64_t, chunk_response_bytes, uint64_t{4} << 20,
          "largest SortChunked response message in bytes, framing included (the default is "
          "gRPC's default receive limit, so stock clients read every response)");
ABSL_FLAG(int, max_stream_pending, 256,
          "SortStream: pending requests per stream before reading pauses");
ABSL_FLAG(std::string, shared_memory, "none",
          "same-host regions clients may register (RegionService): none, system (POSIX "
          "shared memory), cuda (CUDA IPC) or system,cuda; only clients on this host (a Unix "
          "socket or loopback) may use them (docs/api.md)");
ABSL_FLAG(std::string, shared_memory_peers, "local",
          "who may use regions: local (a Unix socket or loopback) or unix (the Unix socket "
          "only: loopback TCP also carries port forwards and proxies)");
ABSL_FLAG(uint64_t, max_shm_regions, 64,
          "regions registered at once before RESOURCE_EXHAUSTED (at most 1024)");
ABSL_FLAG(uint64_t, max_shm_bytes, uint64_t{64} << 30,
          "bytes of all regions registered at once before RESOURCE_EXHAUSTED");
ABSL_FLAG(std::string, unix_socket, "",
          "also listen on this Unix domain socket path (plaintext; the file's permissions "
          "decide who may connect), e.g. for a sidecar using shared-memory regions");
ABSL_FLAG(std::string, unix_socket_mode, "0660", "permission bits of the --unix_socket file (octal)");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain; enables TLS with --tls_key");
ABSL_FLAG(std::string, tls_key, "", "PEM private key");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA certificates; with TLS, clients must present a certificate they signed "
          "(mutual TLS)");
ABSL_FLAG(absl::Duration, drain_delay, absl::ZeroDuration(),
          "on SIGTERM: how long health reports NOT_SERVING (new work refused) before the "
          "drain waits for the RPCs in flight; lets load balancers notice");
ABSL_FLAG(absl::Duration, max_connection_age, absl::InfiniteDuration(),
          "connections older than this are closed gracefully (GOAWAY) so that clients "
          "reconnect and rebalance over replicas; inf = never");
ABSL_FLAG(absl::Duration, max_connection_age_grace, absl::InfiniteDuration(),
          "after a max_connection_age GOAWAY, how long RPCs on that connection may still run "
          "before it closes; inf = until they finish");
ABSL_FLAG(absl::Duration, idle_memory_trim_interval, absl::Seconds(1),
          "when nothing is in flight after serving, give freed heap memory back to the OS "
          "(malloc_trim) at most this often; 0 disables");
ABSL_FLAG(uint64_t, malloc_mmap_threshold, uint64_t{32} << 20,
          "glibc malloc (M_MMAP_THRESHOLD): blocks below this come from the heap arenas "
          "and their freed memory stays there for the next request (the trim threshold is "
          "fixed at twice this; the idle trim returns it); larger blocks are fresh pages; at "
          "most 32 MiB (glibc's limit); 0 = glibc's dynamic thresholds, which re-fault "
          "mid-size payloads' pages on every request");
ABSL_FLAG(int, malloc_arena_max, 8,
          "glibc malloc arenas (M_ARENA_MAX): each may keep up to 64 MiB of free heap that "
          "the idle trim cannot return, so fewer arenas hold less memory when idle; "
          "0 = glibc's default (8 per core)");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(30),
          "on SIGTERM: how long in-flight RPCs may take before they are cancelled");
ABSL_FLAG(absl::Duration, drain_linger, absl::Seconds(1),
          "on SIGTERM: after the RPCs in flight have ended, how long connections stay open "
          "(new work refused) so that clients read the end of their responses before GOAWAY "
          "closes them");

namespace sortd {
namespace {

// A flag value as the command line spells it (durations with units).
// Durations go through FormatDuration, what their AbslUnparseFlag returns:
// Debian's abseil marks absl::UnparseFlag(Duration) deprecated.
template <typename T>
std::string FlagText(const T& value) {
  if constexpr (std::is_same_v<T, absl::Duration>) {
    return absl::FormatDuration(value);
  } else {
    return absl::UnparseFlag(value);
  }
}

// "--NAME=VALUE: must be ..." when `flag` is below `min`, else empty.
template <typename T>
std::string BelowMinimum(const absl::Flag<T>& flag, T min) {
  if (absl::GetFlag(flag) >= min) return "";
  std::string must = "must be at least " + FlagText(min);
  if (min == T{}) must = "must not be negative";
  if constexpr (std::is_arithmetic_v<T>) {
    if (min == T{1}) must = "must be positive";
  }
  return absl::StrCat("--", absl::GetFlagReflectionHandle(flag).Name(), "=",
                      FlagText(absl::GetFlag(flag)), ": ", must);
}

// "--NAME=VALUE: must be at most MAX" when `flag` is above `max`, else empty.
template <typename T>
std::string AboveMaximum(const absl::Flag<T>& flag, T max) {
  if (absl::GetFlag(flag) <= max) return "";
  return absl::StrCat("--", absl::GetFlagReflectionHandle(flag).Name(), "=",
                      FlagText(absl::GetFlag(flag)), ": must be at most ", FlagText(max));
}

// glibc refuses larger mmap thresholds (half a thread heap, HEAP_MAX_SIZE / 2
// on 64-bit).
constexpr uint64_t kMaxMallocMmapThreshold = uint64_t{32} << 20;

// Values the flags' types allow but the server cannot run with (each would
// otherwise hang, refuse every call or be silently replaced). Empty: none.
std::string InvalidFlagValue() {
  const absl::Duration zero = absl::ZeroDuration();
  for (const std::string& problem : {
           // Below 1024, no SortChunked response could carry its framing.
           BelowMinimum(FLAGS_max_message_bytes, 1024),
           BelowMinimum(FLAGS_receive_window_bytes, 0),
           BelowMinimum(FLAGS_max_stream_pending, 1),
           BelowMinimum(FLAGS_max_sessions, 1),
           BelowMinimum(FLAGS_session_idle_timeout, absl::Milliseconds(1)),
           BelowMinimum(FLAGS_max_queued_requests, uint64_t{1}),
           BelowMinimum(FLAGS_max_queue_wait, absl::Milliseconds(1)),
           BelowMinimum(FLAGS_max_chunked_bytes, uint64_t{1}),
           BelowMinimum(FLAGS_gpu_streams, 1),
           BelowMinimum(FLAGS_gpu_errors_to_bench, 0),
           BelowMinimum(FLAGS_gpu_arriving_streams, 0),
           BelowMinimum(FLAGS_malloc_arena_max, 0),
           AboveMaximum(FLAGS_malloc_mmap_threshold, kMaxMallocMmapThreshold),
           BelowMinimum(FLAGS_chunk_response_bytes, uint64_t{1024}),
           BelowMinimum(FLAGS_max_batch_delay_us, int64_t{0}),
           BelowMinimum(FLAGS_log_lines_per_second, 0.0),
           BelowMinimum(FLAGS_slow_request_seconds, 0.0),
           BelowMinimum(FLAGS_drain_timeout, zero),
           BelowMinimum(FLAGS_drain_delay, zero),
           BelowMinimum(FLAGS_drain_linger, zero),
           BelowMinimum(FLAGS_idle_memory_trim_interval, zero),
           BelowMinimum(FLAGS_max_connection_age, zero),
           BelowMinimum(FLAGS_max_connection_age_grace, zero),
       }) {
    if (!problem.empty()) return problem;
  }
  return "";
}

}  // namespace

void ApplyMallocFlags() {
  // Arenas are made as threads first contend, so this runs before any.
  // glibc's malloc_trim gives back the free top of the main arena only; a
  // thread arena keeps a free top of up to 64 MiB (its trim threshold grows
  // with the mmap threshold). With glibc's 8 arenas per core an idle 16-core
  // server held 1.5-1.6x its warm-up RSS after a soak; with 8 in all, 1.03x,
  // at the same throughput (docs/hardening.md, "Memory").
  if (absl::GetFlag(FLAGS_malloc_arena_max) > 0) {
    mallopt(M_ARENA_MAX, absl::GetFlag(FLAGS_malloc_arena_max));
  }
  // glibc's dynamic thresholds start at 128 KiB and rise only to the size of
  // a mapped block when it is freed, so the trim threshold (twice that) stays
  // near the payload size: every mid-size request's buffers were trimmed from
  // the heap when freed and page-faulted in again by the next request (2-core
  // Zen 5 VM, CPU engine: 76-375 page faults a request at 65536-262144 keys;
  // fixed thresholds, 0-6, and 1.9-3.1x the requests/s; docs/hardening.md,
  // "Memory"). Fixed: blocks below the mmap threshold stay in the arenas, and
  // a thread heap (64 MiB at most) never trims its top on free; the idle
  // trim (--idle_memory_trim_interval) returns what is free once nothing is
  // in flight. A value over glibc's limit is refused below (exit 2).
  if (const uint64_t mmap_threshold = absl::GetFlag(FLAGS_malloc_mmap_threshold);
      mmap_threshold > 0 && mmap_threshold <= kMaxMallocMmapThreshold) {
    mallopt(M_MMAP_THRESHOLD, static_cast<int>(mmap_threshold));
    mallopt(M_TRIM_THRESHOLD, static_cast<int>(2 * mmap_threshold));
  }
}

absl::StatusOr<SortdFlags> ParseSortdFlags() {
  if (const std::string invalid = InvalidFlagValue(); !invalid.empty()) {
    return absl::InvalidArgumentError(invalid);
  }

  absl::StatusOr<EngineChoice> engine =
      ParseEngineChoice(absl::GetFlag(FLAGS_engine));
  if (!engine.ok()) {
    return engine.status();
  }
  SortdFlags flags;
  ServerOptions& options = flags.server;
  options.listen_address = absl::GetFlag(FLAGS_listen);
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.receive_window_bytes = absl::GetFlag(FLAGS_receive_window_bytes);
  for (const std::string& arg : absl::GetFlag(FLAGS_grpc_channel_args)) {
    const std::vector<std::string> parts = absl::StrSplit(arg, absl::MaxSplits('=', 1));
    int value = 0;
    if (parts.size() != 2 || parts[0].empty() || !absl::SimpleAtoi(parts[1], &value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--grpc_channel_args: \"", arg, "\" is not NAME=INTEGER"));
    }
    options.grpc_channel_args.emplace_back(parts[0], value);
  }
  options.dispatcher.engine = *engine;
  options.dispatcher.cpu.max_threads = absl::GetFlag(FLAGS_cpu_sort_threads);
  options.dispatcher.cpu.parallel_threshold = absl::GetFlag(FLAGS_cpu_parallel_threshold);
  const std::optional<cpu::CpuTuning> cpu_tuning =
      cpu::ParseCpuTuning(absl::GetFlag(FLAGS_cpu_sort_tuning));
  if (!cpu_tuning.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("--cpu_sort_tuning=", absl::GetFlag(FLAGS_cpu_sort_tuning), ": must be auto, zen4, zen5, avx512 or avx2"));
  }
  options.dispatcher.cpu.tuning = *cpu_tuning;
  for (auto [flag, value, field] :
       {std::tuple{"gpu_min_keys", absl::GetFlag(FLAGS_gpu_min_keys), &options.dispatcher.gpu.min_keys},
        std::tuple{"gpu_merge_argsort_max_keys", absl::GetFlag(FLAGS_gpu_merge_argsort_max_keys),
                   &options.dispatcher.gpu.merge_argsort_max_keys}}) {
    absl::StatusOr<std::optional<size_t>> threshold = ParseGpuThreshold(flag, value);
    if (!threshold.ok()) {
      return threshold.status();
    }
    *field = *threshold;
  }
  options.dispatcher.gpu.min_bytes_keys = absl::GetFlag(FLAGS_gpu_min_bytes_keys);
  options.dispatcher.gpu.slots_per_gpu = absl::GetFlag(FLAGS_gpu_streams);
  options.dispatcher.gpu.arriving_slots_per_gpu = absl::GetFlag(FLAGS_gpu_arriving_streams);
  options.dispatcher.gpu.max_pool_bytes = absl::GetFlag(FLAGS_gpu_pool_bytes);
  options.dispatcher.gpu.rotation.failures_to_bench = absl::GetFlag(FLAGS_gpu_errors_to_bench);
  options.dispatcher.gpu.staging_chunk_bytes = absl::GetFlag(FLAGS_gpu_staging_chunk_bytes);
  options.dispatcher.gpu.blocking_wait = absl::GetFlag(FLAGS_gpu_blocking_wait);
  options.dispatcher.gpu.radix_tuning = absl::GetFlag(FLAGS_gpu_radix_tuning);
  if (!ValidRadixTuning(options.dispatcher.gpu.radix_tuning)) {
    return absl::InvalidArgumentError(absl::StrCat("--gpu_radix_tuning=", options.dispatcher.gpu.radix_tuning, ": must be auto, h100 or h200"));
  }
  options.dispatcher.gpu.radix_ranks = absl::GetFlag(FLAGS_gpu_radix_ranks);
  if (!ValidRadixRanks(options.dispatcher.gpu.radix_ranks)) {
    return absl::InvalidArgumentError(absl::StrCat("--gpu_radix_ranks=", options.dispatcher.gpu.radix_ranks, ": must be auto, count-order or matched"));
  }
  options.worker_threads = absl::GetFlag(FLAGS_worker_threads);
  options.max_inflight_bytes = absl::GetFlag(FLAGS_max_inflight_bytes);
  options.max_queued_requests = absl::GetFlag(FLAGS_max_queued_requests);
  options.admission_queue.max_waiting_requests = absl::GetFlag(FLAGS_max_queued_waits);
  options.admission_queue.max_waiting_bytes = absl::GetFlag(FLAGS_max_waiting_bytes);
  options.admission_queue.max_wait = absl::GetFlag(FLAGS_max_queue_wait);
  options.admission_queue.bypass_bytes = absl::GetFlag(FLAGS_queue_bypass_bytes);
  options.admission_queue.small_reserve_bytes = absl::GetFlag(FLAGS_small_reserve_bytes);
  options.limits.max_chunked_bytes = absl::GetFlag(FLAGS_max_chunked_bytes);
  options.limits.chunk_response_bytes = absl::GetFlag(FLAGS_chunk_response_bytes);
  options.sessions.idle_timeout = absl::GetFlag(FLAGS_session_idle_timeout);
  options.sessions.max_sessions = absl::GetFlag(FLAGS_max_sessions);
  options.sessions.transfer_streams = absl::GetFlag(FLAGS_transfer_streams);
  options.sessions.direct_target = absl::GetFlag(FLAGS_advertise_address);
  absl::StatusOr<KeyEncodingPolicy> key_encoding =
      ParseKeyEncodingPolicy(absl::GetFlag(FLAGS_key_encoding));
  if (!key_encoding.ok()) return key_encoding.status();
  options.sessions.key_encoding = *key_encoding;
  options.pinned_cache_bytes = absl::GetFlag(FLAGS_pinned_cache_bytes);
  options.limits.max_stream_pending = absl::GetFlag(FLAGS_max_stream_pending);
  options.enable_diagnostics = absl::GetFlag(FLAGS_diagnostics);
  absl::StatusOr<BatchingMode> batching = ParseBatchingMode(absl::GetFlag(FLAGS_batching));
  if (!batching.ok()) {
    return batching.status();
  }
  options.batching_mode = *batching;
  options.batching.max_request_keys = absl::GetFlag(FLAGS_max_batch_request_keys);
  options.batching.max_batch_keys = absl::GetFlag(FLAGS_max_batch_keys);
  options.batching.max_cpu_batch_keys = absl::GetFlag(FLAGS_max_cpu_batch_keys);
  options.batching.max_delay = absl::Microseconds(absl::GetFlag(FLAGS_max_batch_delay_us));
  options.batching.max_queued_requests = absl::GetFlag(FLAGS_max_batch_queue);
  options.batch_hold_while_busy = absl::GetFlag(FLAGS_batch_hold_while_busy);
  options.inline_max_keys = absl::GetFlag(FLAGS_inline_max_keys);
  if (absl::Status regions = ParseSharedMemoryKinds(absl::GetFlag(FLAGS_shared_memory),
                                                            &options.regions);
      !regions.ok()) {
    return regions;
  }
  const std::string peers = absl::GetFlag(FLAGS_shared_memory_peers);
  if (peers != "local" && peers != "unix") {
    return absl::InvalidArgumentError(absl::StrCat("--shared_memory_peers=", peers, ": expected local or unix"));
  }
  options.regions.unix_socket_only = peers == "unix";
  if (options.regions.unix_socket_only && absl::GetFlag(FLAGS_unix_socket).empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--shared_memory_peers=unix: needs --unix_socket (no caller could "
                 "use regions)"));
  }
  if (absl::GetFlag(FLAGS_max_shm_regions) > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("--max_shm_regions=", absl::GetFlag(FLAGS_max_shm_regions), ": at most 1024"));
  }
  options.regions.max_regions = absl::GetFlag(FLAGS_max_shm_regions);
  options.regions.max_bytes = absl::GetFlag(FLAGS_max_shm_bytes);
  options.unix_socket = absl::GetFlag(FLAGS_unix_socket);
  {
    const std::string mode = absl::GetFlag(FLAGS_unix_socket_mode);
    char* end = nullptr;
    const unsigned long bits = std::strtoul(mode.c_str(), &end, 8);
    if (mode.empty() || *end != '\0' || bits > 0777) {
      return absl::InvalidArgumentError(absl::StrCat("--unix_socket_mode=", mode, ": must be octal permission bits (0000-0777)"));
    }
    options.unix_socket_mode = static_cast<uint32_t>(bits);
  }
  options.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  options.tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  options.drain_delay = absl::GetFlag(FLAGS_drain_delay);
  options.drain_timeout = absl::GetFlag(FLAGS_drain_timeout);
  options.drain_linger = absl::GetFlag(FLAGS_drain_linger);
  options.max_connection_age = absl::GetFlag(FLAGS_max_connection_age);
  options.idle_memory_trim_interval = absl::GetFlag(FLAGS_idle_memory_trim_interval);
  options.max_connection_age_grace = absl::GetFlag(FLAGS_max_connection_age_grace);
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  options.expect_gpus = absl::GetFlag(FLAGS_expect_gpus);
  options.request_log.slow_seconds = absl::GetFlag(FLAGS_slow_request_seconds);
  options.request_log.lines_per_second = absl::GetFlag(FLAGS_log_lines_per_second);

  flags.port_file = absl::GetFlag(FLAGS_port_file);
  flags.metrics_port_file = absl::GetFlag(FLAGS_metrics_port_file);
  return flags;
}

}  // namespace sortd
