// The SIGBUS guard over system regions' mappings (mapping_guard.h). The
// handler reads a fixed table of atomics (no locks, no allocation) and calls
// mmap, which on Linux is a plain system call.
#include "server/service/mapping_guard.h"

#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace sortd {
namespace {

struct Slot {
  std::atomic<uintptr_t> start{0};  // 0: free
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> broken{false};
  std::atomic<bool> taken{false};
};

Slot slots[kMaxGuardedMappings];
struct sigaction previous_action;

void OnSigbus(int signal, siginfo_t* info, void* context) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& slot : slots) {
    const uintptr_t start = slot.start.load(std::memory_order_acquire);
    if (start == 0 || address < start || address >= slot.end.load(std::memory_order_acquire)) {
      continue;
    }
    // Throwaway pages over the whole mapping: the access that faulted is
    // retried on them, and so is every later one.
    void* replaced = mmap(reinterpret_cast<void*>(start), slot.end.load() - start,
                          PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (replaced != MAP_FAILED) {
      slot.broken.store(true, std::memory_order_release);
      return;
    }
    break;
  }
  // Not a guarded mapping: what SIGBUS would have done without the guard.
  if (previous_action.sa_flags & SA_SIGINFO) {
    if (previous_action.sa_sigaction != nullptr) {
      previous_action.sa_sigaction(signal, info, context);
      return;
    }
  } else if (previous_action.sa_handler != SIG_DFL && previous_action.sa_handler != SIG_IGN) {
    previous_action.sa_handler(signal);
    return;
  }
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigaction(SIGBUS, &fallback, nullptr);
  raise(SIGBUS);
}

}  // namespace

void InstallMappingGuard() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = OnSigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &previous_action);
  });
}

int GuardMapping(void* start, size_t bytes) {
  for (int i = 0; i < kMaxGuardedMappings; ++i) {
    bool expected = false;
    if (!slots[i].taken.compare_exchange_strong(expected, true)) continue;
    slots[i].broken.store(false);
    slots[i].end.store(reinterpret_cast<uintptr_t>(start) + bytes, std::memory_order_release);
    slots[i].start.store(reinterpret_cast<uintptr_t>(start), std::memory_order_release);
    return i;
  }
  return -1;
}

void UnguardMapping(int slot) {
  if (slot < 0 || slot >= kMaxGuardedMappings) return;
  slots[slot].start.store(0, std::memory_order_release);
  slots[slot].end.store(0, std::memory_order_release);
  slots[slot].taken.store(false, std::memory_order_release);
}

bool MappingBroken(int slot) {
  return slot >= 0 && slot < kMaxGuardedMappings && slots[slot].broken.load(std::memory_order_acquire);
}

}  // namespace sortd
