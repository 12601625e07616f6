// cgroup limit parsing: what a container's resources.limits look like in
// /sys/fs/cgroup (v2) and the v1 controllers.
#include "server/runtime/host_resources.h"

#include <sched.h>

#include <gtest/gtest.h>

namespace sortd {
namespace {

TEST(HostResourcesTest, MemoryLimitV2AndV1) {
  EXPECT_EQ(ParseCgroupMemoryLimit("17179869184\n"), uint64_t{16} << 30);
  EXPECT_EQ(ParseCgroupMemoryLimit("max\n"), std::nullopt);
  // v1 without a limit: the largest page-aligned int64.
  EXPECT_EQ(ParseCgroupMemoryLimit("9223372036854771712\n"), std::nullopt);
  EXPECT_EQ(ParseCgroupMemoryLimit(""), std::nullopt);
  EXPECT_EQ(ParseCgroupMemoryLimit("garbage"), std::nullopt);
}

TEST(HostResourcesTest, CpuQuotaRoundsUp) {
  EXPECT_EQ(ParseCgroupCpuMax("400000 100000\n"), 4);
  EXPECT_EQ(ParseCgroupCpuMax("150000 100000"), 2);  // 1.5 CPUs -> 2 threads
  EXPECT_EQ(ParseCgroupCpuMax("50000 100000"), 1);
  EXPECT_EQ(ParseCgroupCpuMax("max 100000\n"), std::nullopt);
  EXPECT_EQ(ParseCgroupCpuMax("100000"), std::nullopt);
  EXPECT_EQ(ParseCgroupV1CpuQuota("-1\n", "100000\n"), std::nullopt);
  EXPECT_EQ(ParseCgroupV1CpuQuota("200000\n", "100000\n"), 2);
}

TEST(HostResourcesTest, UsableNeverExceedsTheMachine) {
  EXPECT_GE(UsableCpus(), 1);
  EXPECT_LE(UsableMemoryBytes(), PhysicalMemoryBytes());
  EXPECT_GT(UsableMemoryBytes(), 0u);
}

// A process pinned to one CPU (taskset, a cpuset) has one usable CPU,
// whatever the machine has.
TEST(HostResourcesTest, UsableCpusFollowTheAffinity) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  int first = 0;
  while (!CPU_ISSET(first, &before)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  const int pinned = UsableCpus();
  ASSERT_EQ(sched_setaffinity(0, sizeof(before), &before), 0);
  EXPECT_EQ(pinned, 1);
  EXPECT_LE(UsableCpus(), CPU_COUNT(&before));
}

}  // namespace
}  // namespace sortd
