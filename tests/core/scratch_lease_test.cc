// ScratchLease (core/cpu/scratch_lease.h): which leases get memory the
// thread keeps (reused by the next lease of the same depth, no fresh pages)
// and which get memory of their own.
#include "core/cpu/scratch_lease.h"

#include <cstdint>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

namespace sortd::cpu {
namespace {

TEST(ScratchLeaseTest, TheNextLeaseOfTheSameDepthReusesTheKeptMemory) {
  std::thread([] {  // a fresh thread: no slot held yet
    void* first = nullptr;
    {
      const ScratchLease lease(4096);
      EXPECT_TRUE(lease.kept());
      first = lease.as<void>();
      std::memset(lease.as<char>(), 1, 4096);
    }
    {
      const ScratchLease again(1000);  // smaller: the same block
      EXPECT_TRUE(again.kept());
      EXPECT_EQ(again.as<void>(), first);
    }
  }).join();
}

TEST(ScratchLeaseTest, NestedLeasesTakeTheirOwnSlotsThenOwnMemory) {
  std::thread([] {
    const ScratchLease outer(1 << 20);
    const ScratchLease inner(1 << 16);
    const ScratchLease innermost(1 << 10);
    EXPECT_TRUE(outer.kept());
    EXPECT_TRUE(inner.kept());
    EXPECT_TRUE(innermost.kept());
    EXPECT_NE(outer.as<void>(), inner.as<void>());
    EXPECT_NE(inner.as<void>(), innermost.as<void>());
    EXPECT_NE(outer.as<void>(), innermost.as<void>());
    static_assert(kScratchSlots == 3, "one lease past every slot below");
    const ScratchLease past(64);  // every slot held
    EXPECT_FALSE(past.kept());
    // Each lease's memory is its own: writing one leaves the others.
    std::memset(outer.as<char>(), 0xAA, 1 << 20);
    std::memset(inner.as<char>(), 0xBB, 1 << 16);
    std::memset(innermost.as<char>(), 0xCC, 1 << 10);
    std::memset(past.as<char>(), 0xDD, 64);
    EXPECT_EQ(static_cast<unsigned char>(outer.as<char>()[(1 << 20) - 1]), 0xAA);
    EXPECT_EQ(static_cast<unsigned char>(inner.as<char>()[(1 << 16) - 1]), 0xBB);
    EXPECT_EQ(static_cast<unsigned char>(innermost.as<char>()[(1 << 10) - 1]), 0xCC);
  }).join();
}

TEST(ScratchLeaseTest, LeasesOverTheirSlotsCapOwnTheirMemory) {
  std::thread([] {
    {
      const ScratchLease huge(kKeptScratchBytes + 1);  // over slot 0's cap
      EXPECT_FALSE(huge.kept());
    }
    const ScratchLease outer(64);
    const ScratchLease inner_over(kKeptInnerScratchBytes + 1);  // over the inner slots' cap
    EXPECT_FALSE(inner_over.kept());
    const ScratchLease inner(kKeptInnerScratchBytes);  // slot 1 is still free
    EXPECT_TRUE(inner.kept());
  }).join();
}

}  // namespace
}  // namespace sortd::cpu
