// One GPU's slots and device pool. A slot is what one job holds while it
// runs: a stream, its pinned staging (core/cuda/transfer.cuh), timing
// events and a device buffer. The buffers come from a pool capped at
// max_bytes that grows on demand and is reused; a job leases a slot whose
// buffer has room for it, waiting while busy slots leave too little.
// Arriving slots are kept apart for sorts whose input is still arriving
// (they hold a slot for the network's time too) and are never waited for.
#ifndef SORTD_CORE_CUDA_DEVICE_POOL_CUH_
#define SORTD_CORE_CUDA_DEVICE_POOL_CUH_

#include <cuda_runtime.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <vector>

#include "core/cuda/transfer.cuh"

namespace sortd::cuda {

struct Slot {
  Staging staging;  // holds the slot's stream
  cudaEvent_t upload_start = nullptr, sort_start = nullptr, sort_stop = nullptr;
  char* device = nullptr;
  size_t device_bytes = 0;
  bool busy = false;
  bool arriving = false;
  cudaStream_t stream() const { return staging.stream; }
};

struct DevicePoolOptions {
  int slots = 2;
  int arriving_slots = 1;
  size_t staging_chunk_bytes = size_t{8} << 20;
  size_t max_bytes = 0;  // device bytes all slots together may hold
  // Waits on the slot's events sleep (blocking sync) instead of spinning.
  bool blocking_wait = false;
};

class DevicePool {
 public:
  // A slot held by one job; gives it back when destroyed.
  class Lease {
   public:
    Lease() = default;
    ~Lease() { Release(); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    bool held() const { return slot_ != nullptr; }
    Slot& slot() const { return *slot_; }
    void Release();

   private:
    friend class DevicePool;
    DevicePool* pool_ = nullptr;
    Slot* slot_ = nullptr;
  };

  DevicePool() = default;
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  // Creates every slot's stream and events on the current device (the
  // staging chunks are pinned on first use).
  // On failure returns the error and sets *step to what failed.
  cudaError_t Init(const DevicePoolOptions& options, const char** step);

  // Waits for a request slot and for the busy slots to leave room for
  // `bytes` (a job that fits the pool waits for memory instead of leaving
  // the GPU), then makes the slot's buffer at least that large.
  // cudaErrorMemoryAllocation when the device itself has no room.
  cudaError_t Acquire(size_t bytes, Lease* lease);
  // The same for an arriving slot, without waiting: cudaErrorNotReady when
  // none with room is free now.
  cudaError_t TryAcquireArriving(size_t bytes, Lease* lease);

  size_t max_bytes() const { return max_bytes_; }
  size_t bytes() const { return bytes_seen_.load(); }  // held by all slots
  size_t chunk_bytes() const { return options_.staging_chunk_bytes; }

 private:
  size_t BusyBytes(const Slot* except) const;
  cudaError_t Grow(Slot& slot, size_t needed);
  cudaError_t Take(Slot& slot, size_t bytes, Lease* lease);

  DevicePoolOptions options_;
  size_t max_bytes_ = 0;
  std::mutex mu_;
  std::condition_variable slot_free_;
  std::vector<Slot> slots_;
  size_t bytes_ = 0;  // guarded by mu_
  std::atomic<size_t> bytes_seen_{0};
};

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_DEVICE_POOL_CUH_
