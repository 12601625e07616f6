#include "core/host_memory.h"

#include <new>
#include <vector>

#include "core/gpu_info.h"

namespace sortd {
namespace {

// Pinned blocks are rounded up so that sizes that differ a little share.
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
  for (auto& [capacity, block] : idle_) FreePinnedHost(block);
}

HostBuffer HostMemoryPool::Allocate(size_t bytes) {
  HostBuffer buffer;
  if (bytes == 0) return buffer;
  // A buffer larger than the cache would be pinned afresh every time, which
  // costs more than the engine's staging copies (docs/benchmarks.md).
  if (pin_ && bytes >= min_pinned_bytes_ && bytes <= keep_bytes_) {
    const size_t capacity = (bytes + kPinnedGranule - 1) / kPinnedGranule * kPinnedGranule;
    uint8_t* block = nullptr;
    size_t got = 0;
    {
      // The smallest idle block that fits, if it does not waste half of it.
      std::lock_guard<std::mutex> lock(mu_);
      auto it = idle_.lower_bound(capacity);
      if (it != idle_.end() && it->first / 2 <= capacity) {
        got = it->first;
        block = it->second;
        idle_.erase(it);
        idle_bytes_ -= got;
        in_use_bytes_ += got;
      }
    }
    if (block == nullptr) {
      block = static_cast<uint8_t*>(AllocatePinnedHost(capacity));
      if (block != nullptr) {
        got = capacity;
        std::lock_guard<std::mutex> lock(mu_);
        in_use_bytes_ += got;
      }
    }
    if (block != nullptr) {
      buffer.pool_ = this;
      buffer.data_ = block;
      buffer.capacity_ = got;
      buffer.pinned_ = true;
      return buffer;
    }
    // Pinning failed (locked-memory limits): heap memory still works,
    // through the engine's staging copies.
  }
  // new[] without (): uninitialized, no pass over the memory.
  buffer.data_ = new uint8_t[bytes];
  buffer.capacity_ = bytes;
  return buffer;
}

void HostMemoryPool::Release(uint8_t* data, size_t capacity) {
  // The block just released is kept (the next session is likely of a
  // similar size); older idle blocks make room for it, largest first.
  std::vector<uint8_t*> to_free;
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_use_bytes_ -= capacity;
    if (capacity > keep_bytes_) {
      to_free.push_back(data);
    } else {
      while (idle_bytes_ + capacity > keep_bytes_ && !idle_.empty()) {
        auto largest = std::prev(idle_.end());
        idle_bytes_ -= largest->first;
        to_free.push_back(largest->second);
        idle_.erase(largest);
      }
      idle_.emplace(capacity, data);
      idle_bytes_ += capacity;
    }
  }
  for (uint8_t* block : to_free) FreePinnedHost(block);
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
