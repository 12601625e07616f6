// Jobs whose input is many small host pieces gathered into one upload (a
// header of offsets, then the pieces, as one list of extents) and whose
// output is scattered back the same way: a batch of small numeric arrays on
// the segmented sort (GpuWorker::SortBatch), and the byte strings of one
// argsort on the merge sort (GpuWorker::ArgsortBytes).
#include <algorithm>
#include <vector>

#include "core/cuda/gpu_job.cuh"
#include "core/cuda/merge_sort.cuh"
#include "core/cuda/segmented_sort.cuh"

namespace sortd::cuda {
namespace {

// The upload of a header (header_bytes, padded to header_span; the gap is
// never read) followed by `count` pieces: extent 0 is the header, 1 the
// gap, 2.. the pieces.
template <typename Piece>
auto HeaderThen(const void* header, size_t header_bytes, size_t header_span, size_t count,
                Piece piece) {
  return ExtentsFrom(count + 2, [=](size_t i) {
    if (i == 0) return HostExtent(header, header_bytes);
    if (i == 1) return Hole(header_span - header_bytes);
    return piece(i - 2);
  });
}

}  // namespace

GpuSortReport RunSortBatch(WorkerContext& ctx, const GpuBatchJob& job) {
  Job run(ctx);
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
  char* base = s.device;
  problem.d_offsets = reinterpret_cast<const uint32_t*>(base);
  problem.d_keys_in = base + keys_in_at;
  problem.d_keys_out = base + keys_out_at;
  problem.d_indices_out = want_positions ? reinterpret_cast<uint32_t*>(base + positions_at) : nullptr;

  if ((err = cudaEventRecord(s.upload_start, s.stream())) != cudaSuccess) return run.Fail(err, "event");
  const GpuBatchSegment* seg = job.segments;
  err = run.Upload(base, HeaderThen(offsets.data(), offsets.size() * 4, offsets_bytes, segments,
                                    [seg, key_bytes](size_t i) {
                                      return HostExtent(seg[i].keys_in, seg[i].num_items * key_bytes);
                                    }));
  if (err != cudaSuccess) return run.Fail(err, "host to device copy");
  if ((err = cudaEventRecord(s.sort_start, s.stream())) != cudaSuccess) return run.Fail(err, "event");
  err = SegmentedSort(base + temp_at, temp_bytes, problem, s.stream());
  if (err != cudaSuccess) return run.Fail(err, "segmented sort");
  if ((err = cudaEventRecord(s.sort_stop, s.stream())) != cudaSuccess) return run.Fail(err, "event");
  err = run.Download(base + keys_out_at, ExtentsFrom(segments, [seg, key_bytes](size_t i) {
                       return HostExtent(seg[i].keys_out, seg[i].num_items * key_bytes);
                     }));
  if (err != cudaSuccess) return run.Fail(err, "segmented sort or device to host copy");
  if (want_positions) {
    // Segments that want no positions are holes.
    err = run.Download(base + positions_at, ExtentsFrom(segments, [seg](size_t i) {
                         return seg[i].indices != nullptr ? HostExtent(seg[i].indices, seg[i].num_items * 4)
                                                          : Hole(seg[i].num_items * 4);
                       }),
                       WidenOut());
    if (err != cudaSuccess) return run.Fail(err, "device to host copy");
  }
  run.RecordTimes();
  return run.report();
}

GpuSortReport RunArgsortBytes(WorkerContext& ctx, const GpuBytesJob& job) {
  Job run(ctx);
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
  if ((err = ArgsortBytes(nullptr, temp_bytes, problem, nullptr)) != cudaSuccess) {
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

  if ((err = cudaEventRecord(s.upload_start, s.stream())) != cudaSuccess) return run.Fail(err, "event");
  const std::string_view* keys = job.keys;
  err = run.Upload(base, HeaderThen(offsets.data(), (n + 1) * 8, offsets_bytes, n, [keys](size_t i) {
                     return HostExtent(keys[i].data(), keys[i].size());
                   }));
  if (err != cudaSuccess) return run.Fail(err, "host to device copy");
  if ((err = cudaEventRecord(s.sort_start, s.stream())) != cudaSuccess) return run.Fail(err, "event");
  err = ArgsortBytes(base + temp_at, temp_bytes, problem, s.stream());
  if (err != cudaSuccess) return run.Fail(err, "string sort");
  if ((err = cudaEventRecord(s.sort_stop, s.stream())) != cudaSuccess) return run.Fail(err, "event");
  err = run.Download(base + indices_at, OneExtent{HostExtent(job.indices, n * 4)}, WidenOut());
  if (err != cudaSuccess) return run.Fail(err, "string sort or device to host copy");
  run.RecordTimes();
  return run.report();
}

}  // namespace sortd::cuda
