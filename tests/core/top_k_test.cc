// cpu::TopK against the first k of a reference stable sort: every key type,
// both orders, duplicates, NaN (with payloads), signed zeros, k at and past
// the ends, and the same answer on any number of threads.
#include "core/cpu/top_k.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "core/key_transform.h"

namespace sortd::cpu {
namespace {

// The stable order sortd defines, by OrderedBits (NaN last; descending the
// exact reverse of the distinct keys, equal keys in input order).
template <typename T>
std::vector<uint64_t> ReferenceOrder(const std::vector<T>& keys, SortOrder order) {
  std::vector<uint64_t> perm(keys.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](uint64_t a, uint64_t b) {
    const auto wa = OrderedBits<T>::Encode(keys[a]);
    const auto wb = OrderedBits<T>::Encode(keys[b]);
    return order == SortOrder::kAscending ? wa < wb : wb < wa;
  });
  return perm;
}

template <typename T>
std::vector<T> Keys(size_t n, uint64_t seed, uint64_t distinct) {
  std::mt19937_64 rng(seed);
  std::vector<T> keys(n);
  for (T& key : keys) {
    const uint64_t r = rng() % distinct;
    if constexpr (std::is_floating_point_v<T>) {
      key = static_cast<T>(static_cast<int64_t>(r) - static_cast<int64_t>(distinct / 2)) / 4;
    } else {
      key = static_cast<T>(r * 0x9e3779b97f4a7c15ull);
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    // NaNs with payloads and both zeros among them.
    for (size_t i = 0; i < n; i += 97) {
      uint64_t bits = 0;
      T nan = std::numeric_limits<T>::quiet_NaN();
      std::memcpy(&bits, &nan, sizeof(T));
      bits |= i & 0xff;
      if (i % 2) bits |= uint64_t{1} << (sizeof(T) * 8 - 1);
      std::memcpy(&keys[i], &bits, sizeof(T));
    }
    for (size_t i = 5; i < n; i += 89) keys[i] = (i % 2) ? T(-0.0) : T(0.0);
  }
  return keys;
}

template <typename T>
void ExpectFirstK(const std::vector<T>& keys, size_t k, SortOrder order, int threads) {
  const TopKResult<T> got = TopK<T>(keys, k, order, threads);
  const std::vector<uint64_t> perm = ReferenceOrder(keys, order);
  const size_t want = std::min(k, keys.size());
  ASSERT_EQ(got.keys.size(), want);
  ASSERT_EQ(got.indices.size(), want);
  for (size_t j = 0; j < want; ++j) {
    ASSERT_EQ(got.indices[j], perm[j]) << "rank " << j << " of k=" << k;
    // The key as given, bit for bit (NaN payloads, signed zeros).
    ASSERT_EQ(std::memcmp(&got.keys[j], &keys[perm[j]], sizeof(T)), 0) << "rank " << j;
  }
}

template <typename T>
class TopKTypedTest : public ::testing::Test {};
using KeyTypes = ::testing::Types<uint32_t, int32_t, float, uint64_t, int64_t, double>;
TYPED_TEST_SUITE(TopKTypedTest, KeyTypes);

TYPED_TEST(TopKTypedTest, EqualsTheFirstKOfTheStableSort) {
  for (SortOrder order : {SortOrder::kAscending, SortOrder::kDescending}) {
    for (uint64_t distinct : {uint64_t{3}, uint64_t{1000}, uint64_t{1} << 40}) {
      const std::vector<TypeParam> keys = Keys<TypeParam>(5000, distinct, distinct);
      // 313 and up: the radix-select path (k * kTopKSelectShare >= n); below, the heap.
      for (size_t k : {size_t{1}, size_t{10}, size_t{100}, size_t{312}, size_t{313}, size_t{1000},
                       size_t{4999}, size_t{5000}}) {
        ExpectFirstK(keys, k, order, 1);
      }
    }
  }
}

TYPED_TEST(TopKTypedTest, ThreadsGiveTheSameAnswerAsOne) {
  const size_t n = 4 * kTopKParallelMinKeys + 123;
  // Few distinct keys: ties across the threads' parts decide by position.
  const std::vector<TypeParam> keys = Keys<TypeParam>(n, 11, 50);
  for (SortOrder order : {SortOrder::kAscending, SortOrder::kDescending}) {
    for (size_t k : {size_t{1}, size_t{100}, size_t{20000}}) {
      const TopKResult<TypeParam> one = TopK<TypeParam>(keys, k, order, 1);
      const TopKResult<TypeParam> four = TopK<TypeParam>(keys, k, order, 4);
      EXPECT_EQ(one.indices, four.indices) << "k=" << k;
    }
    ExpectFirstK(keys, 100, order, 4);
  }
}

TEST(TopKTest, KOfZeroAndKPastTheEnd) {
  const std::vector<uint32_t> keys = {5, 3, 3, 9, 1};
  EXPECT_TRUE(TopK<uint32_t>(keys, 0, SortOrder::kAscending).keys.empty());
  const TopKResult<uint32_t> all = TopK<uint32_t>(keys, 1000, SortOrder::kAscending);
  EXPECT_EQ(all.keys, (std::vector<uint32_t>{1, 3, 3, 5, 9}));
  EXPECT_EQ(all.indices, (std::vector<uint64_t>{4, 1, 2, 0, 3}));
  const TopKResult<uint32_t> largest = TopK<uint32_t>(keys, 3, SortOrder::kDescending);
  EXPECT_EQ(largest.keys, (std::vector<uint32_t>{9, 5, 3}));
  EXPECT_EQ(largest.indices, (std::vector<uint64_t>{3, 0, 1}));  // the earlier 3
  EXPECT_TRUE(TopK<uint32_t>(std::vector<uint32_t>{}, 5, SortOrder::kAscending).keys.empty());
}

TEST(TopKTest, NanIsLastAscendingAndFirstDescending) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> keys = {1.0f, nan, -0.0f, 0.0f, -nan, -1.0f};
  EXPECT_EQ(TopK<float>(keys, 6, SortOrder::kAscending).indices,
            (std::vector<uint64_t>{5, 2, 3, 0, 1, 4}));
  EXPECT_EQ(TopK<float>(keys, 3, SortOrder::kDescending).indices,
            (std::vector<uint64_t>{1, 4, 0}));
}

// Byte strings against std::stable_sort of the views (unsigned bytes, a
// prefix first), with many duplicates, empty strings and high bytes.
TEST(TopKStringsTest, EqualsTheFirstKOfTheStableSort) {
  std::mt19937_64 rng(7);
  const char alphabet[] = {'a', '\xff', '\0', 'b'};
  std::vector<std::string> strings(3000);
  for (std::string& s : strings) {
    const size_t length = rng() % 4;
    for (size_t i = 0; i < length; ++i) s.push_back(alphabet[rng() % 4]);
  }
  std::vector<std::string_view> keys(strings.begin(), strings.end());
  for (SortOrder order : {SortOrder::kAscending, SortOrder::kDescending}) {
    std::vector<uint64_t> perm(keys.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::stable_sort(perm.begin(), perm.end(), [&](uint64_t a, uint64_t b) {
      const auto ua = reinterpret_cast<const unsigned char*>(keys[a].data());
      const auto ub = reinterpret_cast<const unsigned char*>(keys[b].data());
      const bool less = std::lexicographical_compare(ua, ua + keys[a].size(), ub,
                                                     ub + keys[b].size());
      const bool greater = std::lexicographical_compare(ub, ub + keys[b].size(), ua,
                                                        ua + keys[a].size());
      return order == SortOrder::kAscending ? less : greater;
    });
    for (size_t k : {size_t{1}, size_t{10}, size_t{2999}, size_t{3000}, size_t{5000}}) {
      const std::vector<uint64_t> want(perm.begin(), perm.begin() + std::min(k, perm.size()));
      EXPECT_EQ(TopKStrings(keys, k, order), want) << "k=" << k;
    }
  }
  EXPECT_TRUE(TopKStrings(keys, 0, SortOrder::kAscending).empty());
  EXPECT_TRUE(TopKStrings({}, 3, SortOrder::kAscending).empty());
}

}  // namespace
}  // namespace sortd::cpu
