// The CPU engine's radix sort (core/cpu/radix_sort.h) against
// std::stable_sort: every key width and signedness, keys only, with a
// payload and as packed words; both orders; sizes across digit, cache (MSD
// split) and pass-skipping boundaries.
#include "core/cpu/radix_sort.h"

#include "core/cpu/parallel_radix.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gtest/gtest.h"

namespace sortd::cpu {
namespace {

// Sizes: tiny, around one digit's 256 buckets, a 2^16 + 3 array, and two
// beyond kLsdMaxBytes so that the MSD split and its per-bucket LSD run.
std::vector<size_t> Sizes() {
  return {0, 1, 2, 3, 17, 255, 256, 257, 1000, 4096, (size_t{1} << 16) + 3, 300001,
          (size_t{1} << 20) + 5};
}

enum class Keys { kRandom, kAllEqual, kTopByteOnly, kLowByteOnly, kFewDistinct, kSorted };

const char* KeysName(Keys k) {
  switch (k) {
    case Keys::kRandom: return "random";
    case Keys::kAllEqual: return "all_equal";
    case Keys::kTopByteOnly: return "top_byte_only";
    case Keys::kLowByteOnly: return "low_byte_only";
    case Keys::kFewDistinct: return "few_distinct";
    case Keys::kSorted: return "sorted";
  }
  return "?";
}

constexpr Keys kAllKeys[] = {Keys::kRandom,      Keys::kAllEqual,    Keys::kTopByteOnly,
                             Keys::kLowByteOnly, Keys::kFewDistinct, Keys::kSorted};

// Keys whose bits vary only where the pattern says: the skipped-pass cases
// leave every digit but one the same in every key.
template <typename K>
std::vector<K> MakeKeys(size_t n, Keys pattern, uint64_t seed) {
  using U = std::make_unsigned_t<K>;
  constexpr int kBits = sizeof(K) * 8;
  std::mt19937_64 rng(seed);
  const U base = static_cast<U>(0x5a5a5a5a5a5a5a5aull);
  std::vector<K> keys(n);
  for (size_t i = 0; i < n; ++i) {
    U u = static_cast<U>(rng());
    switch (pattern) {
      case Keys::kRandom: break;
      case Keys::kAllEqual: u = base; break;
      case Keys::kTopByteOnly:
        u = static_cast<U>((base & ~(U(0xff) << (kBits - 8))) | (u & (U(0xff) << (kBits - 8))));
        break;
      case Keys::kLowByteOnly: u = static_cast<U>((base & ~U(0xff)) | (u & 0xff)); break;
      case Keys::kFewDistinct: u = static_cast<U>((u % 5) * (U(0x0101010101010101ull) >> 3)); break;
      case Keys::kSorted: u = static_cast<U>(i * 0x9e37); break;
    }
    keys[i] = static_cast<K>(u);
  }
  return keys;
}

template <typename K>
class CpuRadixSortTest : public ::testing::Test {};
using KeyTypes = ::testing::Types<uint32_t, int32_t, uint64_t, int64_t>;
TYPED_TEST_SUITE(CpuRadixSortTest, KeyTypes);

TYPED_TEST(CpuRadixSortTest, KeysMatchStableSort) {
  using K = TypeParam;
  for (size_t n : Sizes()) {
    for (Keys pattern : kAllKeys) {
      for (bool descending : {false, true}) {
        SCOPED_TRACE(std::to_string(n) + " " + KeysName(pattern) + (descending ? " desc" : " asc"));
        std::vector<K> keys = MakeKeys<K>(n, pattern, n * 31 + static_cast<int>(pattern));
        std::vector<K> want = keys;
        if (descending) {
          std::stable_sort(want.begin(), want.end(), [](K a, K b) { return b < a; });
        } else {
          std::stable_sort(want.begin(), want.end());
        }
        std::vector<K> scratch(n);
        RadixSortKeys(keys.data(), n, descending, scratch.data());
        ASSERT_EQ(keys, want);
      }
    }
  }
}

// The payload is the input position: the sort is stable exactly when equal
// keys come out with ascending payloads, in both orders.
template <typename K, typename V>
void CheckPairs() {
  for (size_t n : Sizes()) {
    for (Keys pattern : kAllKeys) {
      for (bool descending : {false, true}) {
        SCOPED_TRACE(std::to_string(n) + " " + KeysName(pattern) + (descending ? " desc" : " asc"));
        std::vector<K> keys = MakeKeys<K>(n, pattern, n * 17 + static_cast<int>(pattern));
        std::vector<V> values(n);
        for (size_t i = 0; i < n; ++i) values[i] = static_cast<V>(i);
        std::vector<V> want(n);
        for (size_t i = 0; i < n; ++i) want[i] = static_cast<V>(i);
        std::stable_sort(want.begin(), want.end(), [&](V a, V b) {
          return descending ? keys[b] < keys[a] : keys[a] < keys[b];
        });
        std::vector<K> want_keys(n);
        for (size_t i = 0; i < n; ++i) want_keys[i] = keys[want[i]];
        std::vector<uint64_t> scratch(RadixPairsScratchBytes<K, V>(n) / 8 + 1);
        RadixSortPairs(keys.data(), values.data(), n, descending, scratch.data());
        ASSERT_EQ(keys, want_keys);
        ASSERT_EQ(values, want);
      }
    }
  }
}

TEST(CpuRadixSortPairsTest, Keys32Values32) { CheckPairs<uint32_t, uint32_t>(); }
TEST(CpuRadixSortPairsTest, SignedKeys32Values64) { CheckPairs<int32_t, uint64_t>(); }
TEST(CpuRadixSortPairsTest, Keys64Values32) { CheckPairs<uint64_t, uint32_t>(); }
TEST(CpuRadixSortPairsTest, SignedKeys64Values64) { CheckPairs<int64_t, uint64_t>(); }

// Packed (key << 32 | index) words sorted by the key half only: equal keys
// keep input order even when the indices are not ascending, which a sort of
// the whole words would not.
TEST(CpuRadixSortWordsAboveTest, SortsByHighHalfStably) {
  for (size_t n : Sizes()) {
    for (Keys pattern : kAllKeys) {
      SCOPED_TRACE(std::to_string(n) + " " + KeysName(pattern));
      const std::vector<uint32_t> keys = MakeKeys<uint32_t>(n, pattern, n + 7);
      std::vector<uint64_t> words(n);
      // Payloads descending: stability and the whole-word order disagree.
      for (size_t i = 0; i < n; ++i) words[i] = (uint64_t{keys[i]} << 32) | (n - i);
      std::vector<uint64_t> want = words;
      std::stable_sort(want.begin(), want.end(),
                       [](uint64_t a, uint64_t b) { return (a >> 32) < (b >> 32); });
      std::vector<uint64_t> scratch(n);
      RadixSortWordsAbove(words.data(), n, 32, scratch.data());
      ASSERT_EQ(words, want);
    }
  }
}

// Extremes of every width and sign land in order (the sign-bit flip for
// signed keys, the all-ones flip for descending).
TEST(CpuRadixSortTest, SignedExtremes) {
  std::vector<int64_t> keys = {0, -1, std::numeric_limits<int64_t>::min(),
                               std::numeric_limits<int64_t>::max(), 1, -2, 2};
  for (int rep = 0; rep < 6; ++rep) keys.insert(keys.end(), keys.begin(), keys.begin() + 7);
  std::vector<int64_t> want = keys;
  std::sort(want.begin(), want.end());
  std::vector<int64_t> scratch(keys.size());
  RadixSortKeys(keys.data(), keys.size(), false, scratch.data());
  EXPECT_EQ(keys, want);
  RadixSortKeys(keys.data(), keys.size(), true, scratch.data());
  std::reverse(want.begin(), want.end());
  EXPECT_EQ(keys, want);
}

// A large array of random keys: many MSD buckets, prefetching scatter.
TEST(CpuRadixSortTest, LargeRandom) {
  const size_t n = (size_t{1} << 22) + 11;
  std::vector<uint32_t> keys = MakeKeys<uint32_t>(n, Keys::kRandom, 99);
  std::vector<uint32_t> want = keys;
  std::sort(want.begin(), want.end());
  std::vector<uint32_t> scratch(n);
  RadixSortKeys(keys.data(), n, false, scratch.data());
  EXPECT_EQ(keys, want);
}

// Skewed keys: one top-digit bucket larger than kLsdMaxBytes is split again.
TEST(CpuRadixSortPairsTest, SkewedBucketSplitAgain) {
  const size_t n = size_t{1} << 20;
  std::vector<uint64_t> keys = MakeKeys<uint64_t>(n, Keys::kRandom, 5);
  for (size_t i = 0; i < n; i += 4) keys[i] = keys[i] >> 8;  // 1/4 in top bucket 0
  std::vector<uint32_t> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<uint32_t>(i);
  std::vector<uint32_t> want = values;
  std::stable_sort(want.begin(), want.end(), [&](uint32_t a, uint32_t b) { return keys[a] < keys[b]; });
  std::vector<uint64_t> scratch(RadixPairsScratchBytes<uint64_t, uint32_t>(n) / 8 + 1);
  RadixSortPairs(keys.data(), values.data(), n, false, scratch.data());
  EXPECT_EQ(values, want);
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
}

// Pairs beyond the caches go through records (key beside value): every
// width combination, random and skewed keys, both orders, against a stable
// sort; a bucket with every lower digit equal takes the unpack-only path.
// Shape 3 leaves only the two low digits varying, with a third of the keys
// in one second-digit bucket that starts at an odd position in both
// orders: its records (12 bytes for mixed widths) sit at a 4-byte-aligned
// part of the scratch when it is split again on the last digit.
template <typename K, typename V>
void CheckLargePairs(size_t n, uint64_t seed) {
  for (int shape = 0; shape < 4; ++shape) {
    for (bool descending : {false, true}) {
      SCOPED_TRACE(std::to_string(shape) + (descending ? " desc" : " asc"));
      std::vector<K> keys = MakeKeys<K>(n, Keys::kRandom, seed + shape);
      if (shape == 1) {  // a third of the keys in one top bucket, split again
        for (size_t i = 0; i < n; i += 3) keys[i] = static_cast<K>(keys[i] >> 8);
      } else if (shape == 2) {  // only the top byte varies
        keys = MakeKeys<K>(n, Keys::kTopByteOnly, seed);
      } else if (shape == 3) {
        const size_t skewed = (n + 2) / 3;  // i % 3 == 0
        const size_t low_half = (n - skewed) / 2 | 1;  // odd: the skewed bucket starts odd
        size_t others = 0;
        for (size_t i = 0; i < n; ++i) {
          const unsigned second = i % 3 == 0 ? 0x40 : (others++ < low_half ? 0x00 : 0x7f);
          keys[i] = static_cast<K>((second << 8) | (keys[i] & 0xff));
        }
        ASSERT_EQ((n - skewed - low_half) % 2, 1u) << "n must leave both outer buckets odd";
      }
      std::vector<V> values(n);
      for (size_t i = 0; i < n; ++i) values[i] = static_cast<V>(i * 3 + 1);
      std::vector<size_t> order(n);
      for (size_t i = 0; i < n; ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return descending ? keys[b] < keys[a] : keys[a] < keys[b];
      });
      std::vector<K> want_keys(n);
      std::vector<V> want_values(n);
      for (size_t i = 0; i < n; ++i) {
        want_keys[i] = keys[order[i]];
        want_values[i] = values[order[i]];
      }
      std::vector<uint64_t> scratch(RadixPairsScratchBytes<K, V>(n) / 8 + 1);
      RadixSortPairs(keys.data(), values.data(), n, descending, scratch.data());
      ASSERT_EQ(keys, want_keys);
      ASSERT_EQ(values, want_values);
    }
  }
}

TEST(CpuRadixSortPairsTest, LargeThroughRecordsEveryWidth) {
  const size_t n = (size_t{1} << 19) + 77;
  CheckLargePairs<uint32_t, uint32_t>(n, 1);
  CheckLargePairs<int32_t, uint64_t>(n, 2);
  CheckLargePairs<uint64_t, uint32_t>(n, 3);
  CheckLargePairs<int64_t, double>(n, 4);
}

// The parallel radix sort gives std::sort's result for every key width,
// both orders, on 2 and 3 threads (buckets shared unevenly), and declines,
// keys untouched, where one top-digit bucket would hold most keys.
template <typename K>
void CheckParallel() {
  for (size_t n : {size_t{2}, size_t{1000}, size_t{65537}, (size_t{1} << 20) + 5}) {
    for (int threads : {2, 3}) {
      for (bool descending : {false, true}) {
        SCOPED_TRACE(std::to_string(n) + " threads " + std::to_string(threads) + (descending ? " desc" : " asc"));
        std::vector<K> keys = MakeKeys<K>(n, Keys::kRandom, n + threads);
        std::vector<K> want = keys;
        if (descending) {
          std::sort(want.begin(), want.end(), [](K a, K b) { return b < a; });
        } else {
          std::sort(want.begin(), want.end());
        }
        const std::vector<K> before = keys;
        std::vector<K> scratch(n);
        const bool sorted = ParallelRadixSortKeys(keys.data(), n, descending, scratch.data(), threads);
        if (n >= 65536) {  // random keys spread over the buckets
          ASSERT_TRUE(sorted);
        }
        ASSERT_EQ(keys, sorted ? want : before);
      }
    }
  }
  const size_t n = 100000;
  std::vector<K> keys = MakeKeys<K>(n, Keys::kLowByteOnly, 3);  // one top-digit bucket
  const std::vector<K> before = keys;
  std::vector<K> scratch(n);
  EXPECT_FALSE(ParallelRadixSortKeys(keys.data(), n, false, scratch.data(), 2));
  EXPECT_EQ(keys, before);
}

// Pairs across threads: the stable sort's result (values are input
// positions, so stability across the threads' parts is checked too), or a
// decline with nothing touched.
template <typename K, typename V>
void CheckParallelPairs() {
  for (size_t n : {size_t{1000}, size_t{65537}, (size_t{1} << 20) + 5}) {
    for (int threads : {2, 3}) {
      for (bool descending : {false, true}) {
        SCOPED_TRACE(std::to_string(n) + " threads " + std::to_string(threads) + (descending ? " desc" : " asc"));
        std::vector<K> keys = MakeKeys<K>(n, Keys::kRandom, n + 7 * threads);
        for (size_t i = 0; i < n; i += 5) keys[i] = keys[i / 2];  // ties across the threads' parts
        std::vector<V> values(n);
        for (size_t i = 0; i < n; ++i) values[i] = static_cast<V>(i);
        std::vector<V> want = values;
        std::stable_sort(want.begin(), want.end(), [&](V a, V b) {
          return descending ? keys[b] < keys[a] : keys[a] < keys[b];
        });
        std::vector<K> want_keys(n);
        for (size_t i = 0; i < n; ++i) want_keys[i] = keys[want[i]];
        const std::vector<K> keys_before = keys;
        std::vector<uint64_t> scratch(RadixPairsScratchBytes<K, V>(n) / 8 + 1);
        const bool sorted = ParallelRadixSortPairs(keys.data(), values.data(), n, descending, scratch.data(), threads);
        if (n >= 65536) {
          ASSERT_TRUE(sorted);
        }
        if (sorted) {
          ASSERT_EQ(keys, want_keys);
          ASSERT_EQ(values, want);
        } else {
          ASSERT_EQ(keys, keys_before);
        }
      }
    }
  }
}

TEST(CpuParallelRadixSortTest, PairsMatchStableSortOrDecline) {
  CheckParallelPairs<uint32_t, uint32_t>();
  CheckParallelPairs<int32_t, uint64_t>();
  CheckParallelPairs<uint64_t, uint32_t>();
  CheckParallelPairs<int64_t, uint64_t>();
}

TEST(CpuParallelRadixSortTest, MatchesStdSortOrDeclines) {
  CheckParallel<uint32_t>();
  CheckParallel<int32_t>();
  CheckParallel<uint64_t>();
  CheckParallel<int64_t>();
}

}  // namespace
}  // namespace sortd::cpu
