#include "core/host_memory.h"

#include <new>
#include <vector>

#include "core/gpu_info.h"

namespace sortd {
namespace {

// Pinned blocks are rounded up so that sizes that differ a little share
// (and to whole huge pages).
constexpr size_t kPinnedGranule = size_t{2} << 20;

}  // namespace

HostBuffer& HostBuffer::operator=(HostBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    pool_ = other.pool_;
    data_ = other.data_;
    capacity_ = other.capacity_;
    pinned_ = other.pinned_;
    other.pool_ = nullptr;
    other.data_ = nullptr;
    other.capacity_ = 0;
    other.pinned_ = false;
  }
  return *this;
}

HostBuffer HostBuffer::Heap(size_t bytes) {
  HostBuffer buffer;
  if (bytes == 0) return buffer;
  // new[] without (): uninitialized, no pass over the memory.
  buffer.data_ = new uint8_t[bytes];
  buffer.capacity_ = bytes;
  return buffer;
}

void HostBuffer::Reset() {
  if (data_ != nullptr) {
    if (pinned_) {
      pool_->Release(data_, capacity_);
    } else {
      delete[] data_;
    }
  }
  pool_ = nullptr;
  data_ = nullptr;
  capacity_ = 0;
  pinned_ = false;
}

HostMemoryPool::~HostMemoryPool() {
  for (auto& [capacity, block] : idle_) FreePinnedHost(block, capacity);
}

HostBuffer HostMemoryPool::Allocate(size_t bytes) {
  HostBuffer buffer;
  if (bytes == 0) return buffer;
  // Past the cache, a buffer would be pinned and unpinned every time and
  // held pinned memory beyond the cap: heap memory, through the engine's
  // staging.
  if (pin_ && bytes >= min_pinned_bytes_ && bytes <= keep_bytes_) {
    const size_t capacity = (bytes + kPinnedGranule - 1) / kPinnedGranule * kPinnedGranule;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // The smallest idle block that fits, if it does not waste half of it.
      auto it = idle_.lower_bound(capacity);
      if (it != idle_.end() && it->first / 2 <= capacity) {
        buffer.pool_ = this;
        buffer.data_ = it->second;
        buffer.capacity_ = it->first;
        buffer.pinned_ = true;
        idle_bytes_ -= it->first;
        in_use_bytes_ += it->first;
        idle_.erase(it);
        return buffer;
      }
    }
    // None idle: pin one now (outside the lock; fails without a GPU).
    if (auto* block = static_cast<uint8_t*>(AllocatePinnedHost(capacity))) {
      std::lock_guard<std::mutex> lock(mu_);
      in_use_bytes_ += capacity;
      buffer.pool_ = this;
      buffer.data_ = block;
      buffer.capacity_ = capacity;
      buffer.pinned_ = true;
      return buffer;
    }
  }
  return HostBuffer::Heap(bytes);
}

std::vector<std::pair<size_t, uint8_t*>> HostMemoryPool::KeepIdleLocked(uint8_t* data,
                                                                        size_t capacity) {
  // The newest block is kept (the next request is likely of a similar
  // size); older idle blocks make room for it, largest first.
  std::vector<std::pair<size_t, uint8_t*>> to_free;
  while (idle_bytes_ + capacity > keep_bytes_ && !idle_.empty()) {
    auto largest = std::prev(idle_.end());
    idle_bytes_ -= largest->first;
    to_free.emplace_back(largest->first, largest->second);
    idle_.erase(largest);
  }
  idle_.emplace(capacity, data);
  idle_bytes_ += capacity;
  return to_free;
}

void HostMemoryPool::Release(uint8_t* data, size_t capacity) {
  std::vector<std::pair<size_t, uint8_t*>> to_free;
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_use_bytes_ -= capacity;
    to_free = KeepIdleLocked(data, capacity);
  }
  for (auto& [bytes, block] : to_free) FreePinnedHost(block, bytes);
}

size_t HostMemoryPool::pinned_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_bytes_;
}

size_t HostMemoryPool::pinned_idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_bytes_;
}

}  // namespace sortd
