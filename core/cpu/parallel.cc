// Thread fan-out for the CPU engine's large-array path. Threads are
// short-lived: the path only runs for arrays big enough (hundreds of
// thousands of keys) that a thread start (~20 us) is noise.
#include "core/cpu/parallel.h"

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

}  // namespace sortd::cpu
