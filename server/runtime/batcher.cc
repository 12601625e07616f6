// Batcher: one flush thread watches the queues' deadlines; a batch that is
// full or due is handed to the GPU pool (segmented sort) or the CPU pool,
// where cancelled requests are dropped, the rest sorted together and each
// completed on its own.
#include "server/runtime/batcher.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/metrics/metrics.h"

namespace sortd {
namespace {

// CPU time of the calling thread: what a batch costs the machine, spin
// waits included, unlike wall time.
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

Batcher::Batcher(const BatcherOptions& options, Dispatcher* dispatcher, WorkPool* cpu_pool,
                 WorkPool* gpu_pool, ServiceMetrics* metrics)
    : options_(options),
      dispatcher_(dispatcher),
      cpu_pool_(cpu_pool),
      gpu_pool_(gpu_pool),
      metrics_(metrics),
      delay_(std::chrono::duration_cast<Clock::duration>(absl::ToChronoNanoseconds(options.max_delay))) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "sortd-batcher");
    Run();
  });
}

Batcher::~Batcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();  // the flush thread launches what is queued before it exits
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return running_ == 0; });
}

int Batcher::QueueIndex(DataType type, SortOrder order, bool indices) {
  return (static_cast<int>(type) * 2 + (order == SortOrder::kDescending ? 1 : 0)) * 2 +
         (indices ? 1 : 0);
}

bool Batcher::Accepts(std::optional<DataType> type, size_t size) const {
  if (!options_.enabled || !type || *type == DataType::kBytes) return false;
  return size <= std::min(options_.max_request_keys, dispatcher_->BatchCapacity(*type));
}

absl::Status Batcher::Enqueue(Request request) {
  const int q = QueueIndex(request.type, request.order, !request.indices.empty());
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::UnavailableError("server is shutting down (batcher stopped)");
    if (queued_ >= options_.max_queued_requests) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "batch queue full: ", queued_, " small requests waiting (--max_batch_queue)"));
    }
    Queue& queue = queues_[q];
    // The flush thread sleeps until the earliest deadline: a first request
    // brings a new deadline; a full queue launches now.
    wake = queue.items.empty();
    queue.keys += request.size;
    queue.items.push_back(Waiting{std::move(request), Clock::now()});
    ++queued_;
    wake = wake || queue.keys >= BatchCap();
  }
  if (wake) wake_.notify_one();
  return absl::OkStatus();
}

size_t Batcher::BatchCap() const {
  return dispatcher_->BatchesOnGpu() ? options_.max_batch_keys : options_.max_cpu_batch_keys;
}

Batcher::Stats Batcher::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

int Batcher::RunningLimit() const {
  return dispatcher_->BatchesOnGpu() ? options_.max_running_gpu_batches
                                     : options_.max_running_cpu_batches;
}

void Batcher::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    const Clock::time_point now = Clock::now();
    const size_t cap = BatchCap();
    const int limit = stopping_ ? 0 : RunningLimit();
    Clock::time_point next = Clock::time_point::max();
    // Queues with a full or due batch, oldest first, so that a free slot
    // goes to the request that has waited longest.
    std::vector<Queue*> ready;
    for (Queue& queue : queues_) {
      if (queue.items.empty()) continue;
      const Clock::time_point deadline = queue.items.front().enqueued + delay_;
      if (stopping_ || queue.keys >= cap || now >= deadline) {
        ready.push_back(&queue);
      } else {
        next = std::min(next, deadline);
      }
    }
    std::sort(ready.begin(), ready.end(), [](const Queue* a, const Queue* b) {
      return a->items.front().enqueued < b->items.front().enqueued;
    });
    std::vector<std::vector<Waiting>> due;
    for (Queue* queue : ready) {
      // Every slot busy: the rest wait for a batch to leave the engine
      // (Execute wakes this thread), still collecting arrivals.
      if (limit > 0 && in_engine_ + static_cast<int>(due.size()) >= limit) {
        break;
      }
      // One batch of at most `cap` keys (a request is never split).
      std::vector<Waiting> batch;
      size_t keys = 0;
      size_t i = 0;
      for (; i < queue->items.size(); ++i) {
        const size_t size = queue->items[i].request.size;
        if (!batch.empty() && keys + size > cap) break;
        keys += size;
        batch.push_back(std::move(queue->items[i]));
      }
      queue->items.erase(queue->items.begin(), queue->items.begin() + static_cast<std::ptrdiff_t>(i));
      queue->keys -= keys;
      queued_ -= batch.size();
      due.push_back(std::move(batch));
    }
    if (!due.empty()) {
      running_ += static_cast<int>(due.size());
      in_engine_ += static_cast<int>(due.size());
      lock.unlock();
      for (std::vector<Waiting>& batch : due) Launch(std::move(batch));
      lock.lock();
      continue;  // look again: a queue may hold more than one batch
    }
    if (stopping_) return;  // every queue is empty
    if (!ready.empty()) next = Clock::time_point::max();  // slots full: Execute wakes us
    if (next == Clock::time_point::max()) {
      wake_.wait(lock);
    } else {
      wake_.wait_until(lock, next);
    }
  }
}

void Batcher::Launch(std::vector<Waiting> batch) {
  const Clock::time_point launched = Clock::now();
  WorkPool* pool = dispatcher_->BatchesOnGpu() && gpu_pool_ != nullptr ? gpu_pool_ : cpu_pool_;
  // std::function needs a copyable callable: the batch travels in a
  // shared_ptr.
  auto shared = std::make_shared<std::vector<Waiting>>(std::move(batch));
  pool->Submit([this, shared, launched] { Execute(std::move(*shared), launched); });
}

void Batcher::Execute(std::vector<Waiting> batch, Clock::time_point launched) {
  auto seconds = [](Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double>(to - from).count();
  };
  // The batch has left the engine (or never needed it): its slot is free
  // for the flush thread's next batch.
  auto leave_engine = [this] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      --in_engine_;
    }
    wake_.notify_one();
  };
  std::vector<Waiting> live;
  live.reserve(batch.size());
  for (Waiting& w : batch) {
    if (w.request.cancelled && w.request.cancelled()) {
      w.request.done(absl::CancelledError("request cancelled or deadline exceeded before its batch ran"),
                     EngineKind::kCpu, seconds(w.enqueued, launched), 0);
    } else {
      live.push_back(std::move(w));
    }
  }
  if (live.empty()) {
    leave_engine();
  } else {
    std::vector<BatchItem> items(live.size());
    for (size_t i = 0; i < live.size(); ++i) {
      const Request& r = live[i].request;
      items[i] = BatchItem{r.keys_in, r.keys_out, r.size, r.indices};
    }
    const Request& first = live.front().request;
    const double cpu_start = ThreadCpuSeconds();
    absl::StatusOr<EngineKind> engine = dispatcher_->SortBatch(first.type, first.order, items);
    const double cpu_sorted = ThreadCpuSeconds();
    leave_engine();
    if (engine.ok() && metrics_ != nullptr) metrics_->RecordBatch(*engine, live.size());
    for (Waiting& w : live) {
      w.request.done(engine.status(), engine.ok() ? *engine : EngineKind::kCpu,
                     seconds(w.enqueued, launched), live.size());
    }
    const double cpu_done = ThreadCpuSeconds();
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.batches;
    stats_.requests += live.size();
    stats_.engine_cpu_seconds += cpu_sorted - cpu_start;
    stats_.completion_cpu_seconds += cpu_done - cpu_sorted;
  }
  // Notified under the lock: once the destructor sees running_ == 0 it
  // destroys idle_, so no notify may still be on its way (TSan found one).
  std::lock_guard<std::mutex> lock(mu_);
  --running_;
  idle_.notify_all();
}

}  // namespace sortd
