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
    pin_after_ = other.pin_after_;
    other.pool_ = nullptr;
    other.data_ = nullptr;
    other.capacity_ = 0;
    other.pinned_ = false;
    other.pin_after_ = 0;
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
      if (pin_after_ > 0 && pool_ != nullptr) {
        std::lock_guard<std::mutex> lock(pool_->mu_);
        pool_->PinInBackgroundLocked(pin_after_);
      }
    }
  }
  pool_ = nullptr;
  data_ = nullptr;
  capacity_ = 0;
  pinned_ = false;
  pin_after_ = 0;
}

HostMemoryPool::~HostMemoryPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    to_pin_.clear();
  }
  pin_wake_.notify_all();
  if (pinner_.joinable()) pinner_.join();
  for (auto& [capacity, block] : idle_) FreePinnedHost(block);
}

HostBuffer HostMemoryPool::Allocate(size_t bytes) {
  HostBuffer buffer;
  if (bytes == 0) return buffer;
  // A buffer larger than the cache would be pinned afresh every time, which
  // costs more than the engine's staging copies (docs/benchmarks.md).
  if (pin_ && bytes >= min_pinned_bytes_ && bytes <= keep_bytes_) {
    const size_t capacity = (bytes + kPinnedGranule - 1) / kPinnedGranule * kPinnedGranule;
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
    // None: heap memory now (through the engine's staging); a block of
    // this size is pinned for the next request once this one is released.
    buffer = HostBuffer::Heap(bytes);
    buffer.pool_ = this;
    buffer.pin_after_ = capacity;
    return buffer;
  }
  return HostBuffer::Heap(bytes);
}

void HostMemoryPool::PinInBackgroundLocked(size_t capacity) {
  if (stopping_) return;
  for (size_t queued : to_pin_) {
    if (queued == capacity) return;  // one already on its way
  }
  to_pin_.push_back(capacity);
  if (!pinner_.joinable()) pinner_ = std::thread([this] { PinLoop(); });
  pin_wake_.notify_one();
}

void HostMemoryPool::PinLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    pin_wake_.wait(lock, [this] { return stopping_ || !to_pin_.empty(); });
    if (stopping_) break;
    const size_t capacity = to_pin_.front();
    to_pin_.pop_front();
    pinning_ = true;
    lock.unlock();
    auto* block = static_cast<uint8_t*>(AllocatePinnedHost(capacity));
    lock.lock();
    pinning_ = false;
    std::vector<uint8_t*> to_free;
    if (block != nullptr) to_free = KeepIdleLocked(block, capacity);
    if (to_pin_.empty()) pin_idle_.notify_all();
    if (!to_free.empty()) {
      lock.unlock();
      for (uint8_t* b : to_free) FreePinnedHost(b);
      lock.lock();
    }
  }
  pinning_ = false;
  pin_idle_.notify_all();
}

void HostMemoryPool::WaitForPinning() {
  std::unique_lock<std::mutex> lock(mu_);
  pin_idle_.wait(lock, [this] { return stopping_ || (to_pin_.empty() && !pinning_); });
}

std::vector<uint8_t*> HostMemoryPool::KeepIdleLocked(uint8_t* data, size_t capacity) {
  // The newest block is kept (the next request is likely of a similar
  // size); older idle blocks make room for it, largest first.
  std::vector<uint8_t*> to_free;
  while (idle_bytes_ + capacity > keep_bytes_ && !idle_.empty()) {
    auto largest = std::prev(idle_.end());
    idle_bytes_ -= largest->first;
    to_free.push_back(largest->second);
    idle_.erase(largest);
  }
  idle_.emplace(capacity, data);
  idle_bytes_ += capacity;
  return to_free;
}

void HostMemoryPool::Release(uint8_t* data, size_t capacity) {
  std::vector<uint8_t*> to_free;
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_use_bytes_ -= capacity;
    to_free = KeepIdleLocked(data, capacity);
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
