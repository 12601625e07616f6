// Which GPU takes the next job: a pure function of each worker's state, so
// that the placement rule is tested without a GPU (tests/core).
#ifndef SORTD_CORE_GPU_PLACEMENT_H_
#define SORTD_CORE_GPU_PLACEMENT_H_

#include <cstddef>
#include <limits>
#include <vector>

namespace sortd {

struct GpuLoad {
  bool healthy = true;
  int in_flight = 0;  // jobs holding or waiting for one of its slots
};

inline constexpr size_t kNoGpu = std::numeric_limits<size_t>::max();

// The healthy GPU with the fewest jobs in flight among `n`, `load_of(i)`
// giving each one's GpuLoad; ties go to the first at or after `start` (mod
// n), so that a caller rotating `start` spreads jobs that arrive while
// every GPU is idle (a large sort spends most of its time in the
// transport, so that is the common case) instead of sending them all to
// GPU 0. kNoGpu when none is healthy.
template <typename LoadOf>
size_t PickGpu(size_t n, size_t start, LoadOf&& load_of) {
  size_t best = kNoGpu;
  int best_in_flight = 0;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (start + k) % n;
    const GpuLoad load = load_of(i);
    if (!load.healthy) continue;
    if (best == kNoGpu || load.in_flight < best_in_flight) {
      best = i;
      best_in_flight = load.in_flight;
    }
  }
  return best;
}

inline size_t PickGpu(const std::vector<GpuLoad>& gpus, size_t start) {
  return PickGpu(gpus.size(), start, [&](size_t i) { return gpus[i]; });
}

}  // namespace sortd

#endif  // SORTD_CORE_GPU_PLACEMENT_H_
