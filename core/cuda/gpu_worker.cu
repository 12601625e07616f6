// GPU worker: creates one GPU's slots and pool and hands each call to its
// job kind (core/cuda/gpu_job.cuh lists them; the transfers are
// core/cuda/transfer.cuh, the slots and pool core/cuda/device_pool.cuh).
#include "core/cuda/gpu_worker.h"

#include <algorithm>

#include "core/cuda/gpu_job.cuh"

namespace sortd::cuda {

std::unique_ptr<GpuWorker> GpuWorker::Create(const GpuWorkerOptions& options, std::string* error) {
  auto fail = [&](const char* what, cudaError_t err) -> std::unique_ptr<GpuWorker> {
    if (error != nullptr) {
      *error = std::string("GPU ") + std::to_string(options.device) + ": " + what + ": " +
               cudaGetErrorString(err);
    }
    return nullptr;
  };
  auto context = std::make_unique<WorkerContext>();
  GpuWorkerOptions& o = context->options;
  o = options;
  o.slots = std::max(1, options.slots);
  o.arriving_slots = std::max(0, options.arriving_slots);
  o.staging_chunk_bytes = AlignUp(std::max<size_t>(options.staging_chunk_bytes, 1 << 16), 1 << 16);
  cudaError_t err = cudaSetDevice(options.device);
  if (err != cudaSuccess) return fail("cudaSetDevice", err);
  size_t free_bytes = 0, total_bytes = 0;
  err = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (err != cudaSuccess) return fail("cudaMemGetInfo", err);
  DevicePoolOptions pool;
  pool.slots = o.slots;
  pool.arriving_slots = o.arriving_slots;
  pool.staging_chunk_bytes = o.staging_chunk_bytes;
  pool.max_bytes = options.max_pool_bytes != 0 ? options.max_pool_bytes : free_bytes / 10 * 8;
  pool.blocking_wait = options.blocking_wait;
  const char* step = "";
  if ((err = context->pool.Init(pool, &step)) != cudaSuccess) return fail(step, err);
  return std::unique_ptr<GpuWorker>(new GpuWorker(std::move(context)));
}

GpuWorker::GpuWorker(std::unique_ptr<WorkerContext> context) : context_(std::move(context)) {}
GpuWorker::~GpuWorker() {
  if (context_ != nullptr) cudaSetDevice(context_->options.device);
}

GpuSortReport GpuWorker::Sort(const GpuSortJob& job) { return RunSort(*context_, job); }
GpuSortReport GpuWorker::SortBatch(const GpuBatchJob& job) { return RunSortBatch(*context_, job); }
GpuSortReport GpuWorker::ArgsortBytes(const GpuBytesJob& job) { return RunArgsortBytes(*context_, job); }
GpuSortReport GpuWorker::SortTable(const GpuTableJob& job) { return RunTableSort(*context_, job); }
GpuSortReport GpuWorker::TopK(const GpuTopKJob& job) { return RunTopK(*context_, job); }
GpuSortReport GpuWorker::SortArriving(const GpuArrivingJob& job) {
  return RunSortArriving(*context_, job);
}

int GpuWorker::device() const { return context_->options.device; }
bool GpuWorker::healthy() const { return context_->healthy.load(); }
int GpuWorker::in_flight() const { return context_->in_flight.load(); }
size_t GpuWorker::pool_bytes() const { return context_->pool.bytes(); }
size_t GpuWorker::max_pool_bytes() const { return context_->pool.max_bytes(); }

}  // namespace sortd::cuda
