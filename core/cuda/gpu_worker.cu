// GPU worker: slots (stream + device buffers + pinned staging), pooled
// device memory grown on demand up to a cap, chunked host<->device
// pipelines, and error classification (out of memory and errors before any
// output leave the host arrays intact, so the caller can fall back).
#include "core/cuda/gpu_worker.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/cuda/radix_kernels.cuh"
#include "core/cuda/segmented_sort.cuh"

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

namespace {

// Host -> device through the two pinned chunks: fill(staging, offset, len)
// puts bytes [offset, offset + len) of the upload into a chunk, and that
// host copy overlaps the DMA of the other chunk.
template <typename Fill>
cudaError_t Upload(Slot& s, size_t chunk, void* dev, size_t bytes, Fill fill) {
  char* dst = static_cast<char*>(dev);
  for (size_t c = 0, off = 0; off < bytes; ++c, off += chunk) {
    const int b = static_cast<int>(c & 1);
    const size_t len = std::min(chunk, bytes - off);
    if (c >= 2) {
      cudaError_t err = cudaEventSynchronize(s.chunk_done[b]);
      if (err != cudaSuccess) return err;
    }
    fill(static_cast<char*>(s.staging[b]), off, len);
    cudaError_t err = cudaMemcpyAsync(dst + off, s.staging[b], len, cudaMemcpyHostToDevice, s.stream);
    if (err == cudaSuccess) err = cudaEventRecord(s.chunk_done[b], s.stream);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

// Device -> host through the two pinned chunks; consume(staged, offset, len)
// copies each chunk out while the next one transfers.
template <typename Consume>
cudaError_t Download(Slot& s, size_t chunk, const void* dev, size_t bytes, Consume consume) {
  const char* src = static_cast<const char*>(dev);
  const size_t chunks = (bytes + chunk - 1) / chunk;
  auto enqueue = [&](size_t c) {
    const int b = static_cast<int>(c & 1);
    const size_t off = c * chunk;
    cudaError_t err = cudaMemcpyAsync(s.staging[b], src + off, std::min(chunk, bytes - off),
                                      cudaMemcpyDeviceToHost, s.stream);
    return err == cudaSuccess ? cudaEventRecord(s.chunk_done[b], s.stream) : err;
  };
  for (size_t c = 0; c < std::min<size_t>(chunks, 2); ++c) {
    cudaError_t err = enqueue(c);
    if (err != cudaSuccess) return err;
  }
  for (size_t c = 0; c < chunks; ++c) {
    const int b = static_cast<int>(c & 1);
    cudaError_t err = cudaEventSynchronize(s.chunk_done[b]);
    if (err != cudaSuccess) return err;
    const size_t off = c * chunk;
    consume(s.staging[b], off, std::min(chunk, bytes - off));
    if (c + 2 < chunks) {
      err = enqueue(c + 2);
      if (err != cudaSuccess) return err;
    }
  }
  return cudaSuccess;
}

}  // namespace

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
  state->slots.resize(state->options.slots);
  for (Slot& s : state->slots) {
    if ((err = cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking)) != cudaSuccess) {
      return fail("cudaStreamCreate", err);
    }
    for (cudaEvent_t* e : {&s.upload_start, &s.sort_start, &s.sort_stop}) {
      if ((err = cudaEventCreate(e)) != cudaSuccess) return fail("cudaEventCreate", err);
    }
    for (cudaEvent_t& e : s.chunk_done) {
      if ((err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming)) != cudaSuccess) {
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

  bool Refused() {
    if (st_.healthy.load()) return false;
    report_.outcome = GpuSortOutcome::kFailedIntact;
    report_.message = where() + "unavailable after an earlier device error";
    return true;
  }

  GpuSortReport NoMemory(size_t needed) {
    report_.outcome = GpuSortOutcome::kNoMemory;
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
        if (!s.busy && st_.BusyBytes(&s) + total <= st_.max_pool_bytes) {
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

  Slot& slot() { return *slot_; }
  size_t chunk() const { return st_.options.staging_chunk_bytes; }
  void OutputStarted() { output_started_ = true; }

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

  // Kernel timing from the slot's events (after sort_stop completed).
  void RecordTimes() {
    float upload_ms = 0, sort_ms = 0;
    cudaEventElapsedTime(&upload_ms, slot_->upload_start, slot_->sort_start);
    cudaEventElapsedTime(&sort_ms, slot_->sort_start, slot_->sort_stop);
    report_.h2d_seconds = upload_ms / 1e3;
    report_.kernel_seconds = sort_ms / 1e3;
  }

 private:
  State& st_;
  Slot* slot_ = nullptr;
  GpuSortReport report_;
  bool output_started_ = false;
};

GpuSortReport GpuWorker::Sort(const GpuSortJob& job) {
  State& st = *state_;
  Job run(st);
  if (run.Refused()) return run.report();
  if (job.num_items == 0) return run.report();

  const size_t n = job.num_items;
  const size_t key_bytes = RadixKeyBytes(job.key_type);
  const size_t index_bytes = job.indices == nullptr ? 0 : (n < (size_t{1} << 32) ? 4 : 8);
  RadixSortProblem problem;
  problem.key_type = job.key_type;
  problem.num_items = n;
  problem.descending = job.descending;
  problem.value_bytes = static_cast<int>(index_bytes);
  Layout l{};
  l.keys_in = 0;
  l.keys_out = l.keys_in + AlignUp(n * key_bytes);
  l.index_in = l.keys_out + AlignUp(n * key_bytes);
  l.index_out = l.index_in + AlignUp(n * index_bytes);
  l.temp = l.index_out + AlignUp(n * index_bytes);
  cudaError_t err = RadixSort(nullptr, l.temp_bytes, problem, nullptr);
  l.total = l.temp + AlignUp(l.temp_bytes);
  if (err != cudaSuccess) return run.Fail(err, "sizing the radix sort");
  // Never fits: do not queue behind GPU work.
  if (l.total > st.max_pool_bytes) return run.NoMemory(l.total);
  err = run.Acquire(l.total);
  if (err == cudaErrorMemoryAllocation) return run.NoMemory(l.total);
  if (err != cudaSuccess) return run.Fail(err, "preparing the device");

  Slot& s = run.slot();
  const size_t chunk = run.chunk();
  char* base = s.device;
  problem.d_keys_in = base + l.keys_in;
  problem.d_keys_out = base + l.keys_out;
  problem.d_values_in = index_bytes ? base + l.index_in : nullptr;
  problem.d_values_out = index_bytes ? base + l.index_out : nullptr;

  if (index_bytes == 4) {
    IotaKernel<uint32_t><<<std::min<size_t>((n + 255) / 256, 4096), 256, 0, s.stream>>>(
        reinterpret_cast<uint32_t*>(base + l.index_in), n);
  } else if (index_bytes == 8) {
    IotaKernel<uint64_t><<<std::min<size_t>((n + 255) / 256, 4096), 256, 0, s.stream>>>(
        reinterpret_cast<uint64_t*>(base + l.index_in), n);
  }
  if ((err = cudaGetLastError()) != cudaSuccess) return run.Fail(err, "iota");
  if ((err = cudaEventRecord(s.upload_start, s.stream)) != cudaSuccess) return run.Fail(err, "event");
  const char* keys_in = static_cast<const char*>(job.keys);
  err = Upload(s, chunk, base + l.keys_in, n * key_bytes, [&](char* staged, size_t off, size_t len) {
    std::memcpy(staged, keys_in + off, len);
  });
  if (err != cudaSuccess) return run.Fail(err, "host to device copy");
  if ((err = cudaEventRecord(s.sort_start, s.stream)) != cudaSuccess) return run.Fail(err, "event");
  size_t temp_bytes = l.temp_bytes;
  if ((err = RadixSort(base + l.temp, temp_bytes, problem, s.stream)) != cudaSuccess) {
    return run.Fail(err, "radix sort");
  }
  if ((err = cudaEventRecord(s.sort_stop, s.stream)) != cudaSuccess) return run.Fail(err, "event");
  if ((err = cudaEventSynchronize(s.sort_stop)) != cudaSuccess) return run.Fail(err, "radix sort");
  run.RecordTimes();

  const auto download_start = std::chrono::steady_clock::now();
  run.OutputStarted();
  char* keys_out = static_cast<char*>(job.keys);
  err = Download(s, chunk, base + l.keys_out, n * key_bytes,
                 [&](const void* staged, size_t off, size_t len) {
                   std::memcpy(keys_out + off, staged, len);
                 });
  if (err != cudaSuccess) return run.Fail(err, "device to host copy");
  if (index_bytes == 4) {
    err = Download(s, chunk, base + l.index_out, n * 4,
                   [&](const void* staged, size_t off, size_t len) {
                     const uint32_t* src = static_cast<const uint32_t*>(staged);
                     uint64_t* dst = job.indices + off / 4;
                     for (size_t i = 0; i < len / 4; ++i) dst[i] = src[i];
                   });
  } else if (index_bytes == 8) {
    err = Download(s, chunk, base + l.index_out, n * 8,
                   [&](const void* staged, size_t off, size_t len) {
                     std::memcpy(reinterpret_cast<char*>(job.indices) + off, staged, len);
                   });
  }
  if (err != cudaSuccess) return run.Fail(err, "device to host copy");
  run.report().d2h_seconds = SecondsSince(download_start);
  return run.report();
}

namespace {

// Walks the concatenation of a batch's arrays, `element_bytes` per key, in
// order: Next(len, fn) calls fn(segment, byte offset in that segment, byte
// offset in this step, bytes) for the next `len` bytes.
class ConcatWalker {
 public:
  ConcatWalker(const GpuBatchJob& job, size_t element_bytes)
      : job_(job), element_bytes_(element_bytes) {}
  template <typename Fn>
  void Next(size_t len, Fn fn) {
    size_t done = 0;
    while (done < len && segment_ < job_.num_segments) {
      const size_t segment_bytes = job_.segments[segment_].num_items * element_bytes_;
      if (within_ == segment_bytes) {
        ++segment_;
        within_ = 0;
        continue;
      }
      const size_t take = std::min(len - done, segment_bytes - within_);
      fn(job_.segments[segment_], within_, done, take);
      within_ += take;
      done += take;
    }
  }

 private:
  const GpuBatchJob& job_;
  size_t element_bytes_;
  size_t segment_ = 0;
  size_t within_ = 0;
};

}  // namespace

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
  if (total > st.max_pool_bytes) return run.NoMemory(total);
  err = run.Acquire(total);
  if (err == cudaErrorMemoryAllocation) return run.NoMemory(total);
  if (err != cudaSuccess) return run.Fail(err, "preparing the device");

  Slot& s = run.slot();
  const size_t chunk = run.chunk();
  char* base = s.device;
  problem.d_offsets = reinterpret_cast<const uint32_t*>(base);
  problem.d_keys_in = base + keys_in_at;
  problem.d_keys_out = base + keys_out_at;
  problem.d_indices_out = want_positions ? reinterpret_cast<uint32_t*>(base + positions_at) : nullptr;

  if ((err = cudaEventRecord(s.upload_start, s.stream)) != cudaSuccess) return run.Fail(err, "event");
  ConcatWalker gather(job, key_bytes);
  const char* offsets_src = reinterpret_cast<const char*>(offsets.data());
  err = Upload(s, chunk, base, keys_in_at + n * key_bytes, [&](char* staged, size_t off, size_t len) {
    if (off < offsets_bytes) {  // the offsets (the alignment gap is never read)
      const size_t head = std::min(len, offsets_bytes - off);
      const size_t real = off < offsets.size() * 4 ? std::min(head, offsets.size() * 4 - off) : 0;
      std::memcpy(staged, offsets_src + off, real);
      staged += head;
      len -= head;
    }
    gather.Next(len, [&](const GpuBatchSegment& seg, size_t within, size_t at, size_t bytes) {
      std::memcpy(staged + at, static_cast<const char*>(seg.keys_in) + within, bytes);
    });
  });
  if (err != cudaSuccess) return run.Fail(err, "host to device copy");
  if ((err = cudaEventRecord(s.sort_start, s.stream)) != cudaSuccess) return run.Fail(err, "event");
  err = SegmentedSort(base + temp_at, temp_bytes, problem, s.stream);
  if (err != cudaSuccess) return run.Fail(err, "segmented sort");
  if ((err = cudaEventRecord(s.sort_stop, s.stream)) != cudaSuccess) return run.Fail(err, "event");
  if ((err = cudaEventSynchronize(s.sort_stop)) != cudaSuccess) return run.Fail(err, "segmented sort");
  run.RecordTimes();

  const auto download_start = std::chrono::steady_clock::now();
  run.OutputStarted();
  ConcatWalker scatter(job, key_bytes);
  err = Download(s, chunk, base + keys_out_at, n * key_bytes,
                 [&](const void* staged, size_t, size_t len) {
                   scatter.Next(len, [&](const GpuBatchSegment& seg, size_t within, size_t at,
                                         size_t bytes) {
                     std::memcpy(static_cast<char*>(seg.keys_out) + within,
                                 static_cast<const char*>(staged) + at, bytes);
                   });
                 });
  if (err != cudaSuccess) return run.Fail(err, "device to host copy");
  if (want_positions) {
    ConcatWalker widen(job, 4);
    err = Download(s, chunk, base + positions_at, n * 4,
                   [&](const void* staged, size_t, size_t len) {
                     widen.Next(len, [&](const GpuBatchSegment& seg, size_t within, size_t at,
                                         size_t bytes) {
                       if (seg.indices == nullptr) return;
                       const uint32_t* src = reinterpret_cast<const uint32_t*>(
                           static_cast<const char*>(staged) + at);
                       uint64_t* dst = seg.indices + within / 4;
                       for (size_t i = 0; i < bytes / 4; ++i) dst[i] = src[i];
                     });
                   });
    if (err != cudaSuccess) return run.Fail(err, "device to host copy");
  }
  run.report().d2h_seconds = SecondsSince(download_start);
  return run.report();
}

}  // namespace sortd::cuda
