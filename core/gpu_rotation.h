// Whether a GPU takes new work after CUDA errors (issue #20): a GPU whose
// jobs fail several times in a row is taken out of rotation for a
// cooldown, so that requests go to the other GPUs (or the CPU) instead of
// failing over one by one; after the cooldown it is back on probation: the
// next job it gets decides (success: back for good; failure: out again for
// twice as long, up to a maximum). Sticky errors are not this: they end
// the worker (GpuWorker::healthy). A pure state machine over a clock the
// caller passes, so that it is tested without a GPU (tests/core).
#ifndef SORTD_CORE_GPU_ROTATION_H_
#define SORTD_CORE_GPU_ROTATION_H_

#include <algorithm>
#include <mutex>

#include "absl/time/time.h"

namespace sortd {

struct GpuRotationOptions {
  // Consecutive failed jobs that take a GPU out of rotation; 0 never does.
  int failures_to_bench = 3;
  absl::Duration first_cooldown = absl::Seconds(10);
  absl::Duration max_cooldown = absl::Minutes(5);
};

class GpuRotation {
 public:
  enum class Change { kNone, kBenched, kRestored };

  GpuRotation() = default;
  explicit GpuRotation(const GpuRotationOptions& options) : options_(options) {}

  // Whether the GPU may take a job now (also on probation after the cooldown).
  bool InRotation(absl::Time now) const {
    std::lock_guard<std::mutex> lock(mu_);
    return now >= benched_until_;
  }

  // A job on this GPU failed with a CUDA error (not for lack of memory).
  // Outcomes of jobs placed before the GPU was benched, arriving while it
  // is out, change nothing: the probe after the cooldown decides.
  Change OnFailure(absl::Time now) {
    std::lock_guard<std::mutex> lock(mu_);
    if (options_.failures_to_bench <= 0 || now < benched_until_) return Change::kNone;
    const bool on_probation = cooldown_ > absl::ZeroDuration();
    if (!on_probation && ++failures_ < options_.failures_to_bench) return Change::kNone;
    // Out: for the first cooldown, or twice the last one after a failed probe.
    cooldown_ = on_probation ? std::min(cooldown_ * 2, options_.max_cooldown) : options_.first_cooldown;
    benched_until_ = now + cooldown_;
    failures_ = 0;
    return Change::kBenched;
  }

  // A job on this GPU completed: the failure streak ends, and a GPU on
  // probation is back for good.
  Change OnSuccess(absl::Time now) {
    std::lock_guard<std::mutex> lock(mu_);
    if (now < benched_until_) return Change::kNone;
    failures_ = 0;
    if (cooldown_ == absl::ZeroDuration()) return Change::kNone;
    cooldown_ = absl::ZeroDuration();
    return Change::kRestored;
  }

 private:
  GpuRotationOptions options_;
  mutable std::mutex mu_;
  int failures_ = 0;                               // in a row, while in rotation
  absl::Duration cooldown_ = absl::ZeroDuration();  // > 0: benched or on probation
  absl::Time benched_until_ = absl::InfinitePast();
};

}  // namespace sortd

#endif  // SORTD_CORE_GPU_ROTATION_H_
