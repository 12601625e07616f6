// Taking a failing GPU out of rotation and bringing it back
// (core/gpu_rotation.h), with a clock the test moves; and placement over
// GPUs some of which are out (core/gpu_placement.h).
#include "core/gpu_rotation.h"

#include <vector>

#include "core/gpu_placement.h"
#include "gtest/gtest.h"

namespace sortd {
namespace {

using Change = GpuRotation::Change;

GpuRotationOptions Options() {
  GpuRotationOptions o;
  o.failures_to_bench = 3;
  o.first_cooldown = absl::Seconds(10);
  o.max_cooldown = absl::Seconds(35);
  return o;
}

const absl::Time kStart = absl::FromUnixSeconds(1000000);

TEST(GpuRotationTest, FailuresInARowTakeTheGpuOutForTheCooldown) {
  GpuRotation r(Options());
  EXPECT_EQ(r.OnFailure(kStart), Change::kNone);
  EXPECT_EQ(r.OnFailure(kStart), Change::kNone);
  EXPECT_TRUE(r.InRotation(kStart));
  EXPECT_EQ(r.OnFailure(kStart), Change::kBenched);
  EXPECT_FALSE(r.InRotation(kStart));
  EXPECT_FALSE(r.InRotation(kStart + absl::Seconds(9)));
  EXPECT_TRUE(r.InRotation(kStart + absl::Seconds(10)));
}

TEST(GpuRotationTest, ASuccessEndsTheStreak) {
  GpuRotation r(Options());
  for (int round = 0; round < 5; ++round) {
    EXPECT_EQ(r.OnFailure(kStart), Change::kNone);
    EXPECT_EQ(r.OnFailure(kStart), Change::kNone);
    EXPECT_EQ(r.OnSuccess(kStart), Change::kNone);
  }
  EXPECT_TRUE(r.InRotation(kStart));
}

TEST(GpuRotationTest, AProbeThatSucceedsBringsTheGpuBackForGood) {
  GpuRotation r(Options());
  for (int i = 0; i < 3; ++i) r.OnFailure(kStart);
  const absl::Time later = kStart + absl::Seconds(10);
  EXPECT_EQ(r.OnSuccess(later), Change::kRestored);
  EXPECT_TRUE(r.InRotation(later));
  // Back with a fresh streak and the first cooldown again.
  EXPECT_EQ(r.OnFailure(later), Change::kNone);
  EXPECT_EQ(r.OnFailure(later), Change::kNone);
  EXPECT_EQ(r.OnFailure(later), Change::kBenched);
  EXPECT_TRUE(r.InRotation(later + absl::Seconds(10)));
}

TEST(GpuRotationTest, AProbeThatFailsDoublesTheCooldownUpToTheMaximum) {
  GpuRotation r(Options());
  for (int i = 0; i < 3; ++i) r.OnFailure(kStart);
  absl::Time t = kStart + absl::Seconds(10);
  for (int seconds : {20, 35, 35}) {  // 10 -> 20 -> 40, capped at 35
    EXPECT_EQ(r.OnFailure(t), Change::kBenched) << seconds;  // one failed probe suffices
    EXPECT_FALSE(r.InRotation(t + absl::Seconds(seconds) - absl::Milliseconds(1))) << seconds;
    t += absl::Seconds(seconds);
    EXPECT_TRUE(r.InRotation(t)) << seconds;
  }
}

TEST(GpuRotationTest, OutcomesOfJobsPlacedBeforeTheBenchChangeNothing) {
  GpuRotation r(Options());
  for (int i = 0; i < 3; ++i) r.OnFailure(kStart);
  // Jobs that were already running finish while the GPU is out.
  EXPECT_EQ(r.OnSuccess(kStart + absl::Seconds(1)), Change::kNone);
  EXPECT_EQ(r.OnFailure(kStart + absl::Seconds(2)), Change::kNone);
  EXPECT_FALSE(r.InRotation(kStart + absl::Seconds(9)));
  EXPECT_TRUE(r.InRotation(kStart + absl::Seconds(10)));  // not extended
}

TEST(GpuRotationTest, ZeroFailuresToBenchNeverBenches) {
  GpuRotationOptions o = Options();
  o.failures_to_bench = 0;
  GpuRotation r(o);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(r.OnFailure(kStart), Change::kNone);
  EXPECT_TRUE(r.InRotation(kStart));
}

// Placement skips a GPU out of rotation until its cooldown ends.
TEST(GpuRotationTest, PlacementSkipsABenchedGpuUntilItsCooldownEnds) {
  std::vector<GpuRotation> rotation(2);  // the defaults: 3 failures, 10 s
  for (int i = 0; i < 3; ++i) rotation[0].OnFailure(kStart);
  auto pick = [&](absl::Time now, size_t start) {
    return PickGpu(2, start, [&](size_t i) { return GpuLoad{rotation[i].InRotation(now), 0}; });
  };
  for (size_t start = 0; start < 4; ++start) EXPECT_EQ(pick(kStart + absl::Seconds(5), start), 1u);
  EXPECT_EQ(pick(kStart + absl::Seconds(10), 0), 0u);  // back: ties rotate again
  EXPECT_EQ(pick(kStart + absl::Seconds(10), 1), 1u);
}

}  // namespace
}  // namespace sortd
