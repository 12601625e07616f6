// GpuWorker::TopK: a selection of device memory in one slot's buffer
// (kept positions, keys and values, then the selection's temp storage),
// with only the kept entries copied back to host memory.
#include <algorithm>
#include <vector>

#include "core/cuda/gpu_job.cuh"
#include "core/cuda/select/top_k.cuh"

namespace sortd::cuda {

GpuSortReport RunTopK(WorkerContext& ctx, const GpuTopKJob& job) {
  Job run(ctx);
  if (run.Refused()) return run.report();
  const size_t key_bytes = RadixKeyBytes(job.key_type);
  TopKProblem p;
  p.key_type = job.key_type;
  p.descending = job.descending;
  p.d_keys = job.keys;
  p.num_items = job.num_items;
  p.row_length = job.row_length;
  p.num_segments = job.num_segments;
  p.h_offsets = job.offsets;
  p.k = job.k;
  p.value_bytes = job.values != nullptr ? job.value_bytes : 0;
  p.d_values = p.value_bytes != 0 ? job.values : nullptr;
  // Sizing only looks at the outputs being set.
  static uint32_t sizing_placeholder;
  p.d_positions = &sizing_placeholder;
  p.d_values_out = p.value_bytes != 0 ? &sizing_placeholder : nullptr;
  size_t temp_bytes = 0;
  cudaError_t err = TopKTempBytes(p, &temp_bytes);
  if (err == cudaErrorInvalidValue) {
    return run.Finished(GpuSortOutcome::kFailedIntact,
                        "selection not taken (k = 0, a segment of 2^32 keys or more, or "
                        "offsets that do not cover the keys)");
  }
  if (err != cudaSuccess) return run.Fail(err, "sizing the selection");
  const size_t kept = std::max<size_t>(job.kept, 1);
  const size_t positions_at = 0;
  const size_t keys_at = positions_at + AlignUp(4 * kept);
  const size_t values_at = keys_at + AlignUp(key_bytes * kept);
  const size_t temp_at = values_at + AlignUp(size_t(std::max(p.value_bytes, 0)) * kept);
  const size_t total = temp_at + AlignUp(temp_bytes);
  if (auto failed = run.Reserve(total)) return *failed;
  char* base = run.slot().device;
  const cudaStream_t stream = run.stream();
  p.d_positions = reinterpret_cast<uint32_t*>(base + positions_at);
  p.d_keys_out = base + keys_at;
  p.d_values_out = p.value_bytes != 0 ? base + values_at : nullptr;
  Slot& s = run.slot();
  err = cudaEventRecord(s.upload_start, stream);
  if (err == cudaSuccess) err = cudaEventRecord(s.sort_start, stream);
  if (err == cudaSuccess) err = run.Injected("sort");
  if (err == cudaSuccess) err = TopK(base + temp_at, temp_bytes, p, stream);
  if (err == cudaSuccess) err = cudaEventRecord(s.sort_stop, stream);
  if (err != cudaSuccess) return run.Fail(err, "selecting");
  // The kept entries are few (k a segment): pageable copies, then the
  // positions widened to the caller's 64 bits.
  std::vector<uint32_t> positions(job.kept);
  err = cudaMemcpyAsync(positions.data(), p.d_positions, 4 * job.kept, cudaMemcpyDeviceToHost, stream);
  if (err == cudaSuccess && job.keys_out != nullptr) {
    err = cudaMemcpyAsync(job.keys_out, p.d_keys_out, key_bytes * job.kept, cudaMemcpyDeviceToHost,
                          stream);
  }
  if (err == cudaSuccess && p.value_bytes != 0 && job.values_out != nullptr) {
    err = cudaMemcpyAsync(job.values_out, p.d_values_out, size_t(p.value_bytes) * job.kept,
                          cudaMemcpyDeviceToHost, stream);
  }
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) return run.Fail(err, "copying the selection back");
  std::copy(positions.begin(), positions.end(), job.positions);
  float ms = 0;
  cudaEventElapsedTime(&ms, s.sort_start, s.sort_stop);
  run.report().kernel_seconds = ms / 1e3;
  run.report().pool_bytes = ctx.pool.bytes();
  return run.report();
}

}  // namespace sortd::cuda
