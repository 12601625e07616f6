// The idle trimmer trims once after the server was used and is idle again,
// never while something is admitted, and not again until more work came.
#include "server/runtime/memory_trimmer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace sortd {
namespace {

// Waits (bounded) until `trimmer.trims()` reaches `want`.
bool WaitForTrims(const MemoryTrimmer& trimmer, uint64_t want) {
  for (int i = 0; i < 2000 && trimmer.trims() < want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return trimmer.trims() >= want;
}

TEST(MemoryTrimmerTest, TrimsOnceWhenIdleAfterWork) {
  AdmissionControl admission(1 << 20, 16);
  MemoryTrimmer trimmer(&admission, absl::Milliseconds(1));
  // Never used: nothing to give back.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(trimmer.trims(), 0u);

  // Busy: a request is admitted; no trim while it is in flight.
  ASSERT_TRUE(admission.Acquire(1000).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(trimmer.trims(), 0u);

  // Idle again: one trim, and no more without new work.
  admission.Release(1000);
  ASSERT_TRUE(WaitForTrims(trimmer, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(trimmer.trims(), 1u);

  ASSERT_TRUE(admission.Acquire(10).ok());
  admission.Release(10);
  EXPECT_TRUE(WaitForTrims(trimmer, 2));
}

}  // namespace
}  // namespace sortd
