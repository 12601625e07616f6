// The dynamic batcher: small numeric sort requests from every client wait
// in a queue per (key type, order, with or without indices) and launch
// together - on the GPU as one segmented sort, on the CPU as one pool task -
// when the queue holds a full batch or its oldest request has waited
// max_delay, as an inference server's dynamic batcher does
// (docs/architecture.md, "Batching").
#ifndef SORTD_SERVER_RUNTIME_BATCHER_H_
#define SORTD_SERVER_RUNTIME_BATCHER_H_

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/dispatcher.h"
#include "server/runtime/work_pool.h"

namespace sortd {

class ServiceMetrics;

struct BatcherOptions {
  bool enabled = true;
  // Requests of at most this many keys are batched (and at most what the
  // GPU kernel sorts in shared memory for the key type when batches run
  // on a GPU).
  size_t max_request_keys = 16384;
  // A batch launches as soon as it holds this many keys ...
  size_t max_batch_keys = size_t{1} << 20;
  // ... (CPU batches: this many, so one pool task stays short) ...
  size_t max_cpu_batch_keys = size_t{1} << 16;
  // ... or when its oldest request has waited this long.
  absl::Duration max_delay = absl::Microseconds(100);
  // Requests waiting in all queues together; past it, RESOURCE_EXHAUSTED.
  size_t max_queued_requests = 65536;
  // Batches inside the engine at once: GPU batches (the GPUs' stream
  // slots) and CPU batches (the CPU pool's threads); 0 = no limit. While
  // that many run, due requests keep waiting in their queue, where later
  // arrivals join them, instead of waiting for a slot as a small batch
  // that can no longer grow: under load batches grow to what the engine
  // can take; without load nothing changes.
  int max_running_gpu_batches = 0;
  int max_running_cpu_batches = 0;
};

class Batcher {
 public:
  using Clock = std::chrono::steady_clock;

  // One request's part of a batch. `keys_in`/`keys_out` and `indices`
  // must stay valid until `done` runs.
  struct Request {
    DataType type = DataType::kUint32;
    SortOrder order = SortOrder::kAscending;
    const void* keys_in = nullptr;
    void* keys_out = nullptr;
    size_t size = 0;
    absl::Span<uint64_t> indices;  // empty: no permutation wanted
    // Checked just before launch: true drops the request from its batch
    // (done gets CANCELLED) so it never holds its batch-mates back.
    std::function<bool()> cancelled;
    // Runs once, on a pool thread: the status, the engine that sorted,
    // the seconds from Enqueue to launch, and the batch's request count.
    std::function<void(const absl::Status&, EngineKind, double queue_seconds, size_t batch_size)> done;
  };

  Batcher(const BatcherOptions& options, Dispatcher* dispatcher, WorkPool* cpu_pool,
          WorkPool* gpu_pool, ServiceMetrics* metrics);
  // Launches everything still queued, waits for those batches, then stops.
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Whether a request of `size` keys of `type` goes through the batcher.
  bool Accepts(std::optional<DataType> type, size_t size) const;
  // Queues a request; RESOURCE_EXHAUSTED (and `done` is not called) when
  // the queues are full.
  absl::Status Enqueue(Request request);

  const BatcherOptions& options() const { return options_; }

  // Totals since start, for the shutdown log and benchmarks: batches run,
  // requests in them, and the CPU time (of the threads running batches)
  // spent inside the engine (gathering, transfers, waits, sorting) and
  // completing the requests afterwards (responses, metrics, writes).
  struct Stats {
    uint64_t batches = 0;
    uint64_t requests = 0;
    double engine_cpu_seconds = 0;
    double completion_cpu_seconds = 0;
  };
  Stats stats() const;

 private:
  struct Waiting {
    Request request;
    Clock::time_point enqueued;
  };
  struct Queue {
    std::vector<Waiting> items;
    size_t keys = 0;
  };
  static constexpr int kTypes = 6;  // numeric DataTypes
  static constexpr int kQueues = kTypes * 2 * 2;
  static int QueueIndex(DataType type, SortOrder order, bool indices);

  // Keys at which a queue launches: GPU or CPU batch size.
  size_t BatchCap() const;
  // Batches the engine that sorts them takes at once (0: no limit).
  int RunningLimit() const;
  void Run();
  // Hands a batch to a pool (called without mu_).
  void Launch(std::vector<Waiting> batch);
  void Execute(std::vector<Waiting> batch, Clock::time_point launched);

  const BatcherOptions options_;
  Dispatcher* dispatcher_;
  WorkPool* cpu_pool_;
  WorkPool* gpu_pool_;  // may be null (no GPU)
  ServiceMetrics* metrics_;
  const Clock::duration delay_;

  mutable std::mutex mu_;
  std::condition_variable wake_;       // the flush thread
  std::condition_variable idle_;       // the destructor: batches done
  std::array<Queue, kQueues> queues_;  // guarded by mu_
  size_t queued_ = 0;                  // guarded by mu_
  int running_ = 0;                    // batches launched, not done
  int in_engine_ = 0;                  // launched, engine not yet returned
  Stats stats_;                        // guarded by mu_
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sortd

#endif  // SORTD_SERVER_RUNTIME_BATCHER_H_
