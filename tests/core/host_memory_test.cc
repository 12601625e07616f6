// HostMemoryPool: heap buffers where nothing pins; where a GPU is present,
// a miss pinned at once, pinned buffers reused after release, the most
// recently released kept, and buffers larger than the cache left on the
// heap.
#include "core/host_memory.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/gpu_info.h"

namespace sortd {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST(HostMemoryPool, WithoutPinningBuffersAreWritableHeapMemory) {
  HostMemoryPool pool(/*pin=*/false, kMiB, 64 * kMiB);
  HostBuffer buffer = pool.Allocate(3 * kMiB);
  ASSERT_NE(buffer.data(), nullptr);
  EXPECT_FALSE(buffer.pinned());
  std::memset(buffer.data(), 7, 3 * kMiB);  // ASan would catch a short buffer
  EXPECT_EQ(pool.pinned_in_use(), 0u);
  EXPECT_EQ(pool.Allocate(0).data(), nullptr);
}

// Without a GPU (or driver) pinning fails: a pool asked to pin stays on the
// heap. Skipped where a GPU is present (the next test covers that host).
TEST(HostMemoryPool, WithoutAGpuAPinningPoolStaysOnTheHeap) {
  if (!ListGpus().empty()) GTEST_SKIP() << "a GPU is present: pinning succeeds there";
  HostMemoryPool pool(/*pin=*/true, kMiB, 8 * kMiB);
  HostBuffer buffer = pool.Allocate(3 * kMiB);
  ASSERT_NE(buffer.data(), nullptr);
  std::memset(buffer.data(), 1, 3 * kMiB);
  EXPECT_FALSE(buffer.pinned());
  EXPECT_EQ(pool.pinned_in_use(), 0u);
  buffer.Reset();
  EXPECT_EQ(pool.pinned_idle(), 0u);
}

// Needs a GPU: skipped (not passed) without one; gpu_e2e.sh runs it on the
// GPU host, where a skip fails the script.
TEST(HostMemoryPool, AMissPinsABlockAtOnceAndReleasedBlocksAreReused) {
  if (ListGpus().empty()) GTEST_SKIP() << "no GPU visible: pinning host memory needs the CUDA driver";
  HostMemoryPool pool(/*pin=*/true, kMiB, 8 * kMiB);
  HostBuffer small = pool.Allocate(kMiB / 2);  // under min_pinned_bytes
  EXPECT_FALSE(small.pinned());
  HostBuffer huge = pool.Allocate(16 * kMiB);  // over the cache: never pinned
  EXPECT_FALSE(huge.pinned());
  HostBuffer first = pool.Allocate(3 * kMiB);
  ASSERT_NE(first.data(), nullptr);
  std::memset(first.data(), 1, 3 * kMiB);
  ASSERT_TRUE(first.pinned());  // a GPU is present: the miss is pinned at once
  EXPECT_EQ(pool.pinned_in_use(), 4 * kMiB);  // rounded up to 2 MiB granules
  uint8_t* const block = first.data();
  first.Reset();
  EXPECT_EQ(pool.pinned_in_use(), 0u);
  EXPECT_EQ(pool.pinned_idle(), 4 * kMiB);
  HostBuffer again = pool.Allocate(4 * kMiB);
  ASSERT_TRUE(again.pinned());
  EXPECT_EQ(again.data(), block);  // reused, not pinned afresh
  EXPECT_EQ(pool.pinned_idle(), 0u);
  std::memset(again.data(), 2, 4 * kMiB);
  // A 6 MiB miss pins a 6 MiB block; released with the 4 MiB one after it,
  // 6 + 4 > 8: the older block is freed for the newer.
  HostBuffer big = pool.Allocate(6 * kMiB);
  ASSERT_TRUE(big.pinned());
  EXPECT_EQ(pool.pinned_in_use(), 10 * kMiB);
  std::memset(big.data(), 3, 6 * kMiB);
  big.Reset();
  EXPECT_EQ(pool.pinned_idle(), 6 * kMiB);
  again.Reset();
  EXPECT_EQ(pool.pinned_idle(), 4 * kMiB);  // the newest (4) kept, 6 freed
  EXPECT_EQ(pool.pinned_in_use(), 0u);
}

}  // namespace
}  // namespace sortd
