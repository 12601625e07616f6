// sortd's Prometheus metrics (docs/metrics.md). Series are created lazily
// and cached in lock-free tables indexed by enum values, so recording a
// request costs a few atomic adds and histogram observations, no label-map
// lookups (bench/metrics_bench.cc measures it).
#ifndef SORTD_SERVER_METRICS_METRICS_H_
#define SORTD_SERVER_METRICS_METRICS_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/status/status.h"
#include "core/gpu_engine.h"
#include "core/types.h"

namespace sortd {

class RequestLog;

// kSortSession: one sort session, recorded when it ends (docs/metrics.md).
enum class RpcMethod {
  kSort,
  kSortPairs,
  kSortStream,
  kSortChunked,
  kSortSession,
  kSortTable,
  kTopK,
};
inline constexpr int kRpcMethodCount = 7;
const char* RpcMethodName(RpcMethod method);

// One finished request (or one item of a SortStream).
struct RequestRecord {
  RpcMethod method = RpcMethod::kSort;
  std::optional<DataType> key_type;  // unset when the request had no keys
  absl::StatusCode code = absl::StatusCode::kOk;
  std::optional<EngineKind> engine;  // unset when no engine ran
  double seconds = 0;                // arrival to completion
  std::optional<double> queue_seconds;  // admission to worker start
  uint64_t bytes_received = 0;       // payload: keys + values
  uint64_t bytes_sent = 0;
  uint64_t keys_sorted = 0;
};

struct MetricsOptions {
  std::string version;
  std::string git_commit;
  bool cuda_built = false;
  int gpu_devices = 0;      // visible GPUs
  int gpus_expected = 0;    // --expect_gpus, for the "GPU missing" alert
};

// Admission control's state, as /metrics shows it.
struct AdmissionGauges {
  uint64_t inflight_requests = 0;
  uint64_t inflight_bytes = 0;
  uint64_t max_requests = 0;
  uint64_t max_bytes = 0;
  // The admission queue: requests waiting, the bytes they wait for, the
  // received payload they hold, its bound; refusals since start by reason
  // (names and counts in the same order).
  uint64_t waiting_requests = 0;
  uint64_t waiting_bytes = 0;
  uint64_t waiting_held_bytes = 0;
  uint64_t max_waiting_requests = 0;
  std::vector<std::pair<std::string, uint64_t>> refusals;
};

// One kind of same-host region, as /metrics shows it (label "kind").
// Plain numbers: the metrics layer does not know the region registry.
struct RegionGauge {
  std::string kind;  // "system", "cuda"
  uint64_t regions = 0;
  uint64_t bytes = 0;
  uint64_t requests = 0;
};

class ServiceMetrics {
 public:
  ServiceMetrics(std::shared_ptr<prometheus::Registry> registry,
                 const MetricsOptions& options);
  ~ServiceMetrics();

  // Records a finished request; thread-safe and lock-free after the first
  // request of each label combination.
  void Record(const RequestRecord& record);
  // Requests sorted together by one engine launch.
  void RecordBatch(EngineKind engine, size_t requests);
  // GPU timings (used by the GPU engines).
  void RecordKernel(int gpu, double seconds);
  void RecordTransfer(int gpu, bool host_to_device, double seconds);
  void SetDevicePoolBytes(int gpu, double bytes);
  // A request routed to a GPU that did not complete there.
  void RecordGpuFallback(int gpu, GpuFallbackReason reason);
  // 1 while the GPU takes new work, 0 while it is out of rotation after
  // CUDA errors (core/gpu_rotation.h).
  void SetGpuInRotation(int gpu, bool in_rotation);

  // In-flight gauges, read from admission control at scrape time.
  void WatchAdmission(std::function<AdmissionGauges()> gauges);
  // Sort sessions open now and expired since start, read at scrape time.
  void WatchSessions(std::function<uint64_t()> open, std::function<uint64_t()> expired,
                     std::function<uint64_t()> sorted_arriving);

  // Same-host regions registered now (one gauge per kind, every kind
  // present even when zero) and requests served from them, read at scrape
  // time.
  void WatchRegions(std::function<std::vector<RegionGauge>()> gauges);

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }
  // Scrape-time gauges (in-flight requests/bytes and their limits); expose
  // it next to registry().
  std::shared_ptr<prometheus::Collectable> inflight_collectable() const;

 private:
  class InflightCollector;
  static constexpr int kKeyTypes = 8;  // 7 DataTypes + "none"
  static constexpr int kCodes = 17;
  static constexpr int kEngines = 5;   // 4 EngineKinds + "none"

  prometheus::Counter& RequestCounter(int method, int key_type, int code);
  prometheus::Histogram& Duration(int method, int engine);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& duration_;
  prometheus::Family<prometheus::Histogram>& queue_;
  prometheus::Family<prometheus::Histogram>& kernel_;
  prometheus::Family<prometheus::Histogram>& transfer_;
  prometheus::Family<prometheus::Counter>& keys_;
  prometheus::Family<prometheus::Counter>& bytes_received_;
  prometheus::Family<prometheus::Counter>& bytes_sent_;
  prometheus::Family<prometheus::Histogram>& batch_;
  prometheus::Family<prometheus::Gauge>& pool_bytes_;
  prometheus::Family<prometheus::Counter>& fallbacks_;
  prometheus::Family<prometheus::Gauge>& in_rotation_;

  std::array<std::atomic<prometheus::Counter*>, kRpcMethodCount * kKeyTypes * kCodes> request_cells_{};
  std::array<std::atomic<prometheus::Histogram*>, kRpcMethodCount * kEngines> duration_cells_{};
  std::array<prometheus::Histogram*, kRpcMethodCount> queue_cells_{};
  std::array<prometheus::Counter*, kEngines> keys_cells_{};
  std::array<prometheus::Counter*, kRpcMethodCount> received_cells_{};
  std::array<prometheus::Counter*, kRpcMethodCount> sent_cells_{};
  std::array<prometheus::Histogram*, kEngines> batch_cells_{};
  std::vector<prometheus::Histogram*> kernel_cells_;
  std::vector<std::array<prometheus::Histogram*, 2>> transfer_cells_;  // h2d, d2h
  std::vector<prometheus::Gauge*> pool_cells_;
  std::vector<std::array<prometheus::Counter*, 2>> fallback_cells_;  // memory, error
  std::vector<prometheus::Gauge*> rotation_cells_;
  std::shared_ptr<InflightCollector> inflight_;
};

// Bucket boundaries (seconds) shared by every duration histogram: 10 us to
// 60 s, roughly 1-2.5-5 per decade.
const prometheus::Histogram::BucketBoundaries& DurationBuckets();

}  // namespace sortd

#endif  // SORTD_SERVER_METRICS_METRICS_H_
