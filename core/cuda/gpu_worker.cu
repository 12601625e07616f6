// GPU worker: slots (stream + device buffers + pinned staging), pooled
// device memory grown on demand up to a cap, the job kinds (plan, lease,
// upload, sort, download; the transfers themselves are in
// core/cuda/host_transfer.cuh), and error classification (out of memory
// and errors before any output leave the host arrays intact, so the caller
// can fall back).
#include "core/cuda/gpu_worker.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

#include "core/cuda/host_transfer.cuh"
#include "core/cuda/merge_sort.cuh"
#include "core/cuda/radix_kernels.cuh"
#include "core/cuda/segmented_sort.cuh"
#include "core/key_transform.h"

namespace sortd::cuda {
namespace {

constexpr size_t kAlign = 256;
size_t AlignUp(size_t x, size_t a = kAlign) { return (x + a - 1) / a * a; }
// Device buffers grow in steps of this size so that slightly larger
// requests reuse them.
constexpr size_t kGrowStep = size_t{64} << 20;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct Slot {
  cudaStream_t stream = nullptr;
  cudaEvent_t upload_start = nullptr, sort_start = nullptr, sort_stop = nullptr;
  cudaEvent_t chunk_done[2] = {nullptr, nullptr};
  void* staging[2] = {nullptr, nullptr};  // pinned host
  char* device = nullptr;
  size_t device_bytes = 0;
  bool busy = false;
  bool arriving = false;  // kept for SortArriving jobs
};

// Sub-buffers of one slot's device allocation for one job.
struct Layout {
  size_t keys_in, keys_out, index_in, index_out, temp, temp_bytes, total;
};

}  // namespace

struct GpuWorker::State {
  GpuWorkerOptions options;
  size_t max_pool_bytes = 0;
  std::mutex mu;
  std::condition_variable slot_free;
  std::vector<Slot> slots;
  size_t pool_bytes = 0;  // guarded by mu
  std::atomic<size_t> pool_bytes_seen{0};
  std::atomic<bool> healthy{true};
  std::atomic<int> in_flight{0};

  ~State() {
    cudaSetDevice(options.device);
    for (Slot& s : slots) {
      if (s.stream != nullptr) cudaStreamSynchronize(s.stream);
      cudaFree(s.device);
      for (void* p : s.staging) cudaFreeHost(p);
      for (cudaEvent_t e : {s.upload_start, s.sort_start, s.sort_stop, s.chunk_done[0], s.chunk_done[1]}) {
        if (e != nullptr) cudaEventDestroy(e);
      }
      if (s.stream != nullptr) cudaStreamDestroy(s.stream);
    }
  }

  // Device bytes held by busy slots other than `slot` (they cannot be
  // released now).
  size_t BusyBytes(const Slot* except) const {
    size_t bytes = 0;
    for (const Slot& s : slots) {
      if (&s != except && s.busy) bytes += s.device_bytes;
    }
    return bytes;
  }

  // Makes `slot` hold at least `needed` device bytes within the pool cap,
  // releasing idle slots' buffers (largest first) only as far as needed.
  // Called with mu held; the caller has checked BusyBytes(&slot) + needed
  // <= max_pool_bytes, so releasing idle buffers always makes room.
  // (cudaMalloc/cudaFree under the lock: growth is rare, buffers are reused.)
  cudaError_t EnsureDevice(Slot& slot, size_t needed) {
    if (slot.device_bytes >= needed) return cudaSuccess;
    auto release = [&](Slot& s) {
      cudaFree(s.device);
      pool_bytes -= s.device_bytes;
      s.device = nullptr;
      s.device_bytes = 0;
    };
    release(slot);
    while (pool_bytes + needed > max_pool_bytes) {
      Slot* largest = nullptr;
      for (Slot& s : slots) {
        if (s.busy || s.device == nullptr) continue;
        if (largest == nullptr || s.device_bytes > largest->device_bytes) largest = &s;
      }
      if (largest == nullptr) break;
      release(*largest);
    }
    cudaError_t err = cudaErrorMemoryAllocation;
    if (pool_bytes + needed <= max_pool_bytes) {
      const size_t grown = std::min(AlignUp(needed, kGrowStep), max_pool_bytes - pool_bytes);
      void* p = nullptr;
      err = cudaMalloc(&p, grown);
      if (err == cudaSuccess) {
        slot.device = static_cast<char*>(p);
        slot.device_bytes = grown;
        pool_bytes += grown;
      } else {
        cudaGetLastError();  // not sticky: clear it
      }
    }
    pool_bytes_seen = pool_bytes;
    return err;
  }
};

std::unique_ptr<GpuWorker> GpuWorker::Create(const GpuWorkerOptions& options, std::string* error) {
  auto fail = [&](const char* what, cudaError_t err) -> std::unique_ptr<GpuWorker> {
    if (error != nullptr) {
      *error = std::string("GPU ") + std::to_string(options.device) + ": " + what + ": " +
               cudaGetErrorString(err);
    }
    return nullptr;
  };
  auto state = std::make_unique<State>();
  state->options = options;
  state->options.slots = std::max(1, options.slots);
  state->options.staging_chunk_bytes = AlignUp(std::max<size_t>(options.staging_chunk_bytes, 1 << 16), 1 << 16);
  cudaError_t err = cudaSetDevice(options.device);
  if (err != cudaSuccess) return fail("cudaSetDevice", err);
  size_t free_bytes = 0, total_bytes = 0;
  err = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (err != cudaSuccess) return fail("cudaMemGetInfo", err);
  state->max_pool_bytes =
      options.max_pool_bytes != 0 ? options.max_pool_bytes : free_bytes / 10 * 8;
  state->options.arriving_slots = std::max(0, options.arriving_slots);
  state->slots.resize(state->options.slots + state->options.arriving_slots);
  for (int i = 0; i < state->options.arriving_slots; ++i) {
    state->slots[state->options.slots + i].arriving = true;
  }
  // Every wait of a job is on a chunk_done event (the last download's
  // also times the transfer back, so these keep timing).
  const unsigned wait_flag = options.blocking_wait ? cudaEventBlockingSync : 0u;
  for (Slot& s : state->slots) {
    if ((err = cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking)) != cudaSuccess) {
      return fail("cudaStreamCreate", err);
    }
    for (cudaEvent_t* e : {&s.upload_start, &s.sort_start, &s.sort_stop}) {
      if ((err = cudaEventCreateWithFlags(e, wait_flag)) != cudaSuccess) {
        return fail("cudaEventCreate", err);
      }
    }
    for (cudaEvent_t& e : s.chunk_done) {
      if ((err = cudaEventCreateWithFlags(&e, wait_flag)) != cudaSuccess) {
        return fail("cudaEventCreate", err);
      }
    }
    for (void*& p : s.staging) {
      if ((err = cudaMallocHost(&p, state->options.staging_chunk_bytes)) != cudaSuccess) {
        return fail("cudaMallocHost (staging)", err);
      }
    }
  }
  return std::unique_ptr<GpuWorker>(new GpuWorker(std::move(state)));
}

GpuWorker::GpuWorker(std::unique_ptr<State> state) : state_(std::move(state)) {}
GpuWorker::~GpuWorker() = default;

int GpuWorker::device() const { return state_->options.device; }
bool GpuWorker::healthy() const { return state_->healthy.load(); }
int GpuWorker::in_flight() const { return state_->in_flight.load(); }
size_t GpuWorker::pool_bytes() const { return state_->pool_bytes_seen.load(); }
size_t GpuWorker::max_pool_bytes() const { return state_->max_pool_bytes; }

// What Sort and SortBatch share: the in-flight count, waiting for a slot
// with room in the pool, releasing it, and turning CUDA errors into
// outcomes (a sticky error marks the worker unhealthy).
class GpuWorker::Job {
 public:
  explicit Job(State& st) : st_(st) { st_.in_flight.fetch_add(1); }
  ~Job() {
    if (slot_ != nullptr) {
      {
        std::lock_guard<std::mutex> lock(st_.mu);
        slot_->busy = false;
      }
      // Waiters differ in the memory they need: let each re-check.
      st_.slot_free.notify_all();
    }
    st_.in_flight.fetch_sub(1);
  }

  GpuSortReport& report() { return report_; }
  // Error-message prefix, built only when a message is.
  std::string where() const { return "GPU " + std::to_string(st_.options.device) + ": "; }

  // Outcomes that leave the host arrays as they were, unless the job
  // already wrote output (then the request fails).
  bool Refused() {
    if (st_.healthy.load()) return false;
    report_.outcome = output_started_ ? GpuSortOutcome::kFailedDirty : GpuSortOutcome::kFailedIntact;
    report_.message = where() + "unavailable after an earlier device error";
    return true;
  }

  GpuSortReport NoMemory(size_t needed) {
    report_.outcome = output_started_ ? GpuSortOutcome::kFailedDirty : GpuSortOutcome::kNoMemory;
    report_.message = where() + "needs " + std::to_string(needed >> 20) +
                      " MiB of device memory; the pool is limited to " +
                      std::to_string(st_.max_pool_bytes >> 20) + " MiB";
    return report_;
  }

  // Waits for a free slot and for the busy slots to leave room for `total`
  // bytes (a job that fits the pool waits for memory instead of leaving the
  // GPU), then makes the slot's buffer large enough.
  cudaError_t Acquire(size_t total) {
    cudaError_t err = cudaSetDevice(st_.options.device);
    if (err != cudaSuccess) return err;
    std::unique_lock<std::mutex> lock(st_.mu);
    st_.slot_free.wait(lock, [&] {
      for (Slot& s : st_.slots) {
        if (!s.arriving && !s.busy && st_.BusyBytes(&s) + total <= st_.max_pool_bytes) {
          slot_ = &s;
          return true;
        }
      }
      return false;
    });
    slot_->busy = true;
    err = st_.EnsureDevice(*slot_, total);
    report_.pool_bytes = st_.pool_bytes;
    return err;
  }

  // An arriving slot with room for `total` bytes, without waiting:
  // cudaErrorNotReady when none is free now.
  cudaError_t AcquireArriving(size_t total) {
    cudaError_t err = cudaSetDevice(st_.options.device);
    if (err != cudaSuccess) return err;
    std::lock_guard<std::mutex> lock(st_.mu);
    for (Slot& s : st_.slots) {
      if (s.arriving && !s.busy && st_.BusyBytes(&s) + total <= st_.max_pool_bytes) {
        slot_ = &s;
        break;
      }
    }
    if (slot_ == nullptr) return cudaErrorNotReady;
    slot_->busy = true;
    err = st_.EnsureDevice(*slot_, total);
    report_.pool_bytes = st_.pool_bytes;
    return err;
  }

  GpuSortReport Finished(GpuSortOutcome outcome, const char* why) {
    report_.outcome = outcome;
    report_.message = where() + why;
    return report_;
  }

  // Acquire() for `total` device bytes, or the report to return: out of
  // memory when the pool can never hold it or the device has no room.
  std::optional<GpuSortReport> Reserve(size_t total) {
    // Never fits: do not queue behind GPU work.
    if (total > st_.max_pool_bytes) return NoMemory(total);
    const cudaError_t err = Acquire(total);
    if (err == cudaErrorMemoryAllocation) return NoMemory(total);
    if (err != cudaSuccess) return Fail(err, "preparing the device");
    return std::nullopt;
  }

  Slot& slot() { return *slot_; }
  size_t chunk() const { return st_.options.staging_chunk_bytes; }
  void OutputStarted() { output_started_ = true; }
  // The error GpuWorkerOptions::fault_hook injects at `step`, if any.
  cudaError_t Injected(const char* step) const {
    return st_.options.fault_hook ? static_cast<cudaError_t>(st_.options.fault_hook(step))
                                  : cudaSuccess;
  }

  GpuSortReport Fail(cudaError_t e, const char* step) {
    report_.outcome = output_started_ ? GpuSortOutcome::kFailedDirty : GpuSortOutcome::kFailedIntact;
    report_.message = where() + step + ": " + cudaGetErrorString(e);
    // A sticky error leaves the context unusable: stop taking work.
    if (cudaDeviceSynchronize() != cudaSuccess) {
      report_.device_lost = true;
      st_.healthy.store(false);
    } else {
      cudaGetLastError();
    }
    return report_;
  }

  // Device -> host of `bytes` at `dev` through the slot's staging chunks
  // (Download). The copy is queued behind the sort on the stream, so a job
  // waits once, for its data, not first for the kernel and then again for
  // the copy. The output counts as started when the first bytes reach the
  // caller's arrays: an error before that (the sort's included) leaves them
  // intact.
  template <typename Consume>
  cudaError_t DownloadOutput(const void* dev, size_t bytes, Consume consume) {
    return Download(
        *slot_, chunk(), dev, bytes,
        [&](const void* staged, size_t off, size_t len) {
          output_started_ = true;
          const auto start = std::chrono::steady_clock::now();
          consume(staged, off, len);
          copy_out_seconds_ += SecondsSince(start);
        },
        &last_download_);
  }

  // Device -> host of `bytes`: DownloadDirect into pinned memory, else a
  // plain copy out of the staging chunks (DownloadOutput).
  cudaError_t DownloadTo(const void* dev, void* host, size_t bytes, bool pinned) {
    if (pinned) return DownloadDirect(dev, host, bytes);
    char* dst = static_cast<char*>(host);
    return DownloadOutput(dev, bytes, [dst](const void* staged, size_t off, size_t len) {
      std::memcpy(dst + off, staged, len);
    });
  }

  // Device -> pinned host memory in one DMA (no staging, no host copy).
  cudaError_t DownloadDirect(const void* dev, void* host, size_t bytes) {
    output_started_ = true;
    cudaEvent_t done = slot_->chunk_done[0];
    cudaError_t err = cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDefault, slot_->stream);
    if (err == cudaSuccess) err = cudaEventRecord(done, slot_->stream);
    if (err == cudaSuccess) err = cudaEventSynchronize(done);
    last_download_ = done;
    return err;
  }

  // Timing from the slot's events, once every download is done: upload,
  // sort, and back to host memory (the device's transfer span after the
  // sort plus the host's copies out of staging).
  void RecordTimes() {
    float upload_ms = 0, sort_ms = 0, download_ms = 0;
    cudaEventElapsedTime(&upload_ms, slot_->upload_start, slot_->sort_start);
    cudaEventElapsedTime(&sort_ms, slot_->sort_start, slot_->sort_stop);
    if (last_download_ != nullptr) {
      cudaEventElapsedTime(&download_ms, slot_->sort_stop, last_download_);
    }
    report_.h2d_seconds = upload_ms / 1e3;
    report_.kernel_seconds = sort_ms / 1e3;
    report_.d2h_seconds = download_ms / 1e3 + copy_out_seconds_;
  }

 private:
  State& st_;
  Slot* slot_ = nullptr;
  GpuSortReport report_;
  bool output_started_ = false;
  cudaEvent_t last_download_ = nullptr;
  double copy_out_seconds_ = 0;
};

namespace {

// Device bytes of a sort of n keys on one slot: keys in/out, indices in/out
// (radix: 4 or 8 bytes; merge argsort: 4-byte positions out only), temp.
struct SortPlan {
  bool merge = false;
  size_t index_bytes = 0;
  RadixSortProblem radix;
  MergeSortProblem merge_problem;
  Layout layout{};
};

// `indices_pinned`: job.indices is copied directly (MemoryKindOf, asked
// once per job by the caller). `value_bytes` (jobs with values): the radix
// payload is the caller's values of that width instead of positions.
cudaError_t PlanSort(const GpuSortJob& job, size_t n, bool indices_pinned, SortPlan& plan,
                     int value_bytes = 0) {
  const size_t key_bytes = RadixKeyBytes(job.key_type);
  plan.merge = job.prefer_merge && job.indices != nullptr && n < (size_t{1} << 32);
  // 4-byte positions are widened to the caller's uint64 on the host, in the
  // staging copy; pinned destinations (sort sessions) take 8-byte ones by
  // DMA instead, which costs less than a host pass for large arrays.
  plan.index_bytes = value_bytes != 0                                              ? value_bytes
                     : job.indices == nullptr                                      ? 0
                     : (n < (size_t{1} << 32) && (plan.merge || !indices_pinned)) ? 4
                                                                                  : 8;
  Layout& l = plan.layout;
  l.keys_in = 0;
  l.keys_out = l.keys_in + AlignUp(n * key_bytes);
  l.index_in = l.keys_out + AlignUp(n * key_bytes);
  l.index_out = l.index_in + (plan.merge ? 0 : AlignUp(n * plan.index_bytes));
  l.temp = l.index_out + AlignUp(n * plan.index_bytes);
  cudaError_t err;
  if (plan.merge) {
    MergeSortProblem& p = plan.merge_problem;
    p.key_type = job.key_type;
    p.num_items = n;
    p.descending = job.descending;
    // Sizing depends on whether positions are wanted; the real address is
    // set once the slot's buffer is known.
    static uint32_t sizing_placeholder;
    p.d_indices_out = &sizing_placeholder;
    err = MergeSort(nullptr, l.temp_bytes, p, nullptr);
  } else {
    RadixSortProblem& p = plan.radix;
    p.key_type = job.key_type;
    p.num_items = n;
    p.descending = job.descending;
    p.value_bytes = static_cast<int>(plan.index_bytes);
    err = RadixSort(nullptr, l.temp_bytes, p, nullptr);
  }
  l.total = l.temp + AlignUp(l.temp_bytes);
  return err;
}

// Out-of-core sorts: chunks smaller than this are not worth a GPU round
// trip each (the CPU engine serves instead).
constexpr size_t kMinChunkItems = size_t{1} << 16;

// Device bytes of merging one block of m keys (keys and 8-byte indices in
// and out, and the merge's scratch copies), with room for the pass plan.
size_t MergeBlockBytes(size_t m, size_t key_bytes, bool indices) {
  const size_t per_key = 3 * (key_bytes + (indices ? 8 : 0));
  return m * per_key + (size_t{4} << 20);
}

// Points the plan's problem at the slot's device buffer.
void PlaceOnDevice(SortPlan& plan, char* base) {
  const Layout& l = plan.layout;
  RadixSortProblem& radix = plan.radix;
  MergeSortProblem& merge = plan.merge_problem;
  radix.d_keys_in = merge.d_keys_in = base + l.keys_in;
  radix.d_keys_out = merge.d_keys_out = base + l.keys_out;
  radix.d_values_in = plan.index_bytes ? base + l.index_in : nullptr;
  radix.d_values_out = plan.index_bytes ? base + l.index_out : nullptr;
  if (plan.merge) merge.d_indices_out = reinterpret_cast<uint32_t*>(base + l.index_out);
}

// Fills the radix payload with positions 0..n-1 (an argsort's indices).
cudaError_t StartPositions(const SortPlan& plan, char* base, size_t n, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(std::min<size_t>((n + 255) / 256, 4096));
  if (plan.index_bytes == 4) {
    IotaKernel<uint32_t><<<blocks, 256, 0, stream>>>(
        reinterpret_cast<uint32_t*>(base + plan.layout.index_in), n);
  } else if (plan.index_bytes == 8) {
    IotaKernel<uint64_t><<<blocks, 256, 0, stream>>>(
        reinterpret_cast<uint64_t*>(base + plan.layout.index_in), n);
  }
  return cudaGetLastError();
}

// Where a sort's results go on the host: the keys in place, and the radix
// payload (the plan's index_out) into indices (4-byte positions widened) or
// into the caller's values.
struct HostResults {
  void* keys = nullptr;
  bool keys_pinned = false;
  void* payload = nullptr;  // null: keys only
  bool payload_pinned = false;
  bool widen_positions = false;
};

// Sorts what the job uploaded (on the slot's stream, behind the upload) and
// brings the results back: DMA into pinned destinations, else through the
// staging chunks. `Run` is GpuWorker::Job.
template <typename Run>
GpuSortReport SortAndDownload(Run& run, SortPlan& plan, size_t n, size_t key_bytes,
                              const HostResults& out) {
  Slot& s = run.slot();
  char* base = s.device;
  const Layout& l = plan.layout;
  size_t temp_bytes = l.temp_bytes;
  cudaError_t err = plan.merge ? MergeSort(base + l.temp, temp_bytes, plan.merge_problem, s.stream)
                               : RadixSort(base + l.temp, temp_bytes, plan.radix, s.stream);
  if (err == cudaSuccess) err = run.Injected("sort");
  if (err != cudaSuccess) return run.Fail(err, plan.merge ? "merge sort" : "radix sort");
  if ((err = cudaEventRecord(s.sort_stop, s.stream)) != cudaSuccess) return run.Fail(err, "event");
  err = run.DownloadTo(base + l.keys_out, out.keys, n * key_bytes, out.keys_pinned);
  if (err == cudaSuccess) err = run.Injected("download");
  if (err != cudaSuccess) return run.Fail(err, "sort or device to host copy");
  if (out.payload != nullptr && out.widen_positions) {
    uint64_t* indices = static_cast<uint64_t*>(out.payload);
    err = run.DownloadOutput(base + l.index_out, n * 4,
                             [&](const void* staged, size_t off, size_t len) {
                               WidenPositions(staged, len / 4, indices + off / 4);
                             });
  } else if (out.payload != nullptr) {
    err = run.DownloadTo(base + l.index_out, out.payload, n * plan.index_bytes,
                         out.payload_pinned);
  }
  if (err != cudaSuccess) return run.Fail(err, "device to host copy");
  run.RecordTimes();
  return run.report();
}

}  // namespace

GpuSortReport GpuWorker::Sort(const GpuSortJob& job) {
  State& st = *state_;
  const size_t n = job.num_items;
  SortPlan plan;
  // Pinned host arrays (sort sessions' buffers, shared-memory regions) and
  // device memory (CUDA IPC regions) move by DMA alone.
  // One pointer query per array: it decides the copies and whether the
  // host may touch the array at all.
  const bool with_values = job.values != nullptr;
  auto kind_of = [n](const void* array) {
    return n > 0 && array != nullptr ? MemoryKindOf(array) : MemoryKind::kPageable;
  };
  const MemoryKind keys_kind = kind_of(job.keys);
  const MemoryKind indices_kind = kind_of(job.indices);
  const MemoryKind values_kind = kind_of(job.values);
  const bool keys_pinned = CopiesDirectly(keys_kind);
  const bool indices_pinned = CopiesDirectly(indices_kind);
  const bool values_pinned = CopiesDirectly(values_kind);
  if (with_values && ((job.value_bytes != 4 && job.value_bytes != 8) || job.indices != nullptr)) {
    Job run(st);
    return run.Finished(GpuSortOutcome::kFailedIntact, "values of 4 or 8 bytes, without indices");
  }
  // Device-resident arrays are never touched by the host (no staging, no
  // chunked merge), and merge-sorted argsorts widen positions on the host.
  const bool on_device = keys_kind == MemoryKind::kDevice ||
                         indices_kind == MemoryKind::kDevice ||
                         values_kind == MemoryKind::kDevice;
  GpuSortJob planned = job;
  if (on_device || with_values) planned.prefer_merge = false;
  if (n > 0) {
    const cudaError_t err =
        PlanSort(planned, n, indices_pinned, plan, with_values ? job.value_bytes : 0);
    if (err != cudaSuccess) {
      Job run(st);
      return run.Fail(err, "sizing the sort");
    }
    if (plan.layout.total > st.max_pool_bytes && (on_device || with_values)) {
      Job run(st);
      return run.NoMemory(plan.layout.total);
    }
    if (plan.layout.total > st.max_pool_bytes) {
      // Larger than the pool: chunks of half the pool at most (the other
      // slots keep working), sorted and then merged on the GPU.
      const size_t key_bytes = RadixKeyBytes(job.key_type);
      size_t chunk = size_t{1} << 62;
      while (chunk * 2 > n) chunk /= 2;
      for (; chunk >= kMinChunkItems; chunk /= 2) {
        SortPlan chunk_plan;
        GpuSortJob chunk_job = job;
        chunk_job.prefer_merge = false;
        if (PlanSort(chunk_job, chunk, indices_pinned, chunk_plan) != cudaSuccess) break;
        if (chunk_plan.layout.total <= st.max_pool_bytes / 2 &&
            MergeBlockBytes(chunk, key_bytes, job.indices != nullptr) <= st.max_pool_bytes / 2) {
          return SortInChunks(job, chunk);
        }
      }
    }
  }
  Job run(st);
  if (run.Refused()) return run.report();
  if (n == 0) return run.report();
  const Layout& l = plan.layout;
  const size_t key_bytes = RadixKeyBytes(job.key_type);
  const size_t index_bytes = plan.index_bytes;
  if (auto failed = run.Reserve(l.total)) return *failed;
  cudaError_t err = cudaSuccess;
  Slot& s = run.slot();
  char* base = s.device;
  PlaceOnDevice(plan, base);
  // The merge sort generates positions itself; values are the payload.
  if (!plan.merge && !with_values &&
      (err = StartPositions(plan, base, n, s.stream)) != cudaSuccess) {
    return run.Fail(err, "iota");
  }
  if ((err = cudaEventRecord(s.upload_start, s.stream)) != cudaSuccess) return run.Fail(err, "event");
  // The staging chunks alternate across the keys' and the values' uploads.
  unsigned staging_turn = 0;
  err = UploadFrom(s, run.chunk(), base + l.keys_in, job.keys, n * key_bytes, keys_pinned,
                   &staging_turn);
  if (err == cudaSuccess && with_values) {
    err = UploadFrom(s, run.chunk(), base + l.index_in, job.values, n * index_bytes,
                     values_pinned, &staging_turn);
  }
  if (err != cudaSuccess) return run.Fail(err, "host to device copy");
  if ((err = cudaEventRecord(s.sort_start, s.stream)) != cudaSuccess) return run.Fail(err, "event");
  HostResults out;
  out.keys = job.keys;
  out.keys_pinned = keys_pinned;
  out.payload = with_values ? job.values : static_cast<void*>(job.indices);
  out.payload_pinned = with_values ? values_pinned : indices_pinned;
  out.widen_positions = !with_values && index_bytes == 4;
  return SortAndDownload(run, plan, n, key_bytes, out);
}

GpuSortReport GpuWorker::SortArriving(const GpuArrivingJob& job) {
  State& st = *state_;
  const size_t n = job.num_items;
  Job run(st);
  if (run.Refused()) return run.report();
  if (n == 0 || job.input == nullptr) return run.Finished(GpuSortOutcome::kBusy, "nothing arriving");
  const bool with_values = job.values != nullptr;
  if (with_values && ((job.value_bytes != 4 && job.value_bytes != 8) || job.indices != nullptr)) {
    return run.Finished(GpuSortOutcome::kBusy, "values of 4 or 8 bytes, without indices");
  }
  GpuSortJob sort;
  sort.key_type = job.key_type;
  sort.descending = job.descending;
  sort.num_items = n;
  sort.keys = job.keys;
  sort.indices = job.indices;
  const bool keys_pinned = CopiesDirectly(MemoryKindOf(job.keys));
  const bool values_pinned = with_values && CopiesDirectly(MemoryKindOf(job.values));
  const bool indices_pinned = job.indices != nullptr && CopiesDirectly(MemoryKindOf(job.indices));
  SortPlan plan;
  cudaError_t err = PlanSort(sort, n, indices_pinned, plan, with_values ? job.value_bytes : 0);
  if (err != cudaSuccess) return run.Fail(err, "sizing the sort");
  const Layout& l = plan.layout;
  // Larger than the pool: Sort takes it in chunks once it is complete.
  if (l.total > st.max_pool_bytes) return run.NoMemory(l.total);
  err = run.AcquireArriving(l.total);
  if (err == cudaErrorNotReady || err == cudaErrorMemoryAllocation) {
    return run.Finished(GpuSortOutcome::kBusy, "no arriving slot with room free now");
  }
  if (err != cudaSuccess) return run.Fail(err, "preparing the device");
  Slot& s = run.slot();
  char* base = s.device;
  PlaceOnDevice(plan, base);
  if (!with_values && (err = StartPositions(plan, base, n, s.stream)) != cudaSuccess) {
    return run.Fail(err, "iota");
  }
  // Each range goes to the device as it lands: by DMA from pinned memory
  // (queued; the bytes are never written again before the sort), else
  // through the staging chunks.
  const size_t key_bytes = RadixKeyBytes(job.key_type);
  unsigned staging_turn = 0;
  auto upload = [&](const ArrivedRange& r) {
    const bool keys = r.array == ArrivedRange::kKeys;
    const size_t width = keys ? key_bytes : static_cast<size_t>(job.value_bytes);
    const char* src = static_cast<const char*>(keys ? job.keys : job.values) + r.begin * width;
    char* dst = base + (keys ? l.keys_in : l.index_in) + r.begin * width;
    return UploadFrom(s, run.chunk(), dst, src, (r.end - r.begin) * width,
                      keys ? keys_pinned : values_pinned, &staging_turn);
  };
  for (;;) {
    ArrivedRange range;
    const ArrivingInput::Next next = job.input->Wait(&range);
    if (next == ArrivingInput::Next::kComplete) break;
    if (next == ArrivingInput::Next::kAbandoned) {
      // The caller frees the host arrays after this returns: no copy may
      // still be reading them.
      if ((err = cudaStreamSynchronize(s.stream)) != cudaSuccess) return run.Fail(err, "abandoning");
      return run.Finished(GpuSortOutcome::kAbandoned, "the input was abandoned");
    }
    const bool keys = range.array == ArrivedRange::kKeys;
    if (range.begin >= range.end || range.end > n || (!keys && !with_values)) {
      cudaStreamSynchronize(s.stream);
      return run.Finished(GpuSortOutcome::kFailedIntact, "arriving input: a range out of bounds");
    }
    if ((err = upload(range)) != cudaSuccess) return run.Fail(err, "host to device copy");
  }
  // What the overlap left: the copies still queued when the input completed.
  const auto tail_start = std::chrono::steady_clock::now();
  if ((err = cudaEventRecord(s.upload_start, s.stream)) != cudaSuccess) return run.Fail(err, "event");
  if ((err = cudaEventSynchronize(s.upload_start)) != cudaSuccess) {
    return run.Fail(err, "host to device copy");
  }
  const double upload_tail = SecondsSince(tail_start);
  if ((err = cudaEventRecord(s.sort_start, s.stream)) != cudaSuccess) return run.Fail(err, "event");
  HostResults out;
  out.keys = job.keys;
  out.keys_pinned = keys_pinned;
  out.payload = with_values ? job.values : static_cast<void*>(job.indices);
  out.payload_pinned = with_values ? values_pinned : indices_pinned;
  out.widen_positions = !with_values && plan.index_bytes == 4;
  GpuSortReport report = SortAndDownload(run, plan, n, key_bytes, out);
  report.h2d_seconds = upload_tail;
  return report;
}

GpuSortReport GpuWorker::SortBatch(const GpuBatchJob& job) {
  State& st = *state_;
  Job run(st);
  if (run.Refused()) return run.report();
  size_t n = 0;
  bool want_positions = false;
  for (size_t i = 0; i < job.num_segments; ++i) {
    n += job.segments[i].num_items;
    want_positions = want_positions || job.segments[i].indices != nullptr;
  }
  if (n == 0) return run.report();
  if (n >= (size_t{1} << 32) || job.num_segments >= (size_t{1} << 31)) {
    return run.NoMemory(n * 8);  // batches are bounded far below this
  }
  const size_t key_bytes = RadixKeyBytes(job.key_type);
  const size_t segments = job.num_segments;
  // Host offsets: the first part of the upload (the kernel plans bins
  // from them too).
  std::vector<uint32_t> offsets(segments + 1, 0);
  uint32_t shortest = ~0u, longest = 0;
  for (size_t i = 0; i < segments; ++i) {
    const uint32_t len = static_cast<uint32_t>(job.segments[i].num_items);
    offsets[i + 1] = offsets[i] + len;
    shortest = std::min(shortest, len);
    longest = std::max(longest, len);
  }
  SegmentedSortProblem problem;
  problem.min_segment_items = shortest;
  problem.max_segment_items = longest;
  problem.key_type = job.key_type;
  problem.descending = job.descending;
  problem.num_segments = static_cast<int>(segments);
  problem.h_offsets = offsets.data();
  size_t temp_bytes = 0;
  cudaError_t err = SegmentedSort(nullptr, temp_bytes, problem, nullptr);
  if (err != cudaSuccess) return run.Fail(err, "sizing the segmented sort");
  const size_t offsets_bytes = AlignUp(offsets.size() * 4);
  const size_t keys_in_at = offsets_bytes;  // offsets and keys: one upload
  const size_t keys_out_at = keys_in_at + AlignUp(n * key_bytes);
  const size_t positions_at = keys_out_at + AlignUp(n * key_bytes);
  const size_t temp_at = positions_at + (want_positions ? AlignUp(n * 4) : 0);
  const size_t total = temp_at + AlignUp(temp_bytes);
  if (auto failed = run.Reserve(total)) return *failed;

  Slot& s = run.slot();
  const size_t chunk = run.chunk();
  char* base = s.device;
  problem.d_offsets = reinterpret_cast<const uint32_t*>(base);
  problem.d_keys_in = base + keys_in_at;
  problem.d_keys_out = base + keys_out_at;
  problem.d_indices_out = want_positions ? reinterpret_cast<uint32_t*>(base + positions_at) : nullptr;

  if ((err = cudaEventRecord(s.upload_start, s.stream)) != cudaSuccess) return run.Fail(err, "event");
  auto segment_bytes = [&](size_t element_bytes) {
    return [&job, element_bytes](size_t i) { return job.segments[i].num_items * element_bytes; };
  };
  auto gather = Concat(segments, segment_bytes(key_bytes));
  err = UploadAfterHeader(s, chunk, base, offsets.data(), offsets.size() * 4, offsets_bytes,
                          n * key_bytes, [&](char* staged, size_t len) {
                            gather.Next(len, [&](size_t i, size_t within, size_t at, size_t bytes) {
                              std::memcpy(staged + at,
                                          static_cast<const char*>(job.segments[i].keys_in) + within,
                                          bytes);
                            });
                          });
  if (err != cudaSuccess) return run.Fail(err, "host to device copy");
  if ((err = cudaEventRecord(s.sort_start, s.stream)) != cudaSuccess) return run.Fail(err, "event");
  err = SegmentedSort(base + temp_at, temp_bytes, problem, s.stream);
  if (err != cudaSuccess) return run.Fail(err, "segmented sort");
  if ((err = cudaEventRecord(s.sort_stop, s.stream)) != cudaSuccess) return run.Fail(err, "event");
  auto scatter = Concat(segments, segment_bytes(key_bytes));
  err = run.DownloadOutput(base + keys_out_at, n * key_bytes,
                           [&](const void* staged, size_t, size_t len) {
                             scatter.Next(len, [&](size_t i, size_t within, size_t at, size_t bytes) {
                               std::memcpy(static_cast<char*>(job.segments[i].keys_out) + within,
                                           static_cast<const char*>(staged) + at, bytes);
                             });
                           });
  if (err != cudaSuccess) return run.Fail(err, "segmented sort or device to host copy");
  if (want_positions) {
    auto widen = Concat(segments, segment_bytes(4));
    err = run.DownloadOutput(base + positions_at, n * 4,
                             [&](const void* staged, size_t, size_t len) {
                               widen.Next(len, [&](size_t i, size_t within, size_t at, size_t bytes) {
                                 const GpuBatchSegment& seg = job.segments[i];
                                 if (seg.indices == nullptr) return;
                                 WidenPositions(static_cast<const char*>(staged) + at, bytes / 4,
                                                seg.indices + within / 4);
                               });
                             });
    if (err != cudaSuccess) return run.Fail(err, "device to host copy");
  }
  run.RecordTimes();
  return run.report();
}

namespace {

// Where the first `rank` keys of the stable merge of sorted runs come
// from: splits[r] keys of run r (run r = keys[offsets[r], offsets[r+1])).
// Equal keys are taken from earlier runs first, as the merge does. Keys
// compare as order-preserving words (NaNs equal and last; descending
// complemented), the GPU's order.
template <typename T>
void SplitRuns(const T* keys, const std::vector<size_t>& offsets, bool descending, size_t rank,
               size_t* splits) {
  using Bits = OrderedBits<T>;
  using Word = typename Bits::Word;
  const size_t runs = offsets.size() - 1;
  const Word flip = descending ? ~Word{0} : Word{0};
  auto word = [&](size_t i) { return static_cast<Word>(Bits::Encode(keys[i]) ^ flip); };
  // First index in run r whose word is > v (upper) or >= v (lower).
  auto bound = [&](size_t r, Word v, bool upper) {
    size_t lo = offsets[r], hi = offsets[r + 1];
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      const Word w = word(mid);
      if (upper ? w <= v : w < v) lo = mid + 1; else hi = mid;
    }
    return lo - offsets[r];
  };
  auto count_le = [&](Word v) {
    size_t c = 0;
    for (size_t r = 0; r < runs; ++r) c += bound(r, v, true);
    return c;
  };
  // The smallest word v with at least `rank` keys <= v.
  Word lo = 0, hi = ~Word{0};
  while (lo < hi) {
    const Word mid = lo + (hi - lo) / 2;
    if (count_le(mid) >= rank) hi = mid; else lo = mid + 1;
  }
  size_t need = rank;
  for (size_t r = 0; r < runs; ++r) {
    splits[r] = bound(r, lo, false);
    need -= splits[r];
  }
  for (size_t r = 0; r < runs && need > 0; ++r) {  // keys equal to v, run order
    const size_t take = std::min(need, bound(r, lo, true) - splits[r]);
    splits[r] += take;
    need -= take;
  }
}

void SplitRunsTyped(const GpuSortJob& job, const std::vector<size_t>& offsets, size_t rank,
                    size_t* splits) {
  const void* k = job.keys;
  const bool d = job.descending;
  switch (job.key_type) {
    case RadixKeyType::kUint32: return SplitRuns(static_cast<const uint32_t*>(k), offsets, d, rank, splits);
    case RadixKeyType::kInt32: return SplitRuns(static_cast<const int32_t*>(k), offsets, d, rank, splits);
    case RadixKeyType::kFloat32: return SplitRuns(static_cast<const float*>(k), offsets, d, rank, splits);
    case RadixKeyType::kUint64: return SplitRuns(static_cast<const uint64_t*>(k), offsets, d, rank, splits);
    case RadixKeyType::kInt64: return SplitRuns(static_cast<const int64_t*>(k), offsets, d, rank, splits);
    case RadixKeyType::kFloat64: return SplitRuns(static_cast<const double*>(k), offsets, d, rank, splits);
  }
}

}  // namespace

GpuSortReport GpuWorker::SortInChunks(const GpuSortJob& job, size_t chunk_items) {
  const size_t n = job.num_items;
  const size_t key_bytes = RadixKeyBytes(job.key_type);
  GpuSortReport total;
  for (size_t begin = 0; begin < n; begin += chunk_items) {
    GpuSortJob chunk = job;
    chunk.prefer_merge = false;
    chunk.num_items = std::min(chunk_items, n - begin);
    chunk.keys = static_cast<char*>(job.keys) + begin * key_bytes;
    chunk.indices = job.indices == nullptr ? nullptr : job.indices + begin;
    GpuSortReport r = Sort(chunk);
    if (r.outcome != GpuSortOutcome::kOk) {
      // Earlier chunks are already sorted in place: the input is gone.
      if (begin > 0) r.outcome = GpuSortOutcome::kFailedDirty;
      return r;
    }
    if (chunk.indices != nullptr && begin > 0) {
      for (size_t i = 0; i < chunk.num_items; ++i) chunk.indices[i] += begin;
    }
    total.h2d_seconds += r.h2d_seconds;
    total.kernel_seconds += r.kernel_seconds;
    total.d2h_seconds += r.d2h_seconds;
  }
  GpuSortReport merged = MergeChunks(job, chunk_items, chunk_items);
  merged.h2d_seconds += total.h2d_seconds;
  merged.kernel_seconds += total.kernel_seconds;
  merged.d2h_seconds += total.d2h_seconds;
  return merged;
}

GpuSortReport GpuWorker::MergeChunks(const GpuSortJob& job, size_t chunk_items,
                                     size_t block_items) {
  State& st = *state_;
  Job run(st);
  run.OutputStarted();  // the chunks are sorted in place already
  if (run.Refused()) return run.report();
  const size_t n = job.num_items;
  const size_t key_bytes = RadixKeyBytes(job.key_type);
  const bool indices = job.indices != nullptr;
  const size_t value_bytes = indices ? 8 : 0;
  std::vector<size_t> runs;
  for (size_t begin = 0; begin < n; begin += chunk_items) runs.push_back(begin);
  runs.push_back(n);
  const size_t num_runs = runs.size() - 1;
  // Every block's split in every run, planned on the host first (binary
  // searches over the sorted runs), so the device buffers are sized once.
  const size_t blocks = (n + block_items - 1) / block_items;
  std::vector<size_t> splits((blocks + 1) * num_runs);
  for (size_t r = 0; r < num_runs; ++r) splits[blocks * num_runs + r] = runs[r + 1] - runs[r];
  for (size_t b = 1; b < blocks; ++b) {
    SplitRunsTyped(job, runs, b * block_items, &splits[b * num_runs]);
  }
  auto block_offsets = [&](size_t b) {
    std::vector<size_t> offsets(1, 0);
    for (size_t r = 0; r < num_runs; ++r) {
      offsets.push_back(offsets.back() + splits[(b + 1) * num_runs + r] - splits[b * num_runs + r]);
    }
    return offsets;
  };
  MergeRunsProblem problem;
  problem.key_type = job.key_type;
  problem.descending = job.descending;
  problem.num_runs = static_cast<int>(num_runs);
  problem.value_bytes = static_cast<int>(value_bytes);
  size_t temp_bytes = 0;
  for (size_t b = 0; b < blocks; ++b) {
    const std::vector<size_t> offsets = block_offsets(b);
    problem.h_run_offsets = offsets.data();
    size_t bytes = 0;
    const cudaError_t err = MergeSortedRuns(nullptr, bytes, problem, nullptr);
    if (err != cudaSuccess) return run.Fail(err, "sizing the merge");
    temp_bytes = std::max(temp_bytes, bytes);
  }
  const size_t keys_in_at = 0;
  const size_t keys_out_at = AlignUp(block_items * key_bytes);
  const size_t values_in_at = keys_out_at + AlignUp(block_items * key_bytes);
  const size_t values_out_at = values_in_at + AlignUp(block_items * value_bytes);
  const size_t temp_at = values_out_at + AlignUp(block_items * value_bytes);
  const size_t total = temp_at + AlignUp(temp_bytes);
  if (auto failed = run.Reserve(total)) return *failed;
  cudaError_t err = cudaSuccess;
  Slot& s = run.slot();
  char* base = s.device;
  problem.d_keys_in = base + keys_in_at;
  problem.d_keys_out = base + keys_out_at;
  problem.d_values_in = indices ? base + values_in_at : nullptr;
  problem.d_values_out = indices ? base + values_out_at : nullptr;
  // The merged array is assembled beside the runs, then copied back.
  std::vector<char> out_keys(n * key_bytes);
  std::vector<uint64_t> out_indices(indices ? n : 0);
  const auto start = std::chrono::steady_clock::now();
  for (size_t b = 0; b < blocks; ++b) {
    const std::vector<size_t> offsets = block_offsets(b);
    const size_t m = offsets.back();
    // This block's slice of every run, gathered from `array`.
    auto upload_slices = [&](const void* array, size_t element_bytes, size_t at) {
      auto slices = Concat(num_runs, [&](size_t r) { return (offsets[r + 1] - offsets[r]) * element_bytes; });
      return Upload(s, run.chunk(), base + at, m * element_bytes,
                    [&](char* staged, size_t, size_t len) {
                      slices.Next(len, [&](size_t r, size_t within, size_t step_at, size_t bytes) {
                        const size_t first = runs[r] + splits[b * num_runs + r];
                        std::memcpy(staged + step_at,
                                    static_cast<const char*>(array) + first * element_bytes + within,
                                    bytes);
                      });
                    });
    };
    err = upload_slices(job.keys, key_bytes, keys_in_at);
    if (err == cudaSuccess && indices) err = upload_slices(job.indices, 8, values_in_at);
    if (err != cudaSuccess) return run.Fail(err, "host to device copy");
    problem.h_run_offsets = offsets.data();
    size_t bytes = temp_bytes;
    if ((err = MergeSortedRuns(base + temp_at, bytes, problem, s.stream)) != cudaSuccess) {
      return run.Fail(err, "merging sorted chunks");
    }
    char* dst = out_keys.data() + b * block_items * key_bytes;
    err = run.DownloadOutput(base + keys_out_at, m * key_bytes,
                             [&](const void* staged, size_t off, size_t len) {
                               std::memcpy(dst + off, staged, len);
                             });
    if (err == cudaSuccess && indices) {
      char* idst = reinterpret_cast<char*>(out_indices.data() + b * block_items);
      err = run.DownloadOutput(base + values_out_at, m * 8,
                               [&](const void* staged, size_t off, size_t len) {
                                 std::memcpy(idst + off, staged, len);
                               });
    }
    if (err != cudaSuccess) return run.Fail(err, "device to host copy");
  }
  std::memcpy(job.keys, out_keys.data(), out_keys.size());
  if (indices) std::memcpy(job.indices, out_indices.data(), n * 8);
  run.report().kernel_seconds = SecondsSince(start);  // merge with its copies
  return run.report();
}

GpuSortReport GpuWorker::ArgsortBytes(const GpuBytesJob& job) {
  State& st = *state_;
  Job run(st);
  if (run.Refused()) return run.report();
  const size_t n = job.num_items;
  if (n == 0) return run.report();
  if (n >= 0xffffffffu) return run.NoMemory(n * 16);
  std::vector<uint64_t> offsets(n + 1, 0);
  for (size_t i = 0; i < n; ++i) offsets[i + 1] = offsets[i] + job.keys[i].size();
  const size_t string_bytes = offsets[n];
  BytesArgsortProblem problem;
  problem.num_items = n;
  problem.descending = job.descending;
  size_t temp_bytes = 0;
  cudaError_t err = cudaSuccess;
  if ((err = cuda::ArgsortBytes(nullptr, temp_bytes, problem, nullptr)) != cudaSuccess) {
    return run.Fail(err, "sizing the string sort");
  }
  const size_t offsets_bytes = AlignUp((n + 1) * 8);
  const size_t bytes_at = offsets_bytes;  // offsets and bytes: one upload
  const size_t indices_at = bytes_at + AlignUp(std::max<size_t>(string_bytes, 1));
  const size_t temp_at = indices_at + AlignUp(n * 4);
  const size_t total = temp_at + AlignUp(temp_bytes);
  if (auto failed = run.Reserve(total)) return *failed;
  Slot& s = run.slot();
  char* base = s.device;
  problem.d_offsets = reinterpret_cast<const uint64_t*>(base);
  problem.d_bytes = reinterpret_cast<const uint8_t*>(base + bytes_at);
  problem.d_indices_out = reinterpret_cast<uint32_t*>(base + indices_at);

  if ((err = cudaEventRecord(s.upload_start, s.stream)) != cudaSuccess) return run.Fail(err, "event");
  auto strings = Concat(n, [&](size_t i) { return job.keys[i].size(); });
  err = UploadAfterHeader(s, run.chunk(), base, offsets.data(), (n + 1) * 8, offsets_bytes,
                          string_bytes, [&](char* staged, size_t len) {
                            strings.Next(len, [&](size_t i, size_t within, size_t at, size_t bytes) {
                              std::memcpy(staged + at, job.keys[i].data() + within, bytes);
                            });
                          });
  if (err != cudaSuccess) return run.Fail(err, "host to device copy");
  if ((err = cudaEventRecord(s.sort_start, s.stream)) != cudaSuccess) return run.Fail(err, "event");
  err = cuda::ArgsortBytes(base + temp_at, temp_bytes, problem, s.stream);
  if (err != cudaSuccess) return run.Fail(err, "string sort");
  if ((err = cudaEventRecord(s.sort_stop, s.stream)) != cudaSuccess) return run.Fail(err, "event");
  err = run.DownloadOutput(base + indices_at, n * 4,
                           [&](const void* staged, size_t off, size_t len) {
                             WidenPositions(staged, len / 4, job.indices + off / 4);
                           });
  if (err != cudaSuccess) return run.Fail(err, "string sort or device to host copy");
  run.RecordTimes();
  return run.report();
}

}  // namespace sortd::cuda
