// Slots and the device pool (core/cuda/device_pool.cuh).
#include "core/cuda/device_pool.cuh"

#include <algorithm>

namespace sortd::cuda {
namespace {

// Device buffers grow in steps of this size so that slightly larger
// requests reuse them.
constexpr size_t kGrowStep = size_t{64} << 20;

size_t RoundUp(size_t x, size_t step) { return (x + step - 1) / step * step; }

}  // namespace

void DevicePool::Lease::Release() {
  if (slot_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(pool_->mu_);
    slot_->busy = false;
  }
  slot_ = nullptr;
  // Waiters differ in the memory they need: let each re-check.
  pool_->slot_free_.notify_all();
}

DevicePool::~DevicePool() {
  for (Slot& s : slots_) {
    if (s.stream() != nullptr) cudaStreamSynchronize(s.stream());
    cudaFree(s.device);
    for (void* p : s.staging.chunk) cudaFreeHost(p);
    for (cudaEvent_t e : {s.upload_start, s.sort_start, s.sort_stop, s.staging.done[0], s.staging.done[1]}) {
      if (e != nullptr) cudaEventDestroy(e);
    }
    if (s.stream() != nullptr) cudaStreamDestroy(s.stream());
  }
}

cudaError_t DevicePool::Init(const DevicePoolOptions& options, const char** step) {
  options_ = options;
  max_bytes_ = options.max_bytes;
  slots_.resize(options.slots + options.arriving_slots);
  for (int i = 0; i < options.arriving_slots; ++i) slots_[options.slots + i].arriving = true;
  // Every wait of a job is on one of these events.
  const unsigned wait_flag = options.blocking_wait ? cudaEventBlockingSync : 0u;
  cudaError_t err;
  for (Slot& s : slots_) {
    s.staging.chunk_bytes = options.staging_chunk_bytes;
    if ((err = cudaStreamCreateWithFlags(&s.staging.stream, cudaStreamNonBlocking)) != cudaSuccess) {
      *step = "cudaStreamCreate";
      return err;
    }
    for (cudaEvent_t* e : {&s.upload_start, &s.sort_start, &s.sort_stop, &s.staging.done[0], &s.staging.done[1]}) {
      if ((err = cudaEventCreateWithFlags(e, wait_flag)) != cudaSuccess) {
        *step = "cudaEventCreate";
        return err;
      }
    }
    // Staging chunks are pinned on first use (Staging::AllocateChunks).
  }
  return cudaSuccess;
}

// Device bytes held by busy slots other than `except` (they cannot be
// released now). Called with mu_ held.
size_t DevicePool::BusyBytes(const Slot* except) const {
  size_t bytes = 0;
  for (const Slot& s : slots_) {
    if (&s != except && s.busy) bytes += s.device_bytes;
  }
  return bytes;
}

// Makes `slot` hold at least `needed` device bytes within the cap,
// releasing idle slots' buffers (largest first) only as far as needed.
// Called with mu_ held; the caller has checked BusyBytes(&slot) + needed
// <= max_bytes_, so releasing idle buffers always makes room.
// (cudaMalloc/cudaFree under the lock: growth is rare, buffers are reused.)
cudaError_t DevicePool::Grow(Slot& slot, size_t needed) {
  if (slot.device_bytes >= needed) return cudaSuccess;
  auto release = [&](Slot& s) {
    cudaFree(s.device);
    bytes_ -= s.device_bytes;
    s.device = nullptr;
    s.device_bytes = 0;
  };
  release(slot);
  while (bytes_ + needed > max_bytes_) {
    Slot* largest = nullptr;
    for (Slot& s : slots_) {
      if (s.busy || s.device == nullptr) continue;
      if (largest == nullptr || s.device_bytes > largest->device_bytes) largest = &s;
    }
    if (largest == nullptr) break;
    release(*largest);
  }
  cudaError_t err = cudaErrorMemoryAllocation;
  if (bytes_ + needed <= max_bytes_) {
    const size_t grown = std::min(RoundUp(needed, kGrowStep), max_bytes_ - bytes_);
    void* p = nullptr;
    err = cudaMalloc(&p, grown);
    if (err == cudaSuccess) {
      slot.device = static_cast<char*>(p);
      slot.device_bytes = grown;
      bytes_ += grown;
    } else {
      cudaGetLastError();  // not sticky: clear it
    }
  }
  bytes_seen_ = bytes_;
  return err;
}

// Marks `slot` busy for `lease` and sizes its buffer. Called with mu_ held.
cudaError_t DevicePool::Take(Slot& slot, size_t bytes, Lease* lease) {
  slot.busy = true;
  lease->pool_ = this;
  lease->slot_ = &slot;
  return Grow(slot, bytes);
}

cudaError_t DevicePool::Acquire(size_t bytes, Lease* lease) {
  std::unique_lock<std::mutex> lock(mu_);
  Slot* found = nullptr;
  slot_free_.wait(lock, [&] {
    for (Slot& s : slots_) {
      if (!s.arriving && !s.busy && BusyBytes(&s) + bytes <= max_bytes_) {
        found = &s;
        return true;
      }
    }
    return false;
  });
  return Take(*found, bytes, lease);
}

cudaError_t DevicePool::TryAcquireArriving(size_t bytes, Lease* lease) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Slot& s : slots_) {
    if (s.arriving && !s.busy && BusyBytes(&s) + bytes <= max_bytes_) return Take(s, bytes, lease);
  }
  return cudaErrorNotReady;
}

}  // namespace sortd::cuda
