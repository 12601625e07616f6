// Gives freed heap memory back to the operating system once the server is
// idle. glibc keeps freed blocks in its arenas (and raises its mmap
// threshold after large frees), so after a burst of large requests, or of
// cancelled ones, a server with nothing in flight kept hundreds of MiB; a
// container's memory limit counts that. Trimming only when idle keeps the
// allocator's reuse of memory under load.
#ifndef SORTD_SERVER_RUNTIME_MEMORY_TRIMMER_H_
#define SORTD_SERVER_RUNTIME_MEMORY_TRIMMER_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "absl/time/time.h"
#include "server/runtime/admission.h"

namespace sortd {

class MemoryTrimmer {
 public:
  // Checks every `interval`; trims when nothing is admitted and something
  // was since the last trim.
  MemoryTrimmer(const AdmissionControl* admission, absl::Duration interval);
  ~MemoryTrimmer();
  MemoryTrimmer(const MemoryTrimmer&) = delete;
  MemoryTrimmer& operator=(const MemoryTrimmer&) = delete;

  uint64_t trims() const;

 private:
  void Run();

  const AdmissionControl* const admission_;
  const absl::Duration interval_;
  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  uint64_t trims_ = 0;
  std::thread thread_;
};

}  // namespace sortd

#endif  // SORTD_SERVER_RUNTIME_MEMORY_TRIMMER_H_
