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

TEST(HostMemoryPool, PinnedBuffersAreReusedAndTheCacheStaysWithinItsCap) {
  HostMemoryPool pool(/*pin=*/true, kMiB, 8 * kMiB);
  HostBuffer small = pool.Allocate(kMiB / 2);  // under min_pinned_bytes
  EXPECT_FALSE(small.pinned());
  HostBuffer huge = pool.Allocate(16 * kMiB);  // over the cache: never pinned
  EXPECT_FALSE(huge.pinned());
  HostBuffer first = pool.Allocate(3 * kMiB);
  ASSERT_NE(first.data(), nullptr);
  if (!first.pinned()) {
    // No GPU (or no driver): pinning fails and the pool falls back to heap.
    EXPECT_TRUE(ListGpus().empty());
    EXPECT_EQ(pool.pinned_in_use(), 0u);
    return;
  }
  EXPECT_EQ(pool.pinned_in_use(), 4 * kMiB);  // rounded up to 2 MiB granules
  uint8_t* const block = first.data();
  first.Reset();
  EXPECT_EQ(pool.pinned_in_use(), 0u);
  EXPECT_EQ(pool.pinned_idle(), 4 * kMiB);
  HostBuffer again = pool.Allocate(4 * kMiB);
  EXPECT_TRUE(again.pinned());
  EXPECT_EQ(again.data(), block);  // reused, not pinned afresh
  HostBuffer other = pool.Allocate(6 * kMiB);
  ASSERT_TRUE(other.pinned());
  again.Reset();  // idle: 4 MiB
  other.Reset();  // 4 + 6 > 8: the older block is freed for the newer
  EXPECT_EQ(pool.pinned_idle(), 6 * kMiB);
}

}  // namespace
}  // namespace sortd
