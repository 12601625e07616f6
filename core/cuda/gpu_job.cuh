// What every job kind of the GPU worker shares: the worker's context (its
// options, slots and pool, health), and `Job`, one job's lease on a slot,
// its report, and how CUDA errors become outcomes (out of memory and errors
// before any output leave the callers' arrays intact, so the caller can
// fall back; a sticky error takes the worker out of service). Each job kind
// reads plan -> lease -> upload -> sort -> download, with the copies in
// core/cuda/transfer.cuh:
//   sort_job.cu      numeric sorts, whole or arriving (GpuWorker::Sort,
//                    SortArriving)
//   chunked_sort.cu  arrays larger than the pool: sorted chunks merged
//   gather_jobs.cu   batches of small arrays and byte strings, gathered
//                    into one upload
//   table_job.cu     a table's rows packed into words and sorted on the
//                    device (GpuWorker::SortTable)
//   select/top_k_job.cu  selections of device memory (GpuWorker::TopK)
#ifndef SORTD_CORE_CUDA_GPU_JOB_CUH_
#define SORTD_CORE_CUDA_GPU_JOB_CUH_

#include <cuda_runtime.h>

#include <atomic>
#include <optional>
#include <string>

#include "core/cuda/device_pool.cuh"
#include "core/cuda/gpu_worker.h"
#include "core/cuda/transfer.cuh"

namespace sortd::cuda {

constexpr size_t kAlign = 256;
inline size_t AlignUp(size_t x, size_t a = kAlign) { return (x + a - 1) / a * a; }

struct WorkerContext {
  GpuWorkerOptions options;
  DevicePool pool;
  std::atomic<bool> healthy{true};
  std::atomic<int> in_flight{0};
};

class Job {
 public:
  explicit Job(WorkerContext& ctx) : ctx_(ctx) { ctx_.in_flight.fetch_add(1); }
  ~Job() {
    lease_.Release();
    ctx_.in_flight.fetch_sub(1);
  }
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  GpuSortReport& report() { return report_; }
  // Error-message prefix, built only when a message is.
  std::string where() const { return "GPU " + std::to_string(ctx_.options.device) + ": "; }

  // Refuses the job when the worker is out of service.
  bool Refused() {
    if (ctx_.healthy.load()) return false;
    report_.outcome = Failed();
    report_.message = where() + "unavailable after an earlier device error";
    return true;
  }

  GpuSortReport NoMemory(size_t needed) {
    report_.outcome = marks_.started ? GpuSortOutcome::kFailedDirty : GpuSortOutcome::kNoMemory;
    report_.message = where() + "needs " + std::to_string(needed >> 20) +
                      " MiB of device memory; the pool is limited to " +
                      std::to_string(ctx_.pool.max_bytes() >> 20) + " MiB";
    return report_;
  }

  GpuSortReport Finished(GpuSortOutcome outcome, const char* why) {
    report_.outcome = outcome;
    report_.message = where() + why;
    return report_;
  }

  GpuSortReport Fail(cudaError_t e, const char* step) {
    report_.outcome = Failed();
    report_.message = where() + step + ": " + cudaGetErrorString(e);
    // A sticky error leaves the context unusable: stop taking work.
    if (cudaDeviceSynchronize() != cudaSuccess) {
      report_.device_lost = true;
      ctx_.healthy.store(false);
    } else {
      cudaGetLastError();
    }
    return report_;
  }

  // Leases a request slot with `total` device bytes, or returns the report
  // to give back: out of memory when the pool can never hold it (without
  // queueing behind GPU work) or the device has no room.
  std::optional<GpuSortReport> Reserve(size_t total) {
    if (total > ctx_.pool.max_bytes()) return NoMemory(total);
    cudaError_t err = cudaSetDevice(ctx_.options.device);
    if (err == cudaSuccess) err = ctx_.pool.Acquire(total, &lease_);
    report_.pool_bytes = ctx_.pool.bytes();
    if (err == cudaErrorMemoryAllocation) return NoMemory(total);
    if (err != cudaSuccess) return Fail(err, "preparing the device");
    return std::nullopt;
  }

  // An arriving slot with `total` device bytes, without waiting:
  // cudaErrorNotReady when none is free now.
  cudaError_t ReserveArriving(size_t total) {
    cudaError_t err = cudaSetDevice(ctx_.options.device);
    if (err == cudaSuccess) err = ctx_.pool.TryAcquireArriving(total, &lease_);
    report_.pool_bytes = ctx_.pool.bytes();
    return err;
  }

  const GpuWorkerOptions& options() const { return ctx_.options; }
  Slot& slot() { return lease_.slot(); }
  Staging& staging() { return lease_.slot().staging; }
  cudaStream_t stream() { return lease_.slot().stream(); }
  void OutputStarted() { marks_.started = true; }
  // The error GpuWorkerOptions::fault_hook injects at `step`, if any.
  cudaError_t Injected(const char* step) const {
    return ctx_.options.fault_hook ? static_cast<cudaError_t>(ctx_.options.fault_hook(step))
                                   : cudaSuccess;
  }

  // Host -> device of the extents into `dev` on the slot.
  template <typename Extents>
  cudaError_t Upload(void* dev, const Extents& source) {
    return cuda::Upload(staging(), dev, source);
  }
  // Device -> host into the extents, queued behind the sort. The output
  // counts as started when the first bytes reach the callers' arrays: an
  // error before that (the sort's included) leaves them intact.
  template <typename Extents, typename Out = CopyOut>
  cudaError_t Download(const void* dev, const Extents& sink, Out out = Out()) {
    return cuda::Download(staging(), dev, sink, &marks_, out);
  }

  // Timing from the slot's events, once every download is done: upload,
  // sort, and back to host memory (the device's transfer span after the
  // sort plus the host's copies out of staging).
  void RecordTimes() {
    Slot& s = slot();
    float upload_ms = 0, sort_ms = 0, download_ms = 0;
    cudaEventElapsedTime(&upload_ms, s.upload_start, s.sort_start);
    cudaEventElapsedTime(&sort_ms, s.sort_start, s.sort_stop);
    if (marks_.last != nullptr) cudaEventElapsedTime(&download_ms, s.sort_stop, marks_.last);
    report_.h2d_seconds = upload_ms / 1e3;
    report_.kernel_seconds = sort_ms / 1e3;
    report_.d2h_seconds = download_ms / 1e3 + marks_.host_seconds;
  }

 private:
  GpuSortOutcome Failed() const {
    return marks_.started ? GpuSortOutcome::kFailedDirty : GpuSortOutcome::kFailedIntact;
  }

  WorkerContext& ctx_;
  DevicePool::Lease lease_;
  GpuSortReport report_;
  DownloadMarks marks_;
};

// The job kinds, each in its own file (above).
GpuSortReport RunSort(WorkerContext& ctx, const GpuSortJob& job);
GpuSortReport RunSortArriving(WorkerContext& ctx, const GpuArrivingJob& job);
GpuSortReport RunSortInChunks(WorkerContext& ctx, const GpuSortJob& job, size_t chunk_items);
GpuSortReport RunSortBatch(WorkerContext& ctx, const GpuBatchJob& job);
GpuSortReport RunArgsortBytes(WorkerContext& ctx, const GpuBytesJob& job);
GpuSortReport RunTableSort(WorkerContext& ctx, const GpuTableJob& job);
GpuSortReport RunTopK(WorkerContext& ctx, const GpuTopKJob& job);

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_GPU_JOB_CUH_
