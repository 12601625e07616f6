// What every handler and reactor of SortService shares: the engines, the
// worker pool, admission control, limits and the draining flag.
#ifndef SORTD_SERVER_GRPC_SERVICE_CONTEXT_H_
#define SORTD_SERVER_GRPC_SERVICE_CONTEXT_H_

#include <atomic>
#include <functional>
#include <new>
#include <optional>
#include <chrono>
#include <string>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "core/dispatcher.h"
#include "core/host_memory.h"
#include "server/metrics/metrics.h"
#include "server/metrics/request_log.h"
#include "server/runtime/admission.h"
#include "server/runtime/batcher.h"
#include "server/runtime/work_pool.h"

namespace sortd {

class RegionRegistry;
class SessionStore;

using SteadyClock = std::chrono::steady_clock;

inline double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

struct ServiceLimits {
  // Largest SortChunked response message, framing included (the default is
  // gRPC's default receive limit: stock clients read every response).
  size_t chunk_response_bytes = size_t{4} << 20;
  // SortStream: requests of one stream queued or running before the server
  // stops reading from that stream (flow control, not an error).
  int max_stream_pending = 256;
  // SortChunked: largest total payload one sort may upload.
  uint64_t max_chunked_bytes = uint64_t{8} << 30;
  // Largest message sent (--max_message_bytes): a Sort, SortPairs or
  // SortStream request whose response would be larger is refused before it
  // is sorted. 0: unchecked.
  uint64_t max_response_bytes = 0;
};

struct ServiceContext {
  Dispatcher* dispatcher = nullptr;
  WorkPool* pool = nullptr;
  // Requests the dispatcher routes to a GPU (null: no GPU engine). They
  // mostly wait on the device, so they get threads of their own instead of
  // blocking the CPU engine's.
  WorkPool* gpu_pool = nullptr;
  AdmissionControl* admission = nullptr;
  // Small numeric requests go here instead of a pool (null: batching off).
  Batcher* batcher = nullptr;
  // Open sort sessions (SortdServer always sets it).
  SessionStore* sessions = nullptr;
  // Host buffers of sessions and announced SortChunked keys: pinned where a
  // GPU serves (null: heap memory).
  HostMemoryPool* host_memory = nullptr;
  // Same-host regions (RegionService); null or all kinds off: refused.
  RegionRegistry* regions = nullptr;
  ServiceMetrics* metrics = nullptr;      // optional
  RequestLog* request_log = nullptr;      // optional
  ServiceLimits limits;
  // Numeric requests of at most this many keys, which the dispatcher keeps
  // on the CPU, are sorted on the gRPC thread that received them: for them
  // any hand-off (batcher, pool, GPU) costs more CPU than the sort
  // (docs/architecture.md, "Inline sorts"). 0: never.
  size_t inline_max_keys = 0;
  // Threads one large CPU selection (TopK) may use: the CPU engine's
  // (--cpu_sort_threads, else every usable core).
  int cpu_threads = 1;
  // Set at SIGTERM: new work is refused with UNAVAILABLE.
  std::atomic<bool> draining{false};
  // Tests only: called at each named site of the handlers and reactors
  // ("unary.run", "stream.run", "chunked.header", "chunked.chunk",
  // "chunked.sort", "chunked.write"). Returning true there throws
  // std::bad_alloc, as a failed allocation would; blocking there holds the
  // request in flight (a gate for drain and deadline tests). Also called,
  // result ignored, at "unary.cancelled" and "stream.cancelled" from gRPC's
  // cancel notifications (must not block there). Null in production.
  std::function<bool(absl::string_view site)> test_site_hook;

  void AtTestSite(absl::string_view site) const {
    if (test_site_hook && test_site_hook(site)) throw std::bad_alloc();
  }

  // Records a finished request in the metrics and the request log.
  void Report(RequestRecord record, const std::string& request_id,
              const absl::Status& status) const {
    record.code = status.code();
    if (metrics != nullptr) metrics->Record(record);
    if (request_log != nullptr) {
      request_log->Maybe(RpcMethodName(record.method), request_id, status, record.seconds);
    }
  }

  // Whether a request is sorted inline, before batching is considered.
  bool SortsInline(std::optional<DataType> type, size_t size) const {
    // 0 means never, empty requests included.
    return inline_max_keys > 0 && size <= inline_max_keys && type && *type != DataType::kBytes &&
           !dispatcher->RoutesToGpu(*type, size);
  }

  // Whether a request goes to the batcher.
  bool Batches(std::optional<DataType> type, size_t size) const {
    return batcher != nullptr && batcher->Accepts(type, size);
  }

  // Counts one engine launch for a successful unbatched request.
  void RecordLaunch(const RequestRecord& record) const {
    if (record.engine && metrics != nullptr) metrics->RecordBatch(*record.engine, 1);
  }

  // The pool for a request of `size` keys of `type` (unset: no keys).
  WorkPool& PoolFor(std::optional<DataType> type, size_t size) const {
    if (gpu_pool != nullptr && type && *type != DataType::kBytes &&
        dispatcher->RoutesToGpu(*type, size)) {
      return *gpu_pool;
    }
    return *pool;
  }

  absl::Status CheckNotDraining() const {
    if (draining.load(std::memory_order_relaxed)) {
      return absl::UnavailableError("server is shutting down (draining)");
    }
    return absl::OkStatus();
  }
};

}  // namespace sortd

#endif  // SORTD_SERVER_GRPC_SERVICE_CONTEXT_H_
