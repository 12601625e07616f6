// HostMemoryPool: heap buffers where nothing pins; where a GPU is present,
// pinned buffers reused after release, the most recently released kept,
// and buffers larger than the cache left on the heap.
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

TEST(HostMemoryPool, AMissGetsHeapMemoryAndPinsABlockForTheNextRequestOnceReleased) {
  HostMemoryPool pool(/*pin=*/true, kMiB, 8 * kMiB);
  HostBuffer small = pool.Allocate(kMiB / 2);  // under min_pinned_bytes
  EXPECT_FALSE(small.pinned());
  HostBuffer huge = pool.Allocate(16 * kMiB);  // over the cache: never pinned
  EXPECT_FALSE(huge.pinned());
  // Nothing idle yet: heap memory at once; a 4 MiB block is pinned once it
  // is released (not while it is in use).
  HostBuffer first = pool.Allocate(3 * kMiB);
  ASSERT_NE(first.data(), nullptr);
  EXPECT_FALSE(first.pinned());
  std::memset(first.data(), 1, 3 * kMiB);
  pool.WaitForPinning();
  EXPECT_EQ(pool.pinned_idle(), 0u);
  first.Reset();
  pool.WaitForPinning();
  if (pool.pinned_idle() == 0) {
    // No GPU (or no driver): pinning fails and the pool stays on the heap.
    EXPECT_TRUE(ListGpus().empty());
    EXPECT_FALSE(pool.Allocate(3 * kMiB).pinned());
    return;
  }
  EXPECT_EQ(pool.pinned_idle(), 4 * kMiB);  // rounded up to 2 MiB granules
  HostBuffer second = pool.Allocate(4 * kMiB);
  ASSERT_TRUE(second.pinned());
  EXPECT_EQ(pool.pinned_in_use(), 4 * kMiB);
  EXPECT_EQ(pool.pinned_idle(), 0u);
  std::memset(second.data(), 2, 4 * kMiB);
  uint8_t* const block = second.data();
  second.Reset();
  EXPECT_EQ(pool.pinned_idle(), 4 * kMiB);
  HostBuffer again = pool.Allocate(4 * kMiB);
  EXPECT_TRUE(again.pinned());
  EXPECT_EQ(again.data(), block);  // reused, not pinned afresh
  // A 6 MiB miss pins a 6 MiB block; with the 4 MiB one released, 4 + 6 > 8:
  // the older block is freed for the newer.
  HostBuffer big = pool.Allocate(6 * kMiB);
  EXPECT_FALSE(big.pinned());
  big.Reset();
  pool.WaitForPinning();
  EXPECT_EQ(pool.pinned_idle(), 6 * kMiB);
  again.Reset();
  EXPECT_EQ(pool.pinned_idle(), 4 * kMiB);  // the newest (4) kept, 6 freed
  EXPECT_EQ(pool.pinned_in_use(), 0u);
}

}  // namespace
}  // namespace sortd
