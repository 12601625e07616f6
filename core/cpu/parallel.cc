// Thread fan-out for the CPU engine's large-array path. Threads are
// short-lived: the path only runs for arrays big enough (hundreds of
// thousands of keys) that a thread start (~20 us) is noise.
#include "core/cpu/parallel.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>
#include <thread>

namespace sortd::cpu {

void RunTasks(int tasks, const std::function<void(int)>& fn) {
  if (tasks <= 0) return;
  std::vector<std::thread> workers;
  workers.reserve(tasks - 1);
  for (int t = 1; t < tasks; ++t) workers.emplace_back(fn, t);
  fn(0);
  for (auto& w : workers) w.join();
}

void* AllocateScratch(size_t bytes) {
  constexpr size_t kHugePage = size_t{2} << 20;
  if (bytes < kHugePage) {
    void* p = std::malloc(bytes == 0 ? 1 : bytes);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (p == nullptr) throw std::bad_alloc();
  madvise(p, rounded, MADV_HUGEPAGE);  // a hint; failure only costs speed
  return p;
}

}  // namespace sortd::cpu
