// The SIGBUS guard over system regions' mappings (mapping_guard.h). The
// handler reads a fixed table of atomics (no locks, no allocation) and calls
// mmap, which on Linux is a plain system call.
//
// Each slot is a seqlock: writers (GuardMapping/UnguardMapping, serialised by
// a mutex) make `seq` odd, write start and end, and make it even again; the
// handler reads seq, start, end, seq and uses the slot only when both reads
// of seq are the same even number, so it never mixes two mappings' bounds.
// A slot being rewritten can be skipped safely: the mapping a fault hits is
// in use by the faulting thread, which holds the region, so its slot is
// stable.
#include "server/regions/mapping_guard.h"

#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace sortd {
namespace {

// A slot's mapping: as mapped, being replaced by zero pages (a fault on
// another thread does that), replaced, or not replaceable (mmap failed).
enum : int { kIntact, kReplacing, kReplaced, kFailed };

struct Slot {
  std::atomic<uint64_t> seq{0};
  std::atomic<uintptr_t> start{0};  // 0: free
  std::atomic<uintptr_t> end{0};
  std::atomic<int> state{kIntact};
};

Slot slots[kMaxGuardedMappings];
std::mutex writers;  // serialises GuardMapping/UnguardMapping
struct sigaction previous_action;
std::atomic<bool> installed{false};

// Whether the fault at `address` was in a guarded mapping; if so, that
// mapping now holds zero pages and is marked broken.
bool ReplaceFaultedMapping(uintptr_t address) {
  for (Slot& slot : slots) {
    const uint64_t seq = slot.seq.load(std::memory_order_acquire);
    if (seq & 1) continue;
    const uintptr_t start = slot.start.load(std::memory_order_acquire);
    const uintptr_t end = slot.end.load(std::memory_order_acquire);
    if (slot.seq.load(std::memory_order_acquire) != seq) continue;
    if (start == 0 || address < start || address >= end) continue;
    int expected = kIntact;
    if (!slot.state.compare_exchange_strong(expected, kReplacing, std::memory_order_acq_rel)) {
      // Another thread's fault replaces (or replaced) it: retry the access.
      // Zero pages do not fault, so only a failed replacement ends here.
      return expected != kFailed;
    }
    // Throwaway pages over the whole mapping: the access that faulted is
    // retried on them, and so is every later one.
    void* replaced = mmap(reinterpret_cast<void*>(start), end - start, PROT_READ | PROT_WRITE,
                          MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    slot.state.store(replaced != MAP_FAILED ? kReplaced : kFailed, std::memory_order_release);
    return replaced != MAP_FAILED;
  }
  return false;
}

void OnSigbus(int signal, siginfo_t* info, void* context) {
  // Only a real access fault (not a signal sent by a process, not an
  // alignment fault) at a guarded address.
  const bool access_fault = info != nullptr && info->si_code > 0 &&
                            (info->si_code == BUS_ADRERR
#ifdef BUS_MCEERR_AR
                             || info->si_code == BUS_MCEERR_AR
#endif
                            );
  if (access_fault && ReplaceFaultedMapping(reinterpret_cast<uintptr_t>(info->si_addr))) return;
  // Not ours: what SIGBUS would have done without the guard.
  if (previous_action.sa_flags & SA_SIGINFO) {
    if (previous_action.sa_sigaction != nullptr) {
      previous_action.sa_sigaction(signal, info, context);
      return;
    }
  } else if (previous_action.sa_handler == SIG_IGN) {
    return;
  } else if (previous_action.sa_handler != SIG_DFL) {
    previous_action.sa_handler(signal);
    return;
  }
  // The default action, for the real fault: returning retries the access,
  // which faults again and is delivered with its own address and code.
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(SIGBUS, &fallback, nullptr);
  if (info == nullptr || info->si_code <= 0) raise(SIGBUS);  // a sent signal: resend it
}

}  // namespace

bool InstallMappingGuard() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = OnSigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    installed.store(sigaction(SIGBUS, &action, &previous_action) == 0);
  });
  return installed.load();
}

int GuardMapping(void* start, size_t bytes) {
  std::lock_guard<std::mutex> lock(writers);
  for (int i = 0; i < kMaxGuardedMappings; ++i) {
    Slot& slot = slots[i];
    if (slot.start.load(std::memory_order_relaxed) != 0) continue;
    slot.seq.fetch_add(1, std::memory_order_acq_rel);  // odd: being written
    slot.state.store(kIntact, std::memory_order_relaxed);
    slot.end.store(reinterpret_cast<uintptr_t>(start) + bytes, std::memory_order_release);
    slot.start.store(reinterpret_cast<uintptr_t>(start), std::memory_order_release);
    slot.seq.fetch_add(1, std::memory_order_acq_rel);  // even: stable
    return i;
  }
  return -1;
}

void UnguardMapping(int slot_index) {
  if (slot_index < 0 || slot_index >= kMaxGuardedMappings) return;
  std::lock_guard<std::mutex> lock(writers);
  Slot& slot = slots[slot_index];
  slot.seq.fetch_add(1, std::memory_order_acq_rel);
  slot.start.store(0, std::memory_order_release);
  slot.end.store(0, std::memory_order_release);
  slot.seq.fetch_add(1, std::memory_order_acq_rel);
}

bool MappingBroken(int slot) {
  return slot >= 0 && slot < kMaxGuardedMappings &&
         slots[slot].state.load(std::memory_order_acquire) != kIntact;
}

}  // namespace sortd
