// The CPU engine: Highway's vqsort for numeric keys, stable argsort through
// packed (key, index) words, std::stable_sort for byte strings, and a
// multi-threaded path for large arrays.
#ifndef SORTD_CORE_CPU_CPU_ENGINE_H_
#define SORTD_CORE_CPU_CPU_ENGINE_H_

#include <cstddef>
#include <memory>

#include "core/cpu/cpu_tuning.h"
#include "core/engine.h"

namespace sortd {

struct CpuEngineOptions {
  // Threads one large sort may use; 0 means std::thread::hardware_concurrency.
  int max_threads = 0;
  // Arrays with at least this many elements take the multi-threaded path.
  size_t parallel_threshold = size_t{1} << 18;
  // Where vqsort hands over to the radix sort (core/cpu/cpu_tuning.h):
  // kAuto picks by this CPU's vendor and SIMD level. Process-wide:
  // creating an engine pins it for every CPU sort in the process (sortd
  // has one CPU engine).
  cpu::CpuTuning tuning = cpu::CpuTuning::kAuto;
};

std::unique_ptr<SortEngine> CreateCpuEngine(const CpuEngineOptions& options);

}  // namespace sortd

#endif  // SORTD_CORE_CPU_CPU_ENGINE_H_
