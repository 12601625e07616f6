// Cost of recording one request's metrics on the hot path (issue: must stay
// within a few hundred nanoseconds), single-threaded and contended.
#include <benchmark/benchmark.h>

#include "server/metrics/metrics.h"

namespace {

sortd::ServiceMetrics& Metrics() {
  static auto* metrics = new sortd::ServiceMetrics(
      std::make_shared<prometheus::Registry>(), sortd::MetricsOptions{"bench", "bench", false, 0, 0});
  return *metrics;
}

void BM_RecordRequest(benchmark::State& state) {
  sortd::RequestRecord r;
  r.method = sortd::RpcMethod::kSort;
  r.key_type = sortd::DataType::kUint32;
  r.engine = sortd::EngineKind::kCpu;
  r.seconds = 0.0002;
  r.queue_seconds = 0.00001;
  r.bytes_received = 4096;
  r.bytes_sent = 4096;
  r.keys_sorted = 1024;
  for (auto _ : state) {
    Metrics().Record(r);
    Metrics().RecordBatch(sortd::EngineKind::kCpu, 1);
  }
}
BENCHMARK(BM_RecordRequest)->Threads(1)->Threads(2)->Threads(8);

}  // namespace

BENCHMARK_MAIN();
