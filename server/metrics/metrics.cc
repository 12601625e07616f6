// Metric families, lazy series tables, and the scrape-time collector for
// in-flight gauges.
#include "server/metrics/metrics.h"

#include <mutex>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>


namespace sortd {
namespace {

const char* kCodeNames[] = {
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
    "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};

const char* KeyTypeLabel(int index) {
  return index < 7 ? DataTypeName(static_cast<DataType>(index)) : "none";
}

const char* EngineLabel(int index) {
  return index < 4 ? EngineKindName(static_cast<EngineKind>(index)) : "none";
}

int EngineIndex(const std::optional<EngineKind>& engine) {
  return engine ? static_cast<int>(*engine) : 4;
}

const prometheus::Histogram::BucketBoundaries& BatchBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
  return *buckets;
}

// Gets or creates the series at `cell` (double-checked: the family's own
// mutex serialises creation; later lookups are one atomic load).
template <typename M, typename Make>
M& Cached(std::atomic<M*>& cell, Make make) {
  M* m = cell.load(std::memory_order_acquire);
  if (m == nullptr) {
    static std::mutex create_mu;
    std::lock_guard<std::mutex> lock(create_mu);
    m = cell.load(std::memory_order_relaxed);
    if (m == nullptr) {
      m = &make();
      cell.store(m, std::memory_order_release);
    }
  }
  return *m;
}

prometheus::MetricFamily GaugeFamily(const std::string& name, const std::string& help,
                                     double value) {
  prometheus::MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = prometheus::MetricType::Gauge;
  prometheus::ClientMetric metric;
  metric.gauge.value = value;
  family.metric.push_back(metric);
  return family;
}

}  // namespace

const char* RpcMethodName(RpcMethod method) {
  switch (method) {
    case RpcMethod::kSort: return "Sort";
    case RpcMethod::kSortPairs: return "SortPairs";
    case RpcMethod::kSortStream: return "SortStream";
    case RpcMethod::kSortChunked: return "SortChunked";
    case RpcMethod::kSortSession: return "SortSession";
    case RpcMethod::kSortTable: return "SortTable";
    case RpcMethod::kTopK: return "TopK";
  }
  return "unknown";
}

const prometheus::Histogram::BucketBoundaries& DurationBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3,
      10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1,    2.5,    5,
      10,    30,    60};
  return *buckets;
}

// Reads admission control, sessions and regions when Prometheus scrapes.
class ServiceMetrics::InflightCollector : public prometheus::Collectable {
 public:
  void WatchAdmission(std::function<AdmissionGauges()> admission) {
    std::lock_guard<std::mutex> lock(mu_);
    admission_ = std::move(admission);
  }
  void WatchSessions(std::function<uint64_t()> open, std::function<uint64_t()> expired,
                     std::function<uint64_t()> sorted_arriving) {
    std::lock_guard<std::mutex> lock(mu_);
    open_sessions_ = std::move(open);
    expired_sessions_ = std::move(expired);
    sorted_arriving_ = std::move(sorted_arriving);
  }
  void WatchRegions(std::function<std::vector<RegionGauge>()> counts) {
    std::lock_guard<std::mutex> lock(mu_);
    region_counts_ = std::move(counts);
  }
  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> families;
    std::lock_guard<std::mutex> lock(mu_);
    if (admission_) CollectAdmission(admission_(), &families);
    if (region_counts_) CollectRegions(region_counts_(), &families);
    if (open_sessions_) {
      families.push_back(GaugeFamily("sortd_sort_sessions", "Sort sessions open (started, not ended or expired).",
                                     static_cast<double>(open_sessions_())));
      prometheus::MetricFamily expired = GaugeFamily(
          "sortd_sort_sessions_expired_total",
          "Sort sessions freed after --session_idle_timeout without a call.", 0);
      expired.type = prometheus::MetricType::Counter;
      expired.metric[0].counter.value = static_cast<double>(expired_sessions_());
      families.push_back(std::move(expired));
      prometheus::MetricFamily arriving = GaugeFamily(
          "sortd_sort_sessions_sorted_arriving_total",
          "Sort sessions sorted while their parts arrived: by a GPU that took each part as it "
          "landed, or by the CPU engine, which partitioned the keys as they landed (the others "
          "sorted after the upload: the GPU's arriving slot busy, over the device pool, or on "
          "the CPU values, indices or a small array).",
          0);
      arriving.type = prometheus::MetricType::Counter;
      arriving.metric[0].counter.value = static_cast<double>(sorted_arriving_());
      families.push_back(std::move(arriving));
    }
    return families;
  }

 private:
  static void CollectRegions(const std::vector<RegionGauge>& gauges,
                             std::vector<prometheus::MetricFamily>* out) {
    prometheus::MetricFamily regions{"sortd_shm_regions",
                                     "Same-host memory regions registered now, by kind.",
                                     prometheus::MetricType::Gauge, {}};
    prometheus::MetricFamily bytes{"sortd_shm_registered_bytes",
                                   "Bytes of the same-host memory regions registered now, by kind.",
                                   prometheus::MetricType::Gauge, {}};
    prometheus::MetricFamily requests{
        "sortd_shm_requests_total",
        "Sort and SortPairs requests served from same-host regions, by the kind of the keys' "
        "region.",
        prometheus::MetricType::Counter, {}};
    for (const RegionGauge& g : gauges) {
      prometheus::ClientMetric m;
      m.label = {{"kind", g.kind}};
      m.gauge.value = static_cast<double>(g.regions);
      regions.metric.push_back(m);
      m.gauge.value = static_cast<double>(g.bytes);
      bytes.metric.push_back(m);
      m.gauge = {};
      m.counter.value = static_cast<double>(g.requests);
      requests.metric.push_back(m);
    }
    out->push_back(std::move(regions));
    out->push_back(std::move(bytes));
    out->push_back(std::move(requests));
  }

  static void CollectAdmission(const AdmissionGauges& a,
                               std::vector<prometheus::MetricFamily>* out) {
    out->push_back(GaugeFamily("sortd_inflight_requests",
                               "Requests admitted and not finished (queued or running).",
                               static_cast<double>(a.inflight_requests)));
    out->push_back(GaugeFamily("sortd_inflight_bytes", "Payload bytes reserved by admitted requests.",
                               static_cast<double>(a.inflight_bytes)));
    out->push_back(GaugeFamily("sortd_inflight_requests_limit", "--max_queued_requests.",
                               static_cast<double>(a.max_requests)));
    out->push_back(GaugeFamily("sortd_inflight_bytes_limit", "--max_inflight_bytes (resolved).",
                               static_cast<double>(a.max_bytes)));
    out->push_back(GaugeFamily("sortd_admission_waiting_requests",
                               "Requests waiting in the admission queue for room to run.",
                               static_cast<double>(a.waiting_requests)));
    out->push_back(GaugeFamily("sortd_admission_waiting_bytes",
                               "In-flight bytes the waiting requests ask for.",
                               static_cast<double>(a.waiting_bytes)));
    out->push_back(GaugeFamily("sortd_admission_waiting_held_bytes",
                               "Received payload held by waiting requests (bounded by "
                               "--max_waiting_bytes).",
                               static_cast<double>(a.waiting_held_bytes)));
    out->push_back(GaugeFamily("sortd_admission_waiting_requests_limit", "--max_queued_waits.",
                               static_cast<double>(a.max_waiting_requests)));
    prometheus::MetricFamily refusals{
        "sortd_admission_refusals_total",
        "Requests refused by admission control, by reason (too_large: over "
        "--max_inflight_bytes; queue_full; max_wait: waited --max_queue_wait; deadline; "
        "cancelled; shutdown).",
        prometheus::MetricType::Counter, {}};
    for (const auto& [reason, count] : a.refusals) {
      prometheus::ClientMetric m;
      m.label = {{"reason", reason}};
      m.counter.value = static_cast<double>(count);
      refusals.metric.push_back(m);
    }
    out->push_back(std::move(refusals));
  }

  std::function<AdmissionGauges()> admission_;
  mutable std::mutex mu_;
  std::function<uint64_t()> open_sessions_;
  std::function<uint64_t()> expired_sessions_;
  std::function<uint64_t()> sorted_arriving_;
  std::function<std::vector<RegionGauge>()> region_counts_;
};

ServiceMetrics::ServiceMetrics(std::shared_ptr<prometheus::Registry> registry,
                               const MetricsOptions& options)
    : registry_(std::move(registry)),
      requests_(prometheus::BuildCounter()
                    .Name("sortd_requests_total")
                    .Help("Finished requests (SortStream: per item) by method, key type and gRPC status code.")
                    .Register(*registry_)),
      duration_(prometheus::BuildHistogram()
                    .Name("sortd_request_duration_seconds")
                    .Help("Time from arrival to completion, by method and engine.")
                    .Register(*registry_)),
      queue_(prometheus::BuildHistogram()
                 .Name("sortd_queue_duration_seconds")
                 .Help("Time from arrival until a worker starts the request (the admission queue included; SortSession: until its memory was admitted).")
                 .Register(*registry_)),
      kernel_(prometheus::BuildHistogram()
                  .Name("sortd_gpu_kernel_duration_seconds")
                  .Help("GPU sort kernel time per launch, by GPU.")
                  .Register(*registry_)),
      transfer_(prometheus::BuildHistogram()
                    .Name("sortd_transfer_duration_seconds")
                    .Help("Host-device copy time per launch, by GPU and direction.")
                    .Register(*registry_)),
      keys_(prometheus::BuildCounter()
                .Name("sortd_keys_sorted_total")
                .Help("Keys sorted successfully, by engine.")
                .Register(*registry_)),
      bytes_received_(prometheus::BuildCounter()
                          .Name("sortd_bytes_received_total")
                          .Help("Payload bytes (keys + values) received, by method.")
                          .Register(*registry_)),
      bytes_sent_(prometheus::BuildCounter()
                      .Name("sortd_bytes_sent_total")
                      .Help("Payload bytes (keys, values, indices) sent, by method.")
                      .Register(*registry_)),
      batch_(prometheus::BuildHistogram()
                 .Name("sortd_batch_size")
                 .Help("Requests per engine launch (1 on the CPU engine).")
                 .Register(*registry_)),
      pool_bytes_(prometheus::BuildGauge()
                      .Name("sortd_device_pool_bytes")
                      .Help("Device memory held by the buffer pool, by GPU.")
                      .Register(*registry_)),
      fallbacks_(prometheus::BuildCounter()
                     .Name("sortd_gpu_fallbacks_total")
                     .Help("Requests routed to a GPU that did not complete there, by GPU and "
                           "reason (memory: over the device pool, sorted on the CPU; error: CUDA "
                           "error, sorted on the CPU or failed if output had started).")
                     .Register(*registry_)),
      in_rotation_(prometheus::BuildGauge()
                       .Name("sortd_gpu_in_rotation")
                       .Help("1 while the GPU takes new work; 0 from consecutive CUDA errors that took it "
                             "out of rotation until a job succeeds there again (after a cooldown it "
                             "gets jobs on probation).")
                       .Register(*registry_)),
      inflight_(std::make_shared<InflightCollector>()) {
  prometheus::BuildGauge()
      .Name("sortd_build_info")
      .Help("Build information; the value is always 1.")
      .Register(*registry_)
      .Add({{"version", options.version},
            {"git_commit", options.git_commit},
            {"cuda", options.cuda_built ? "true" : "false"}})
      .Set(1);
  prometheus::BuildGauge()
      .Name("sortd_gpu_devices")
      .Help("GPUs visible to the server.")
      .Register(*registry_)
      .Add({})
      .Set(options.gpu_devices);
  prometheus::BuildGauge()
      .Name("sortd_gpus_expected")
      .Help("GPUs this server is expected to have (--expect_gpus).")
      .Register(*registry_)
      .Add({})
      .Set(options.gpus_expected);
  // Series that exist from the start, so that dashboards and rates see
  // zeros rather than gaps.
  for (int m = 0; m < kRpcMethodCount; ++m) {
    const std::string method = RpcMethodName(static_cast<RpcMethod>(m));
    queue_cells_[m] = &queue_.Add({{"method", method}}, DurationBuckets());
    received_cells_[m] = &bytes_received_.Add({{"method", method}});
    sent_cells_[m] = &bytes_sent_.Add({{"method", method}});
  }
  for (int e = 0; e < 4; ++e) {
    keys_cells_[e] = &keys_.Add({{"engine", EngineLabel(e)}});
    batch_cells_[e] = &batch_.Add({{"engine", EngineLabel(e)}}, BatchBuckets());
  }
  for (int g = 0; g < options.gpu_devices; ++g) {
    kernel_cells_.push_back(&kernel_.Add({{"gpu", std::to_string(g)}}, DurationBuckets()));
    transfer_cells_.push_back({&transfer_.Add({{"gpu", std::to_string(g)}, {"direction", "h2d"}}, DurationBuckets()),
                               &transfer_.Add({{"gpu", std::to_string(g)}, {"direction", "d2h"}}, DurationBuckets())});
    pool_cells_.push_back(&pool_bytes_.Add({{"gpu", std::to_string(g)}}));
    fallback_cells_.push_back({&fallbacks_.Add({{"gpu", std::to_string(g)}, {"reason", "memory"}}),
                               &fallbacks_.Add({{"gpu", std::to_string(g)}, {"reason", "error"}})});
    rotation_cells_.push_back(&in_rotation_.Add({{"gpu", std::to_string(g)}}));
    rotation_cells_.back()->Set(1);
  }
}

ServiceMetrics::~ServiceMetrics() = default;

std::shared_ptr<prometheus::Collectable> ServiceMetrics::inflight_collectable() const {
  return inflight_;
}

prometheus::Counter& ServiceMetrics::RequestCounter(int method, int key_type, int code) {
  auto& cell = request_cells_[(method * kKeyTypes + key_type) * kCodes + code];
  return Cached(cell, [&]() -> prometheus::Counter& {
    return requests_.Add({{"method", RpcMethodName(static_cast<RpcMethod>(method))},
                          {"key_type", KeyTypeLabel(key_type)},
                          {"code", kCodeNames[code]}});
  });
}

prometheus::Histogram& ServiceMetrics::Duration(int method, int engine) {
  auto& cell = duration_cells_[method * kEngines + engine];
  return Cached(cell, [&]() -> prometheus::Histogram& {
    return duration_.Add({{"method", RpcMethodName(static_cast<RpcMethod>(method))},
                          {"engine", EngineLabel(engine)}},
                         DurationBuckets());
  });
}

void ServiceMetrics::Record(const RequestRecord& r) {
  const int method = static_cast<int>(r.method);
  const int key_type = r.key_type ? static_cast<int>(*r.key_type) : 7;
  int code = static_cast<int>(r.code);
  if (code < 0 || code >= kCodes) code = 2;  // UNKNOWN
  RequestCounter(method, key_type, code).Increment();
  Duration(method, EngineIndex(r.engine)).Observe(r.seconds);
  if (r.queue_seconds) queue_cells_[method]->Observe(*r.queue_seconds);
  if (r.bytes_received > 0) received_cells_[method]->Increment(static_cast<double>(r.bytes_received));
  if (r.bytes_sent > 0) sent_cells_[method]->Increment(static_cast<double>(r.bytes_sent));
  if (r.engine && r.keys_sorted > 0) {
    keys_cells_[static_cast<int>(*r.engine)]->Increment(static_cast<double>(r.keys_sorted));
  }
}

void ServiceMetrics::RecordBatch(EngineKind engine, size_t requests) {
  batch_cells_[static_cast<int>(engine)]->Observe(static_cast<double>(requests));
}

void ServiceMetrics::RecordKernel(int gpu, double seconds) {
  if (gpu >= 0 && gpu < static_cast<int>(kernel_cells_.size())) kernel_cells_[gpu]->Observe(seconds);
}

void ServiceMetrics::RecordTransfer(int gpu, bool host_to_device, double seconds) {
  if (gpu < 0 || gpu >= static_cast<int>(transfer_cells_.size())) return;
  transfer_cells_[gpu][host_to_device ? 0 : 1]->Observe(seconds);
}

void ServiceMetrics::SetDevicePoolBytes(int gpu, double bytes) {
  if (gpu >= 0 && gpu < static_cast<int>(pool_cells_.size())) pool_cells_[gpu]->Set(bytes);
}

void ServiceMetrics::RecordGpuFallback(int gpu, GpuFallbackReason reason) {
  if (gpu < 0 || gpu >= static_cast<int>(fallback_cells_.size())) return;
  fallback_cells_[gpu][reason == GpuFallbackReason::kMemory ? 0 : 1]->Increment();
}

void ServiceMetrics::SetGpuInRotation(int gpu, bool in_rotation) {
  if (gpu >= 0 && gpu < static_cast<int>(rotation_cells_.size())) rotation_cells_[gpu]->Set(in_rotation ? 1 : 0);
}

void ServiceMetrics::WatchAdmission(std::function<AdmissionGauges()> gauges) {
  inflight_->WatchAdmission(std::move(gauges));
}

void ServiceMetrics::WatchRegions(std::function<std::vector<RegionGauge>()> counts) {
  inflight_->WatchRegions(std::move(counts));
}

void ServiceMetrics::WatchSessions(std::function<uint64_t()> open,
                                   std::function<uint64_t()> expired,
                                   std::function<uint64_t()> sorted_arriving) {
  inflight_->WatchSessions(std::move(open), std::move(expired), std::move(sorted_arriving));
}

}  // namespace sortd
