// malloc_trim(0) releases free memory of every glibc arena, including free
// pages in the middle of a heap (madvise), not only its top.
#include "server/runtime/memory_trimmer.h"

#include <malloc.h>
#include <pthread.h>

namespace sortd {

MemoryTrimmer::MemoryTrimmer(const AdmissionControl* admission, absl::Duration interval)
    : admission_(admission), interval_(interval), thread_([this] { Run(); }) {}

MemoryTrimmer::~MemoryTrimmer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

uint64_t MemoryTrimmer::trims() const {
  std::lock_guard<std::mutex> lock(mu_);
  return trims_;
}

void MemoryTrimmer::Run() {
  pthread_setname_np(pthread_self(), "sortd-trim");
  uint64_t trimmed_at = admission_->admitted_total();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_cv_.wait_for(lock, absl::ToChronoNanoseconds(interval_), [this] { return stop_; })) {
    const uint64_t admitted = admission_->admitted_total();
    if (admitted == trimmed_at || admission_->inflight_requests() != 0) continue;
    lock.unlock();
    malloc_trim(0);
    lock.lock();
    trimmed_at = admitted;
    ++trims_;
  }
}

}  // namespace sortd
