// The fork-join helpers behind the CPU engine's multi-threaded path:
// PartBegin, MergePathSplit, RunTasks and the stable ParallelSort.
#include "core/cpu/parallel.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace sortd::cpu {
namespace {

struct Item {
  uint32_t key;
  uint32_t seq;  // input position, to observe stability
  bool operator==(const Item& o) const { return key == o.key && seq == o.seq; }
};

bool KeyLess(const Item& a, const Item& b) { return a.key < b.key; }

std::vector<Item> RandomItems(size_t n, uint32_t distinct, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Item> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = {static_cast<uint32_t>(rng() % distinct), static_cast<uint32_t>(i)};
  }
  return v;
}

TEST(PartBeginTest, CoversTheRangeInNearlyEqualParts) {
  for (size_t n : {0, 1, 2, 3, 7, 100, 1001}) {
    for (int parts = 1; parts <= 9; ++parts) {
      EXPECT_EQ(PartBegin(n, parts, 0), 0u);
      EXPECT_EQ(PartBegin(n, parts, parts), n);
      for (int p = 0; p < parts; ++p) {
        const size_t len = PartBegin(n, parts, p + 1) - PartBegin(n, parts, p);
        EXPECT_TRUE(len == n / parts || len == n / parts + 1)
            << "n=" << n << " parts=" << parts << " p=" << p;
      }
    }
  }
}

// MergePathSplit(d) is the number of elements of `a` among the first d
// outputs of std::merge (which takes from `a` first among equals).
TEST(MergePathSplitTest, MatchesStdMerge) {
  std::mt19937_64 rng(1);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t na = rng() % 20;
    const size_t nb = rng() % 20;
    const uint32_t distinct = 1 + rng() % 6;
    std::vector<Item> a(na), b(nb);
    for (size_t i = 0; i < na; ++i) a[i] = {uint32_t(rng() % distinct), 0};
    for (size_t i = 0; i < nb; ++i) b[i] = {uint32_t(rng() % distinct), 1};
    std::sort(a.begin(), a.end(), KeyLess);
    std::sort(b.begin(), b.end(), KeyLess);
    std::vector<Item> merged(na + nb);
    std::merge(a.begin(), a.end(), b.begin(), b.end(), merged.begin(), KeyLess);
    size_t from_a = 0;
    for (size_t d = 0; d <= na + nb; ++d) {
      EXPECT_EQ(MergePathSplit(a.data(), na, b.data(), nb, d, KeyLess), from_a)
          << "na=" << na << " nb=" << nb << " d=" << d;
      if (d < na + nb && merged[d].seq == 0) ++from_a;
    }
  }
}

TEST(RunTasksTest, RunsEveryTaskOnce) {
  for (int tasks : {0, 1, 2, 5, 16}) {
    std::vector<std::atomic<int>> runs(tasks);
    RunTasks(tasks, [&](int t) { runs[t].fetch_add(1); });
    for (int t = 0; t < tasks; ++t) EXPECT_EQ(runs[t].load(), 1) << t;
  }
}

TEST(ParallelSortTest, StableForEveryThreadCountAndSize) {
  for (int threads = 1; threads <= 9; ++threads) {
    for (size_t n : {0, 1, 2, 3, 5, 8, 17, 18, 19, 100, 1000, 1001, 4099, 65537}) {
      for (uint32_t distinct : {1u, 3u, 1000u, 1u << 30}) {
        std::vector<Item> data = RandomItems(n, distinct, n * 31 + distinct);
        std::vector<Item> expected = data;
        std::stable_sort(expected.begin(), expected.end(), KeyLess);
        ParallelSort(data.data(), n, threads, KeyLess, [](Item* p, size_t len) {
          std::stable_sort(p, p + len, KeyLess);
        });
        ASSERT_TRUE(data == expected)
            << "threads=" << threads << " n=" << n << " distinct=" << distinct;
      }
    }
  }
}

TEST(ParallelSortTest, DescendingComparator) {
  auto greater = [](const Item& a, const Item& b) { return b.key < a.key; };
  for (int threads : {2, 3, 4, 7}) {
    std::vector<Item> data = RandomItems(30011, 50, threads);
    std::vector<Item> expected = data;
    std::stable_sort(expected.begin(), expected.end(), greater);
    ParallelSort(data.data(), data.size(), threads, greater,
                 [&](Item* p, size_t len) { std::stable_sort(p, p + len, greater); });
    ASSERT_TRUE(data == expected) << "threads=" << threads;
  }
}

}  // namespace
}  // namespace sortd::cpu
