// A table's permutation on one slot (GpuWorker::SortTable): upload the key
// columns as they are (and their bitmaps), scan each key's range on the
// device, read the ranges back for the host's layout (GpuTableJob::plan),
// then for each packed word from the last to the first pack it on the
// device (the first pass reads the columns straight, later ones gather by
// the permutation so far) and sort (word, row) pairs stably on the radix
// core; download the rows. The columns cross PCIe once, unpacked (8.25
// bytes a row for int32 + float32 with nulls, against 12 of words and rows),
// and only the 4-byte rows come back.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cuda/gpu_job.cuh"
#include "core/cuda/radix_kernels.cuh"

namespace sortd::cuda {
namespace {

// A key as the kernels see it: its column's device copy.
struct DeviceKey {
  int encoding = 0;
  const void* data = nullptr;
  const uint8_t* validity = nullptr;
  bool nulls_last = true;
  bool descending = false;
};

__device__ __forceinline__ uint32_t HalfWord(uint32_t bits, uint32_t exponent_mask,
                                             uint32_t mantissa_mask) {
  // As core/sortable_keys.cc: every NaN one word past +inf.
  if ((bits & exponent_mask) == exponent_mask && (bits & mantissa_mask) != 0) return 0x10000u;
  return (bits & 0x8000u) ? (~bits & 0xFFFFu) : (bits | 0x8000u);
}

// Row r's order-preserving word (as core/key_transform.h's OrderedBits and
// core/sortable_keys.cc's WidenNarrow; NaN one word after +inf) and
// whether it is null.
__device__ __forceinline__ uint64_t KeyWord(const DeviceKey& key, size_t r, bool* null) {
  bool is_null = key.validity != nullptr && ((key.validity[r >> 3] >> (r & 7)) & 1) == 0;
  uint64_t word = 0;
  switch (key.encoding) {
    case GpuTableColumn::kUint32: word = static_cast<const uint32_t*>(key.data)[r]; break;
    case GpuTableColumn::kInt32: word = static_cast<const uint32_t*>(key.data)[r] ^ 0x80000000u; break;
    case GpuTableColumn::kFloat32: {
      const uint32_t bits = static_cast<const uint32_t*>(key.data)[r];
      const bool nan = (bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0;
      word = nan ? 0xFFFFFFFFu : (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
      break;
    }
    case GpuTableColumn::kUint64: word = static_cast<const uint64_t*>(key.data)[r]; break;
    case GpuTableColumn::kInt64:
      word = static_cast<const uint64_t*>(key.data)[r] ^ (uint64_t{1} << 63);
      break;
    case GpuTableColumn::kFloat64: {
      const uint64_t bits = static_cast<const uint64_t*>(key.data)[r];
      const uint64_t exp = 0x7FF0000000000000ull, man = 0x000FFFFFFFFFFFFFull;
      const bool nan = (bits & exp) == exp && (bits & man) != 0;
      word = nan ? ~uint64_t{0} : (bits >> 63) ? ~bits : (bits | (uint64_t{1} << 63));
      break;
    }
    case GpuTableColumn::kUint8: word = static_cast<const uint8_t*>(key.data)[r]; break;
    case GpuTableColumn::kInt8: word = static_cast<const uint8_t*>(key.data)[r] ^ 0x80u; break;
    case GpuTableColumn::kUint16: word = static_cast<const uint16_t*>(key.data)[r]; break;
    case GpuTableColumn::kInt16: word = static_cast<const uint16_t*>(key.data)[r] ^ 0x8000u; break;
    case GpuTableColumn::kFloat16:
      word = HalfWord(static_cast<const uint16_t*>(key.data)[r], 0x7C00u, 0x03FFu);
      break;
    case GpuTableColumn::kBFloat16:
      word = HalfWord(static_cast<const uint16_t*>(key.data)[r], 0x7F80u, 0x007Fu);
      break;
    case GpuTableColumn::kTime: {
      const uint64_t v = static_cast<const uint64_t*>(key.data)[r];
      is_null = is_null || v == (uint64_t{1} << 63);  // NaT, INT64_MIN
      word = v ^ (uint64_t{1} << 63);
      break;
    }
  }
  *null = is_null;
  return word;
}

// Threads a scan block runs, and blocks at most: each block merges its
// partial result into the key's range by one atomic each, so few blocks
// (grid-stride) keep the atomics on one address from queueing.
constexpr int kScanThreads = 256;
constexpr unsigned kScanBlocks = 1024;

// ranges[k] = {lo, hi, nulls} of key k's non-null words, every key in one
// launch: grid-stride partial results, reduced in the warp, then in the
// block through shared memory, and merged by one atomic a block.
__global__ void __launch_bounds__(kScanThreads) ScanRangesKernel(const DeviceKey* keys, int num_keys,
                                                               size_t n, GpuTableRange* ranges) {
  __shared__ uint64_t warp_lo[kScanThreads / 32], warp_hi[kScanThreads / 32], warp_nulls[kScanThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int k = 0; k < num_keys; ++k) {
    const DeviceKey key = keys[k];
    uint64_t lo = ~uint64_t{0}, hi = 0, nulls = 0;
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<size_t>(gridDim.x) * blockDim.x) {
      bool null;
      const uint64_t w = KeyWord(key, i, &null);
      nulls += null;
      lo = min(lo, null ? ~uint64_t{0} : w);
      hi = max(hi, null ? uint64_t{0} : w);
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      lo = min(lo, static_cast<uint64_t>(__shfl_down_sync(0xFFFFFFFFu, static_cast<unsigned long long>(lo), offset)));
      hi = max(hi, static_cast<uint64_t>(__shfl_down_sync(0xFFFFFFFFu, static_cast<unsigned long long>(hi), offset)));
      nulls += __shfl_down_sync(0xFFFFFFFFu, static_cast<unsigned long long>(nulls), offset);
    }
    if (lane == 0) {
      warp_lo[warp] = lo;
      warp_hi[warp] = hi;
      warp_nulls[warp] = nulls;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < kScanThreads / 32; ++w) {
        lo = min(lo, warp_lo[w]);
        hi = max(hi, warp_hi[w]);
        nulls += warp_nulls[w];
      }
      GpuTableRange* range = ranges + k;
      atomicMin(reinterpret_cast<unsigned long long*>(&range->lo), static_cast<unsigned long long>(lo));
      atomicMax(reinterpret_cast<unsigned long long*>(&range->hi), static_cast<unsigned long long>(hi));
      atomicAdd(reinterpret_cast<unsigned long long*>(&range->nulls), static_cast<unsigned long long>(nulls));
    }
    __syncthreads();  // the shared slots are reused by the next key
  }
}

// out[i] = word `fields` (all of one word) of row rows[i], as
// TableKeyPacking::Build makes it on the host. rows null (the first pass):
// row i, and start[i] = i, the rows the first sort carries.
// The keys and fields a pack kernel stages in shared memory (the table
// sort takes at most 32 keys, two fields each).
constexpr int kMaxPackKeys = 32;
constexpr int kMaxPackFields = 2 * kMaxPackKeys;

template <typename Word>
__global__ void PackWordKernel(const DeviceKey* __restrict__ keys, const GpuPackField* __restrict__ fields,
                               int num_keys, int num_fields, const uint32_t* __restrict__ rows,
                               uint32_t* __restrict__ start, size_t n, Word* __restrict__ out) {
  // Staged once a block: read per row from global memory, each field's
  // key descriptor was a chain of dependent loads before the column's own.
  __shared__ DeviceKey shared_keys[kMaxPackKeys];
  __shared__ GpuPackField shared_fields[kMaxPackFields];
  for (int t = threadIdx.x; t < num_keys; t += blockDim.x) shared_keys[t] = keys[t];
  for (int t = threadIdx.x; t < num_fields; t += blockDim.x) shared_fields[t] = fields[t];
  __syncthreads();
  keys = shared_keys;
  fields = shared_fields;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    size_t r = i;
    if (rows != nullptr) {
      r = rows[i];
    } else {
      start[i] = static_cast<uint32_t>(i);
    }
    uint64_t acc = 0, word = 0;
    bool null = false;
    int loaded = -1;
    for (int f = 0; f < num_fields; ++f) {
      const GpuPackField field = fields[f];
      const DeviceKey& key = keys[field.key];
      if (loaded != field.key) {
        word = KeyWord(key, r, &null);
        loaded = field.key;
      }
      if (field.null_bit) {
        // Set for the rows that go later: nulls when they go last.
        acc |= uint64_t{null == key.nulls_last} << field.shift;
      } else if (!null) {
        acc |= (key.descending ? field.base - word : word - field.base) << field.shift;
      }
    }
    out[i] = static_cast<Word>(acc);
  }
}

size_t ElementBytes(GpuTableColumn::Encoding e) {
  switch (e) {
    case GpuTableColumn::kUint8:
    case GpuTableColumn::kInt8: return 1;
    case GpuTableColumn::kUint16:
    case GpuTableColumn::kInt16:
    case GpuTableColumn::kFloat16:
    case GpuTableColumn::kBFloat16: return 2;
    case GpuTableColumn::kUint32:
    case GpuTableColumn::kInt32:
    case GpuTableColumn::kFloat32: return 4;
    default: return 8;
  }
}

unsigned GridFor(size_t n) {
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>((n + 255) / 256, 8192)));
}

}  // namespace

GpuSortReport RunTableSort(WorkerContext& ctx, const GpuTableJob& job) {
  const size_t n = job.num_rows;
  const int num_keys = job.num_keys;
  Job run(ctx);
  if (run.Refused()) return run.report();
  if (n > 0xFFFFFFFFull || num_keys <= 0 || num_keys > kMaxPackKeys || !job.plan || job.rows == nullptr) {
    return run.Finished(GpuSortOutcome::kFailedIntact,
                        "a table of fewer than 2^32 rows and 1 to 32 keys");
  }
  if (n == 0) return run.report();
  // The device layout: each key's column (and bitmap), the keys' ranges
  // and descriptors, the fields of a word, two word buffers (8 bytes a
  // row, so either width fits), two row buffers, the radix scratch.
  std::vector<size_t> column_at(num_keys), validity_at(num_keys);
  size_t at = 0;
  for (int k = 0; k < num_keys; ++k) {
    column_at[k] = at;
    at += AlignUp(n * ElementBytes(job.keys[k].encoding));
    validity_at[k] = at;
    if (job.keys[k].validity != nullptr) at += AlignUp((n + 7) / 8);
  }
  const size_t ranges_at = at;
  at += AlignUp(num_keys * sizeof(GpuTableRange));
  const size_t keys_at = at;
  at += AlignUp(num_keys * sizeof(DeviceKey));
  const size_t fields_at = at;
  at += AlignUp(2 * num_keys * sizeof(GpuPackField));
  const size_t words_in_at = at;
  at += AlignUp(n * 8);
  const size_t words_out_at = at;
  at += AlignUp(n * 8);
  const size_t rows_a_at = at;
  at += AlignUp(n * 4);
  const size_t rows_b_at = at;
  at += AlignUp(n * 4);
  const size_t temp_at = at;
  size_t temp_bytes = 0;
  for (RadixKeyType type : {RadixKeyType::kUint32, RadixKeyType::kUint64}) {
    RadixSortProblem p;
    p.key_type = type;
    p.num_items = n;
    p.value_bytes = 4;
    size_t bytes = 0;
    const cudaError_t err = RadixSort(nullptr, bytes, p, nullptr);
    if (err != cudaSuccess) return run.Fail(err, "sizing the table sort");
    temp_bytes = std::max(temp_bytes, bytes);
  }
  const size_t total = temp_at + AlignUp(temp_bytes);
  if (auto failed = run.Reserve(total)) return *failed;
  Slot& s = run.slot();
  char* base = s.device;
  cudaStream_t stream = s.stream();
  cudaError_t err = cudaEventRecord(s.upload_start, stream);
  if (err != cudaSuccess) return run.Fail(err, "event");
  std::vector<DeviceKey> device_keys(num_keys);
  for (int k = 0; k < num_keys; ++k) {
    const GpuTableColumn& c = job.keys[k];
    const size_t bytes = n * ElementBytes(c.encoding);
    err = run.Upload(base + column_at[k], OneExtent{HostExtent(c.data, bytes, MemoryKindOf(c.data))});
    if (err == cudaSuccess && c.validity != nullptr) {
      const size_t bits = (n + 7) / 8;
      err = run.Upload(base + validity_at[k], OneExtent{HostExtent(c.validity, bits, MemoryKindOf(c.validity))});
    }
    if (err != cudaSuccess) return run.Fail(err, "host to device copy");
    device_keys[k].encoding = c.encoding;
    device_keys[k].data = base + column_at[k];
    device_keys[k].validity = c.validity != nullptr ? reinterpret_cast<uint8_t*>(base + validity_at[k]) : nullptr;
    device_keys[k].nulls_last = c.nulls_last;
    device_keys[k].descending = c.descending;
  }
  auto* keys = reinterpret_cast<DeviceKey*>(base + keys_at);
  err = cudaMemcpyAsync(keys, device_keys.data(), num_keys * sizeof(DeviceKey), cudaMemcpyHostToDevice, stream);
  if (err != cudaSuccess) return run.Fail(err, "host to device copy");
  if ((err = cudaEventRecord(s.sort_start, stream)) != cudaSuccess) return run.Fail(err, "event");
  // The ranges, read back for the layout (the host waits once).
  auto* ranges = reinterpret_cast<GpuTableRange*>(base + ranges_at);
  std::vector<GpuTableRange> host_ranges(num_keys, GpuTableRange{~uint64_t{0}, 0, 0, 0});
  err = cudaMemcpyAsync(ranges, host_ranges.data(), num_keys * sizeof(GpuTableRange),
                        cudaMemcpyHostToDevice, stream);
  if (err == cudaSuccess) {
    ScanRangesKernel<<<std::min(GridFor(n), kScanBlocks), kScanThreads, 0, stream>>>(keys, num_keys, n,
                                                                                 ranges);
    err = cudaGetLastError();
  }
  if (err == cudaSuccess) {
    err = cudaMemcpyAsync(host_ranges.data(), ranges, num_keys * sizeof(GpuTableRange),
                          cudaMemcpyDeviceToHost, stream);
  }
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) return run.Fail(err, "scanning the table's keys");
  for (GpuTableRange& r : host_ranges) r.valid = n - r.nulls;
  std::vector<int> word_bits;
  std::vector<GpuPackField> fields;
  job.plan(host_ranges.data(), &word_bits, &fields);
  // Every word's fields in one upload, grouped by word in layout order.
  if (fields.size() > static_cast<size_t>(2 * num_keys)) {
    return run.Finished(GpuSortOutcome::kFailedIntact, "a table layout of more fields than keys allow");
  }
  std::vector<GpuPackField> by_word;
  std::vector<size_t> first_field(word_bits.size() + 1, 0);
  for (size_t w = 0; w < word_bits.size(); ++w) {
    first_field[w] = by_word.size();
    for (const GpuPackField& f : fields) {
      if (f.word == static_cast<int>(w)) by_word.push_back(f);
    }
  }
  first_field[word_bits.size()] = by_word.size();
  auto* device_fields = reinterpret_cast<GpuPackField*>(base + fields_at);
  err = cudaMemcpyAsync(device_fields, by_word.data(), by_word.size() * sizeof(GpuPackField),
                        cudaMemcpyHostToDevice, stream);
  if (err != cudaSuccess) return run.Fail(err, "host to device copy");
  auto* rows_in = reinterpret_cast<uint32_t*>(base + rows_a_at);
  auto* rows_out = reinterpret_cast<uint32_t*>(base + rows_b_at);
  if (word_bits.empty()) {  // every key constant: the input order
    IotaKernel<uint32_t><<<GridFor(n), 256, 0, stream>>>(rows_in, n);
    if ((err = cudaGetLastError()) != cudaSuccess) return run.Fail(err, "iota");
  }
  bool first = true;
  for (int w = static_cast<int>(word_bits.size()) - 1; w >= 0; --w) {
    const GpuPackField* mine = device_fields + first_field[w];
    const int count = static_cast<int>(first_field[w + 1] - first_field[w]);
    const bool narrow = word_bits[w] <= 32;
    void* words_in = base + words_in_at;
    // The first pass reads the rows in order and writes them out for the
    // sort; later ones gather by the permutation so far.
    const uint32_t* gather = first ? nullptr : rows_in;
    if (narrow) {
      PackWordKernel<uint32_t><<<GridFor(n), 256, 0, stream>>>(
          keys, mine, num_keys, count, gather, rows_in, n, static_cast<uint32_t*>(words_in));
    } else {
      PackWordKernel<uint64_t><<<GridFor(n), 256, 0, stream>>>(
          keys, mine, num_keys, count, gather, rows_in, n, static_cast<uint64_t*>(words_in));
    }
    if ((err = cudaGetLastError()) != cudaSuccess) return run.Fail(err, "packing the table's words");
    RadixSortProblem p;
    p.key_type = narrow ? RadixKeyType::kUint32 : RadixKeyType::kUint64;
    p.num_items = n;
    p.d_keys_in = words_in;
    p.d_keys_out = base + words_out_at;
    p.value_bytes = 4;
    p.d_values_in = rows_in;
    p.d_values_out = rows_out;
    p.presorted_min_items = run.options().presorted_min_items;
    size_t bytes = temp_bytes;
    err = RadixSort(base + temp_at, bytes, p, stream);
    if (err == cudaSuccess) err = run.Injected("sort");
    if (err != cudaSuccess) return run.Fail(err, "radix sort of a table's words");
    std::swap(rows_in, rows_out);  // the permutation so far is in rows_in
    first = false;
  }
  if ((err = cudaEventRecord(s.sort_stop, stream)) != cudaSuccess) return run.Fail(err, "event");
  err = run.Download(rows_in, OneExtent{HostExtent(job.rows, n * 4, MemoryKindOf(job.rows))});
  if (err == cudaSuccess) err = run.Injected("download");
  if (err != cudaSuccess) return run.Fail(err, "sort or device to host copy");
  run.RecordTimes();
  return run.report();
}

}  // namespace sortd::cuda
