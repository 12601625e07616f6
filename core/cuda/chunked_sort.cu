// Numeric sorts larger than the device pool: chunks that fit are sorted in
// place one by one (sort_job.cu), then merged on the GPU block by block:
// each output block's slice of every sorted chunk is found on the host
// (binary searches), uploaded as one list of extents, merged
// (core/cuda/merge_sort.cuh) and brought back.
#include <algorithm>
#include <chrono>
#include <vector>

#include "core/cuda/gpu_job.cuh"
#include "core/cuda/merge_sort.cuh"
#include "core/key_transform.h"

namespace sortd::cuda {
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

// Merges the sorted chunks of `chunk_items` keys (job.keys, and job.indices
// with them) into blocks of `block_items` output keys.
GpuSortReport MergeChunks(WorkerContext& ctx, const GpuSortJob& job, size_t chunk_items,
                          size_t block_items) {
  Job run(ctx);
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
  // Pinned arrays (sort sessions' buffers) give their slices by DMA.
  const MemoryKind keys_kind = MemoryKindOf(job.keys);
  const MemoryKind indices_kind = indices ? MemoryKindOf(job.indices) : MemoryKind::kPageable;
  // The merged array is assembled beside the runs (later blocks still read
  // them), then copied back.
  std::vector<char> out_keys(n * key_bytes);
  std::vector<uint64_t> out_indices(indices ? n : 0);
  const auto start = std::chrono::steady_clock::now();
  for (size_t b = 0; b < blocks; ++b) {
    const std::vector<size_t> offsets = block_offsets(b);
    const size_t m = offsets.back();
    // This block's slice of every run of `array`.
    auto slices = [&](const void* array, size_t element_bytes, MemoryKind kind) {
      return ExtentsFrom(num_runs, [&, array, element_bytes, kind](size_t r) {
        const size_t first = runs[r] + splits[b * num_runs + r];
        return HostExtent(static_cast<const char*>(array) + first * element_bytes,
                          (offsets[r + 1] - offsets[r]) * element_bytes, kind);
      });
    };
    err = run.Upload(base + keys_in_at, slices(job.keys, key_bytes, keys_kind));
    if (err == cudaSuccess && indices) {
      err = run.Upload(base + values_in_at, slices(job.indices, 8, indices_kind));
    }
    if (err != cudaSuccess) return run.Fail(err, "host to device copy");
    problem.h_run_offsets = offsets.data();
    size_t bytes = temp_bytes;
    if ((err = MergeSortedRuns(base + temp_at, bytes, problem, s.stream())) != cudaSuccess) {
      return run.Fail(err, "merging sorted chunks");
    }
    err = run.Download(base + keys_out_at,
                       OneExtent{HostExtent(out_keys.data() + b * block_items * key_bytes, m * key_bytes)});
    if (err == cudaSuccess && indices) {
      err = run.Download(base + values_out_at,
                         OneExtent{HostExtent(out_indices.data() + b * block_items, m * 8)});
    }
    if (err != cudaSuccess) return run.Fail(err, "device to host copy");
  }
  std::memcpy(job.keys, out_keys.data(), out_keys.size());
  if (indices) std::memcpy(job.indices, out_indices.data(), n * 8);
  run.report().kernel_seconds =  // the merge with its copies
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run.report();
}

}  // namespace

GpuSortReport RunSortInChunks(WorkerContext& ctx, const GpuSortJob& job, size_t chunk_items) {
  const size_t n = job.num_items;
  const size_t key_bytes = RadixKeyBytes(job.key_type);
  GpuSortReport total;
  for (size_t begin = 0; begin < n; begin += chunk_items) {
    GpuSortJob chunk = job;
    chunk.prefer_merge = false;
    chunk.num_items = std::min(chunk_items, n - begin);
    chunk.keys = static_cast<char*>(job.keys) + begin * key_bytes;
    chunk.indices = job.indices == nullptr ? nullptr : job.indices + begin;
    GpuSortReport r = RunSort(ctx, chunk);
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
  GpuSortReport merged = MergeChunks(ctx, job, chunk_items, chunk_items);
  merged.h2d_seconds += total.h2d_seconds;
  merged.kernel_seconds += total.kernel_seconds;
  merged.d2h_seconds += total.d2h_seconds;
  return merged;
}

}  // namespace sortd::cuda
