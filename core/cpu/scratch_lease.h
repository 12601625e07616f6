// Scratch memory kept by each thread for the CPU engine's sorts: touching
// fresh memory costs more than a pass over it on the development VMs (page
// faults, ~16 us each on the Zen 5 VM; huge pages may wait for
// compaction), and a sort of a few thousand keys is over in microseconds.
#ifndef SORTD_CORE_CPU_SCRATCH_LEASE_H_
#define SORTD_CORE_CPU_SCRATCH_LEASE_H_

#include <cstddef>
#include <cstdlib>

#include "core/cpu/parallel.h"

namespace sortd::cpu {

// A thread keeps kScratchSlots buffers. A lease takes the first slot that
// no live lease on the thread holds (the outermost lease slot 0, one taken
// inside it slot 1, ...), grows it when too small and leaves it with the
// thread, up to the slot's cap. Slot 0 serves the radix sorts' scratch of
// large arrays (kKeptScratchBytes); the inner slots serve what an engine
// call holds around a sort (argsort + gather's indices and value copy,
// packed words, and the sort's scratch inside them) and keep less. Larger
// leases, and leases when every slot is held, allocate their own memory
// and free it when done, so that a server's pool threads never hold more
// than kKeptScratchBytes + (kScratchSlots - 1) * kKeptInnerScratchBytes
// each after a large sort (sortd's memory targets count the array, not a
// copy per thread).
inline constexpr size_t kKeptScratchBytes = size_t{64} << 20;
inline constexpr size_t kKeptInnerScratchBytes = size_t{16} << 20;
inline constexpr int kScratchSlots = 3;

class ScratchLease {
 public:
  explicit ScratchLease(size_t bytes) {
    Held* slots = ThreadSlots();
    for (int s = 0; s < kScratchSlots; ++s) {
      Held& held = slots[s];
      if (held.leased) continue;
      if (bytes > (s == 0 ? kKeptScratchBytes : kKeptInnerScratchBytes)) break;
      if (held.bytes < bytes) {
        std::free(held.data);
        held.data = nullptr;  // AllocateScratch may throw
        held.bytes = 0;
        held.data = AllocateScratch(bytes);
        held.bytes = bytes;
      }
      held.leased = true;
      held_ = &held;
      data_ = held.data;
      return;
    }
    owned_ = AllocateScratch(bytes);
    data_ = owned_;
  }
  ~ScratchLease() {
    if (held_ != nullptr) {
      held_->leased = false;
    } else {
      std::free(owned_);
    }
  }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  // Whether the memory stays with the thread (tests).
  bool kept() const { return held_ != nullptr; }

 private:
  struct Held {
    void* data = nullptr;
    size_t bytes = 0;
    bool leased = false;
    ~Held() { std::free(data); }
  };
  static Held* ThreadSlots() {
    thread_local Held slots[kScratchSlots];
    return slots;
  }

  Held* held_ = nullptr;
  void* owned_ = nullptr;
  void* data_ = nullptr;
};

}  // namespace sortd::cpu

#endif  // SORTD_CORE_CPU_SCRATCH_LEASE_H_
