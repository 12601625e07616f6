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

// Host -> device through the two pinned chunks: the host copy of chunk c+1
// overlaps the DMA of chunk c.
cudaError_t Upload(Slot& s, size_t chunk, const void* host, void* dev, size_t bytes) {
  const char* src = static_cast<const char*>(host);
  char* dst = static_cast<char*>(dev);
  for (size_t c = 0, off = 0; off < bytes; ++c, off += chunk) {
    const int b = static_cast<int>(c & 1);
    const size_t len = std::min(chunk, bytes - off);
    if (c >= 2) {
      cudaError_t err = cudaEventSynchronize(s.chunk_done[b]);
      if (err != cudaSuccess) return err;
    }
    std::memcpy(s.staging[b], src + off, len);
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

GpuSortReport GpuWorker::Sort(const GpuSortJob& job) {
  State& st = *state_;
  GpuSortReport report;
  st.in_flight.fetch_add(1);
  struct InFlight {
    std::atomic<int>& n;
    ~InFlight() { n.fetch_sub(1); }
  } in_flight_guard{st.in_flight};
  // Error-message prefix, built only when a message is.
  auto where = [&] { return "GPU " + std::to_string(st.options.device) + ": "; };
  if (!st.healthy.load()) {
    report.outcome = GpuSortOutcome::kFailedIntact;
    report.message = where() + "unavailable after an earlier device error";
    return report;
  }
  if (job.num_items == 0) return report;

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

  auto no_memory = [&] {
    report.outcome = GpuSortOutcome::kNoMemory;
    report.message = where() + "needs " + std::to_string(l.total >> 20) +
                     " MiB of device memory; the pool is limited to " +
                     std::to_string(st.max_pool_bytes >> 20) + " MiB";
    return report;
  };
  // Never fits: do not queue behind GPU work.
  if (err == cudaSuccess && l.total > st.max_pool_bytes) return no_memory();
  if (err == cudaSuccess) err = cudaSetDevice(st.options.device);
  Slot* slot = nullptr;
  if (err == cudaSuccess) {
    // Wait for a free slot and for the busy slots to leave room (a job
    // that fits the pool waits for memory instead of leaving the GPU).
    std::unique_lock<std::mutex> lock(st.mu);
    st.slot_free.wait(lock, [&] {
      for (Slot& s : st.slots) {
        if (!s.busy && st.BusyBytes(&s) + l.total <= st.max_pool_bytes) {
          slot = &s;
          return true;
        }
      }
      return false;
    });
    slot->busy = true;
    err = st.EnsureDevice(*slot, l.total);
    report.pool_bytes = st.pool_bytes;
  }
  struct Release {
    State& st;
    Slot* slot;
    ~Release() {
      if (slot == nullptr) return;
      {
        std::lock_guard<std::mutex> lock(st.mu);
        slot->busy = false;
      }
      // Waiters differ in the memory they need: let each re-check.
      st.slot_free.notify_all();
    }
  } release{st, slot};
  if (err == cudaErrorMemoryAllocation) return no_memory();

  const size_t chunk = st.options.staging_chunk_bytes;
  bool output_started = false;
  auto classify = [&](cudaError_t e, const char* step) {
    report.outcome = output_started ? GpuSortOutcome::kFailedDirty : GpuSortOutcome::kFailedIntact;
    report.message = where() + step + ": " + cudaGetErrorString(e);
    // A sticky error leaves the context unusable: stop taking work.
    if (cudaDeviceSynchronize() != cudaSuccess) {
      report.device_lost = true;
      st.healthy.store(false);
    } else {
      cudaGetLastError();
    }
    return report;
  };
  if (err != cudaSuccess) return classify(err, "preparing the device");

  Slot& s = *slot;
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
  if ((err = cudaGetLastError()) != cudaSuccess) return classify(err, "iota");
  if ((err = cudaEventRecord(s.upload_start, s.stream)) != cudaSuccess) return classify(err, "event");
  if ((err = Upload(s, chunk, job.keys, base + l.keys_in, n * key_bytes)) != cudaSuccess) {
    return classify(err, "host to device copy");
  }
  if ((err = cudaEventRecord(s.sort_start, s.stream)) != cudaSuccess) return classify(err, "event");
  size_t temp_bytes = l.temp_bytes;
  if ((err = RadixSort(base + l.temp, temp_bytes, problem, s.stream)) != cudaSuccess) {
    return classify(err, "radix sort");
  }
  if ((err = cudaEventRecord(s.sort_stop, s.stream)) != cudaSuccess) return classify(err, "event");
  if ((err = cudaEventSynchronize(s.sort_stop)) != cudaSuccess) return classify(err, "radix sort");
  float upload_ms = 0, sort_ms = 0;
  cudaEventElapsedTime(&upload_ms, s.upload_start, s.sort_start);
  cudaEventElapsedTime(&sort_ms, s.sort_start, s.sort_stop);
  report.h2d_seconds = upload_ms / 1e3;
  report.kernel_seconds = sort_ms / 1e3;

  const auto download_start = std::chrono::steady_clock::now();
  output_started = true;
  char* keys_out = static_cast<char*>(job.keys);
  err = Download(s, chunk, base + l.keys_out, n * key_bytes,
                 [&](const void* staged, size_t off, size_t len) {
                   std::memcpy(keys_out + off, staged, len);
                 });
  if (err != cudaSuccess) return classify(err, "device to host copy");
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
  if (err != cudaSuccess) return classify(err, "device to host copy");
  report.d2h_seconds = SecondsSince(download_start);
  return report;
}

}  // namespace sortd::cuda
