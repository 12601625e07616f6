// Host buffers for large arrays that the GPU engine moves by DMA. Where a GPU
// serves, buffers are page-locked (pinned) memory: the engine copies them
// to and from the device directly, without its staging copies (core/cuda/
// gpu_worker.cu checks). A request that finds no idle pinned block pins one
// on the spot: transparent huge pages faulted in by several threads and
// then registered with the driver, about 50 ms per GiB on the H100 host
// (cudaHostAlloc took 0.5-0.7 s: core/gpu_info.h, docs/benchmarks.md).
// Released pinned blocks are kept for reuse, up to a cap. Everywhere else,
// and past what pinning allows, buffers are ordinary heap memory.
#ifndef SORTD_CORE_HOST_MEMORY_H_
#define SORTD_CORE_HOST_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace sortd {

class HostMemoryPool;

// One buffer: uninitialized memory of at least the bytes asked for.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(HostBuffer&& other) noexcept { *this = std::move(other); }
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer() { Reset(); }

  // Uninitialized heap memory of `bytes` (new[]; no pool involved).
  static HostBuffer Heap(size_t bytes);

  uint8_t* data() const { return data_; }
  bool pinned() const { return pinned_; }
  void Reset();

 private:
  friend class HostMemoryPool;
  HostMemoryPool* pool_ = nullptr;  // null: heap memory (new[]) nobody waits for
  uint8_t* data_ = nullptr;
  size_t capacity_ = 0;
  bool pinned_ = false;
};

class HostMemoryPool {
 public:
  // pin: use pinned memory for buffers of min_pinned_bytes to keep_bytes;
  // keep up to keep_bytes of released pinned buffers for reuse (the most
  // recently released first).
  HostMemoryPool(bool pin, size_t min_pinned_bytes, size_t keep_bytes)
      : pin_(pin), min_pinned_bytes_(min_pinned_bytes), keep_bytes_(keep_bytes) {}
  ~HostMemoryPool();  // frees the idle blocks
  HostMemoryPool(const HostMemoryPool&) = delete;
  HostMemoryPool& operator=(const HostMemoryPool&) = delete;

  // Throws std::bad_alloc when even heap memory is not available.
  HostBuffer Allocate(size_t bytes);

  // Pinned bytes held: in use, and kept idle for reuse.
  size_t pinned_in_use() const;
  size_t pinned_idle() const;

 private:
  friend class HostBuffer;
  void Release(uint8_t* data, size_t capacity);
  // Keeps an idle block, freeing older ones (largest first) to stay within
  // keep_bytes_; returns the blocks to free (outside the lock).
  std::vector<std::pair<size_t, uint8_t*>> KeepIdleLocked(uint8_t* data, size_t capacity);

  const bool pin_;
  const size_t min_pinned_bytes_;
  const size_t keep_bytes_;
  mutable std::mutex mu_;
  std::multimap<size_t, uint8_t*> idle_;  // capacity -> block
  size_t idle_bytes_ = 0;
  size_t in_use_bytes_ = 0;
};

}  // namespace sortd

#endif  // SORTD_CORE_HOST_MEMORY_H_
