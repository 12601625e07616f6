// The rule that places jobs on GPUs (core/gpu_placement.h), without a GPU.
#include "core/gpu_placement.h"

#include <map>
#include <vector>

#include "gtest/gtest.h"

namespace sortd {
namespace {

TEST(GpuPlacementTest, TheLeastLoadedHealthyGpuTakesTheJob) {
  const std::vector<GpuLoad> gpus = {{true, 3}, {true, 1}, {true, 2}};
  for (size_t start = 0; start < 6; ++start) EXPECT_EQ(PickGpu(gpus, start), 1u) << start;
}

TEST(GpuPlacementTest, JobsArrivingWhileAllAreIdleSpreadOverEveryGpu) {
  // The 2x H200 run sent 735 jobs to GPU 0 and 446 to GPU 1 when ties went
  // to the first GPU (docs/benchmarks.md, "Two GPUs in one sortd").
  const std::vector<GpuLoad> idle = {{true, 0}, {true, 0}, {true, 0}};
  std::map<size_t, int> taken;
  for (size_t start = 0; start < 300; ++start) ++taken[PickGpu(idle, start)];
  EXPECT_EQ(taken, (std::map<size_t, int>{{0, 100}, {1, 100}, {2, 100}}));
}

TEST(GpuPlacementTest, AnUnhealthyGpuIsSkippedEvenWhenIdle) {
  const std::vector<GpuLoad> gpus = {{false, 0}, {true, 5}};
  for (size_t start = 0; start < 4; ++start) EXPECT_EQ(PickGpu(gpus, start), 1u);
}

TEST(GpuPlacementTest, NoHealthyGpuMeansNone) {
  EXPECT_EQ(PickGpu({{false, 0}, {false, 0}}, 0), kNoGpu);
  EXPECT_EQ(PickGpu({}, 7), kNoGpu);
}

}  // namespace
}  // namespace sortd
