// Numeric sorts on one slot (GpuWorker::Sort and SortArriving): plan the
// device layout, lease a slot, upload (whole, or range by range as the
// input arrives), sort on the radix or merge core, download. Arrays larger
// than the pool go to chunked_sort.cu.
#include <algorithm>
#include <chrono>

#include "core/cuda/gpu_job.cuh"
#include "core/cuda/key_blocks.cuh"
#include "core/cuda/merge_sort.cuh"
#include "core/cuda/radix_kernels.cuh"

namespace sortd::cuda {
namespace {

// Sub-buffers of one slot's device allocation for one sort of n keys: keys
// in/out, radix payload in/out (positions, or the caller's values; the merge
// argsort writes 4-byte positions out only), temp, and (keys delta-coded on
// the way out) the blocks' offsets.
struct Layout {
  size_t keys_in, keys_out, index_in, index_out, temp, temp_bytes, block_offsets, total;
};

struct SortPlan {
  bool merge = false;
  size_t index_bytes = 0;
  RadixSortProblem radix;
  MergeSortProblem merge_problem;
  Layout layout{};
};

// `indices_direct`: job.indices is copied directly (pinned or device).
// `value_bytes` (jobs with values): the radix payload is the caller's
// values of that width instead of positions. `key_blocks`: room for
// encoding the sorted keys (SortAndDownload).
cudaError_t PlanSort(const GpuSortJob& job, size_t n, bool indices_direct, SortPlan& plan,
                     int value_bytes = 0, bool key_blocks = false) {
  const size_t key_bytes = RadixKeyBytes(job.key_type);
  plan.merge = job.prefer_merge && job.indices != nullptr && n < (size_t{1} << 32);
  // 4-byte positions are widened to the caller's uint64 on the host, in the
  // staging copy; direct destinations (sort sessions' pinned buffers,
  // regions) take 8-byte ones by DMA instead, which costs less than a host
  // pass for large arrays (and device memory cannot be widened by the CPU).
  plan.index_bytes = value_bytes != 0                                              ? value_bytes
                     : job.indices == nullptr                                      ? 0
                     : (n < (size_t{1} << 32) && (plan.merge || !indices_direct)) ? 4
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
  l.block_offsets = l.temp + AlignUp(l.temp_bytes);
  l.total = l.block_offsets + (key_blocks ? AlignUp(KeyBlockOffsetsBytes(n)) : 0);
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

// A numeric job's arrays and where each lies (one pointer query per array:
// it decides the copies and whether the host may touch the array at all).
struct Arrays {
  Extent keys, values, indices;
  bool on_device() const {
    return keys.kind == MemoryKind::kDevice || values.kind == MemoryKind::kDevice ||
           indices.kind == MemoryKind::kDevice;
  }
};

Extent Locate(const void* array, size_t bytes) {
  return HostExtent(array, bytes,
                    bytes > 0 && array != nullptr ? MemoryKindOf(array) : MemoryKind::kPageable);
}

Arrays LocateArrays(const void* keys, const void* values, int value_bytes, const uint64_t* indices,
                    size_t n, size_t key_bytes) {
  Arrays a;
  a.keys = Locate(keys, n * key_bytes);
  a.values = Locate(values, values != nullptr ? n * value_bytes : 0);
  a.indices = Locate(indices, indices != nullptr ? n * 8 : 0);
  return a;
}

KeyBlocksProblem::Kind BlocksKind(SortedKeyBlocks::Kind kind) {
  switch (kind) {
    case SortedKeyBlocks::kSigned: return KeyBlocksProblem::Kind::kSigned;
    case SortedKeyBlocks::kFloat: return KeyBlocksProblem::Kind::kFloat;
    default: return KeyBlocksProblem::Kind::kUnsigned;
  }
}

// Delta-codes the sorted keys at `d_keys` into `d_scratch` (the keys
// buffer the sort no longer needs) and downloads the blocks into
// out->body, queued behind the sort. *coded false (nothing written, not an
// error): the body would not fit the scratch or out->capacity (keys that do
// not shrink); the caller downloads the keys as they are.
cudaError_t EncodeAndDownload(Job& run, const SortPlan& plan, size_t n, const void* d_keys,
                              void* d_scratch, bool descending, SortedKeyBlocks* out,
                              bool* coded) {
  *coded = false;
  Slot& s = run.slot();
  const Layout& l = plan.layout;
  const RadixKeyType type = plan.merge ? plan.merge_problem.key_type : plan.radix.key_type;
  const int width = static_cast<int>(RadixKeyBytes(type));
  KeyBlocksProblem p;
  p.d_keys = d_keys;
  p.num_items = n;
  p.width = width;
  p.kind = BlocksKind(out->kind);
  p.descending = descending;
  auto* d_offsets = reinterpret_cast<uint64_t*>(s.device + l.block_offsets);
  const size_t blocks = KeyBlockCount(n);
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaError_t err = cudaEventCreate(&start);
  if (err == cudaSuccess) err = cudaEventCreate(&stop);
  if (err == cudaSuccess) err = cudaEventRecord(start, s.stream());
  if (err == cudaSuccess) err = SizeKeyBlocks(p, d_offsets, s.stream());
  uint64_t total = 0;
  if (err == cudaSuccess) {
    err = cudaMemcpyAsync(&total, d_offsets + blocks, sizeof(total), cudaMemcpyDeviceToHost, s.stream());
  }
  if (err == cudaSuccess) err = cudaStreamSynchronize(s.stream());
  const size_t room = std::min(out->capacity, AlignUp(n * width));
  if (err == cudaSuccess && total <= room) {
    err = WriteKeyBlocks(p, d_offsets, static_cast<uint8_t*>(d_scratch), s.stream());
    if (err == cudaSuccess) err = cudaEventRecord(stop, s.stream());
    if (err == cudaSuccess) err = run.Injected("encode");
    if (err == cudaSuccess) {
      out->offsets.resize(blocks + 1);
      err = cudaMemcpyAsync(out->offsets.data(), d_offsets, (blocks + 1) * sizeof(uint64_t),
                            cudaMemcpyDeviceToHost, s.stream());
    }
    if (err == cudaSuccess) err = run.Download(d_scratch, OneExtent{Locate(out->body, total)});
    if (err == cudaSuccess) {
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      out->encode_seconds = ms / 1e3;
      *coded = true;
    }
  }
  if (start != nullptr) cudaEventDestroy(start);
  if (stop != nullptr) cudaEventDestroy(stop);
  return err;
}

// Sorts what the job uploaded (on the slot's stream, behind the upload) and
// brings the results back into the arrays: the keys in place (or, asked
// for key_blocks, delta-coded into its body), and the radix payload into
// the values, or into the indices (4-byte positions widened).
GpuSortReport SortAndDownload(Job& run, SortPlan& plan, size_t n, const Arrays& arrays,
                              bool with_values, SortedKeyBlocks* key_blocks = nullptr) {
  Slot& s = run.slot();
  char* base = s.device;
  const Layout& l = plan.layout;
  size_t temp_bytes = l.temp_bytes;
  // Input found already sorted stays where it was uploaded (no device copy):
  // the results are then downloaded from the input buffers.
  RadixSortStats stats;
  plan.radix.allow_result_in_input = true;
  plan.radix.presorted_min_items = run.options().presorted_min_items;
  cudaError_t err = plan.merge ? MergeSort(base + l.temp, temp_bytes, plan.merge_problem, s.stream())
                               : RadixSort(base + l.temp, temp_bytes, plan.radix, s.stream(), &stats);
  if (err == cudaSuccess) err = run.Injected("sort");
  if (err != cudaSuccess) return run.Fail(err, plan.merge ? "merge sort" : "radix sort");
  if ((err = cudaEventRecord(s.sort_stop, s.stream())) != cudaSuccess) return run.Fail(err, "event");
  const size_t keys_at = stats.result_in_input ? l.keys_in : l.keys_out;
  const size_t payload_at = stats.result_in_input ? l.index_in : l.index_out;
  bool coded = false;
  if (key_blocks != nullptr) {
    const size_t scratch_at = stats.result_in_input ? l.keys_out : l.keys_in;
    err = EncodeAndDownload(run, plan, n, base + keys_at, base + scratch_at,
                            plan.merge ? plan.merge_problem.descending : plan.radix.descending,
                            key_blocks, &coded);
    if (err != cudaSuccess) return run.Fail(err, "sort or encoding the keys");
  }
  if (!coded) {
    err = run.Download(base + keys_at, OneExtent{arrays.keys});
    if (err == cudaSuccess) err = run.Injected("download");
    if (err != cudaSuccess) return run.Fail(err, "sort or device to host copy");
  }
  if (with_values) {
    err = run.Download(base + payload_at, OneExtent{arrays.values});
  } else if (arrays.indices.data != nullptr && plan.index_bytes == 4) {
    err = run.Download(base + payload_at, OneExtent{HostExtent(arrays.indices.data, n * 4)},
                       WidenOut());
  } else if (arrays.indices.data != nullptr) {
    err = run.Download(base + payload_at, OneExtent{arrays.indices});
  }
  if (err != cudaSuccess) return run.Fail(err, "device to host copy");
  run.RecordTimes();
  run.report().presorted = stats.presorted == RadixSortStats::Presorted::kSorted ||
                           stats.presorted == RadixSortStats::Presorted::kReversed;
  if (coded) key_blocks->written = true;
  return run.report();
}

bool ValuesUnsupported(const void* values, int value_bytes, const uint64_t* indices) {
  return values != nullptr && ((value_bytes != 4 && value_bytes != 8) || indices != nullptr);
}

}  // namespace

GpuSortReport RunSort(WorkerContext& ctx, const GpuSortJob& job) {
  const size_t n = job.num_items;
  const size_t key_bytes = RadixKeyBytes(job.key_type);
  const bool with_values = job.values != nullptr;
  if (ValuesUnsupported(job.values, job.value_bytes, job.indices)) {
    Job run(ctx);
    return run.Finished(GpuSortOutcome::kFailedIntact, "values of 4 or 8 bytes, without indices");
  }
  const Arrays arrays = LocateArrays(job.keys, job.values, job.value_bytes, job.indices, n, key_bytes);
  const bool indices_direct = CopiesDirectly(arrays.indices.kind);
  // Device-resident arrays are never touched by the host (no chunked merge),
  // and merge-sorted argsorts widen positions on the host.
  const bool on_device = arrays.on_device();
  GpuSortJob planned = job;
  if (on_device || with_values) planned.prefer_merge = false;
  SortPlan plan;
  if (n > 0) {
    const cudaError_t err =
        PlanSort(planned, n, indices_direct, plan, with_values ? job.value_bytes : 0);
    if (err != cudaSuccess) {
      Job run(ctx);
      return run.Fail(err, "sizing the sort");
    }
    const size_t max_bytes = ctx.pool.max_bytes();
    if (plan.layout.total > max_bytes && (on_device || with_values)) {
      Job run(ctx);
      return run.NoMemory(plan.layout.total);
    }
    if (plan.layout.total > max_bytes) {
      // Larger than the pool: chunks of half the pool at most (the other
      // slots keep working), sorted and then merged on the GPU.
      size_t chunk = size_t{1} << 62;
      while (chunk * 2 > n) chunk /= 2;
      for (; chunk >= kMinChunkItems; chunk /= 2) {
        SortPlan chunk_plan;
        GpuSortJob chunk_job = job;
        chunk_job.prefer_merge = false;
        if (PlanSort(chunk_job, chunk, indices_direct, chunk_plan) != cudaSuccess) break;
        if (chunk_plan.layout.total <= max_bytes / 2 &&
            MergeBlockBytes(chunk, key_bytes, job.indices != nullptr) <= max_bytes / 2) {
          return RunSortInChunks(ctx, job, chunk);
        }
      }
    }
  }
  Job run(ctx);
  if (run.Refused()) return run.report();
  if (n == 0) return run.report();
  const Layout& l = plan.layout;
  if (auto failed = run.Reserve(l.total)) return *failed;
  cudaError_t err = cudaSuccess;
  Slot& s = run.slot();
  char* base = s.device;
  PlaceOnDevice(plan, base);
  // The merge sort generates positions itself; values are the payload.
  if (!plan.merge && !with_values &&
      (err = StartPositions(plan, base, n, s.stream())) != cudaSuccess) {
    return run.Fail(err, "iota");
  }
  if ((err = cudaEventRecord(s.upload_start, s.stream())) != cudaSuccess) return run.Fail(err, "event");
  err = run.Upload(base + l.keys_in, OneExtent{arrays.keys});
  if (err == cudaSuccess && with_values) err = run.Upload(base + l.index_in, OneExtent{arrays.values});
  if (err != cudaSuccess) return run.Fail(err, "host to device copy");
  if ((err = cudaEventRecord(s.sort_start, s.stream())) != cudaSuccess) return run.Fail(err, "event");
  return SortAndDownload(run, plan, n, arrays, with_values);
}

GpuSortReport RunSortArriving(WorkerContext& ctx, const GpuArrivingJob& job) {
  const size_t n = job.num_items;
  Job run(ctx);
  if (run.Refused()) return run.report();
  if (n == 0 || job.input == nullptr) return run.Finished(GpuSortOutcome::kBusy, "nothing arriving");
  const bool with_values = job.values != nullptr;
  if (ValuesUnsupported(job.values, job.value_bytes, job.indices)) {
    return run.Finished(GpuSortOutcome::kBusy, "values of 4 or 8 bytes, without indices");
  }
  GpuSortJob sort;
  sort.key_type = job.key_type;
  sort.descending = job.descending;
  sort.num_items = n;
  sort.keys = job.keys;
  sort.indices = job.indices;
  const size_t key_bytes = RadixKeyBytes(job.key_type);
  const Arrays arrays = LocateArrays(job.keys, job.values, job.value_bytes, job.indices, n, key_bytes);
  SortPlan plan;
  cudaError_t err = PlanSort(sort, n, CopiesDirectly(arrays.indices.kind), plan,
                             with_values ? job.value_bytes : 0, job.key_blocks != nullptr);
  if (err != cudaSuccess) return run.Fail(err, "sizing the sort");
  const Layout& l = plan.layout;
  // Larger than the pool: Sort takes it in chunks once it is complete.
  if (l.total > ctx.pool.max_bytes()) return run.NoMemory(l.total);
  err = run.ReserveArriving(l.total);
  if (err == cudaErrorNotReady || err == cudaErrorMemoryAllocation) {
    return run.Finished(GpuSortOutcome::kBusy, "no arriving slot with room free now");
  }
  if (err != cudaSuccess) return run.Fail(err, "preparing the device");
  Slot& s = run.slot();
  char* base = s.device;
  PlaceOnDevice(plan, base);
  if (!with_values && (err = StartPositions(plan, base, n, s.stream())) != cudaSuccess) {
    return run.Fail(err, "iota");
  }
  // Each range goes to the device as it lands: by DMA from pinned memory
  // (queued; the bytes are never written again before the sort), else
  // through the staging chunks (the turn carries across ranges).
  for (;;) {
    ArrivedRange range;
    const ArrivingInput::Next next = job.input->Wait(&range);
    if (next == ArrivingInput::Next::kComplete) break;
    if (next == ArrivingInput::Next::kAbandoned) {
      // The caller frees the host arrays after this returns: no copy may
      // still be reading them.
      if ((err = cudaStreamSynchronize(s.stream())) != cudaSuccess) return run.Fail(err, "abandoning");
      return run.Finished(GpuSortOutcome::kAbandoned, "the input was abandoned");
    }
    const bool keys = range.array == ArrivedRange::kKeys;
    if (range.begin >= range.end || range.end > n || (!keys && !with_values)) {
      cudaStreamSynchronize(s.stream());
      return run.Finished(GpuSortOutcome::kFailedIntact, "arriving input: a range out of bounds");
    }
    const Extent& array = keys ? arrays.keys : arrays.values;
    const size_t width = keys ? key_bytes : static_cast<size_t>(job.value_bytes);
    const Extent piece = HostExtent(static_cast<const char*>(array.data) + range.begin * width,
                                    (range.end - range.begin) * width, array.kind);
    err = run.Upload(base + (keys ? l.keys_in : l.index_in) + range.begin * width, OneExtent{piece});
    if (err != cudaSuccess) return run.Fail(err, "host to device copy");
  }
  // What the overlap left: the copies still queued when the input completed.
  const auto tail_start = std::chrono::steady_clock::now();
  if ((err = cudaEventRecord(s.upload_start, s.stream())) != cudaSuccess) return run.Fail(err, "event");
  if ((err = cudaEventSynchronize(s.upload_start)) != cudaSuccess) {
    return run.Fail(err, "host to device copy");
  }
  const double upload_tail =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - tail_start).count();
  if ((err = cudaEventRecord(s.sort_start, s.stream())) != cudaSuccess) return run.Fail(err, "event");
  GpuSortReport report = SortAndDownload(run, plan, n, arrays, with_values, job.key_blocks);
  report.h2d_seconds = upload_tail;
  return report;
}

}  // namespace sortd::cuda
