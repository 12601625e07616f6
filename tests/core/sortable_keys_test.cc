// core/sortable_keys.h: the words of every 8- and 16-bit element (all of
// them, exhaustively) order as sortd orders the elements, integers and bool
// come back exactly, and time words place NaT first or last in both orders.
#include "core/sortable_keys.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace sortd {
namespace {

// Every 2-byte (or 1-byte) pattern, packed little-endian.
std::vector<uint8_t> AllPatterns(size_t width) {
  const size_t count = size_t{1} << (8 * width);
  std::vector<uint8_t> bytes(count * width);
  for (size_t v = 0; v < count; ++v) {
    for (size_t b = 0; b < width; ++b) bytes[v * width + b] = static_cast<uint8_t>(v >> (8 * b));
  }
  return bytes;
}

std::vector<uint32_t> Widen(NarrowType type, const std::vector<uint8_t>& bytes) {
  std::vector<uint32_t> words(bytes.size() / NarrowWidth(type));
  WidenNarrow(type, bytes.data(), absl::MakeSpan(words));
  return words;
}

// The value of pattern v as a double, by the type's own rules.
double ValueOf(NarrowType type, uint32_t v) {
  switch (type) {
    case NarrowType::kInt8: return static_cast<int8_t>(v);
    case NarrowType::kUint8: return static_cast<uint8_t>(v);
    case NarrowType::kInt16: return static_cast<int16_t>(v);
    case NarrowType::kUint16: return static_cast<uint16_t>(v);
    case NarrowType::kBool: return v;
    case NarrowType::kBFloat16: {
      const uint32_t bits = v << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case NarrowType::kFloat16: {
      const int sign = (v >> 15) & 1, exponent = (v >> 10) & 0x1F, mantissa = v & 0x3FF;
      double magnitude;
      if (exponent == 0x1F) {
        magnitude = mantissa ? std::numeric_limits<double>::quiet_NaN()
                             : std::numeric_limits<double>::infinity();
      } else if (exponent == 0) {
        magnitude = std::ldexp(mantissa, -24);  // subnormal
      } else {
        magnitude = std::ldexp(1024 + mantissa, exponent - 25);
      }
      return sign ? -magnitude : magnitude;
    }
  }
  return 0;
}

// sortd's order: NaN last (all equal), -0.0 before +0.0. Returns -1/0/1.
int ContractCompare(double a, double b) {
  const bool an = std::isnan(a), bn = std::isnan(b);
  if (an || bn) return an == bn ? 0 : (an ? 1 : -1);
  if (a == 0 && b == 0) return std::signbit(b) - std::signbit(a);
  return a < b ? -1 : (a > b ? 1 : 0);
}

class NarrowOrderTest : public ::testing::TestWithParam<NarrowType> {};

TEST_P(NarrowOrderTest, WordsOrderEveryPatternAsSortdOrdersTheElements) {
  const NarrowType type = GetParam();
  std::vector<uint8_t> bytes = AllPatterns(NarrowWidth(type));
  // bool: only 0 and 1 are elements (the service refuses other bytes).
  if (type == NarrowType::kBool) bytes = {0, 1};
  const std::vector<uint32_t> words = Widen(type, bytes);
  const size_t n = words.size();
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return words[a] < words[b]; });
  int equal_words = 0;
  for (size_t i = 1; i < n; ++i) {
    const double prev = ValueOf(type, order[i - 1]), next = ValueOf(type, order[i]);
    const int cmp = ContractCompare(prev, next);
    ASSERT_LE(cmp, 0) << NarrowTypeName(type) << ": pattern " << order[i - 1] << " sorted before "
                      << order[i];
    // Equal words exactly when the elements are equal in sortd's order.
    ASSERT_EQ(words[order[i - 1]] == words[order[i]], cmp == 0)
        << NarrowTypeName(type) << ": patterns " << order[i - 1] << " and " << order[i];
    equal_words += words[order[i - 1]] == words[order[i]];
  }
  // Only the floats' NaNs share a word: 2 x (2^m - 1) NaN patterns.
  const int nan_patterns = type == NarrowType::kFloat16 ? 2 * 1023 : type == NarrowType::kBFloat16 ? 2 * 127 : 0;
  EXPECT_EQ(equal_words, std::max(nan_patterns - 1, 0));
}

class BijectiveNarrowTest : public ::testing::TestWithParam<NarrowType> {};

TEST_P(BijectiveNarrowTest, ElementsComeBackExactly) {
  const NarrowType type = GetParam();
  ASSERT_TRUE(NarrowIsBijective(type));
  std::vector<uint8_t> bytes = AllPatterns(NarrowWidth(type));
  if (type == NarrowType::kBool) bytes = {0, 1, 1, 0};
  const std::vector<uint32_t> words = Widen(type, bytes);
  std::vector<uint8_t> back(bytes.size(), 0xAB);
  NarrowWords(type, words, back.data());
  EXPECT_EQ(back, bytes);
  // The upper half of every word is constant, so a radix sort of the words
  // skips those passes.
  for (uint32_t w : words) ASSERT_LT(w, uint32_t{1} << (8 * NarrowWidth(type)));
}

auto TypeName(const ::testing::TestParamInfo<NarrowType>& info) {
  return std::string(NarrowTypeName(info.param));
}

// The 16-bit floats are not one to one (their NaNs share a word): the
// service gathers them instead.
TEST(NarrowFloatTest, FloatsAreNotNarrowedBack) {
  EXPECT_FALSE(NarrowIsBijective(NarrowType::kFloat16));
  EXPECT_FALSE(NarrowIsBijective(NarrowType::kBFloat16));
}

INSTANTIATE_TEST_SUITE_P(IntegersAndBool, BijectiveNarrowTest,
                         ::testing::Values(NarrowType::kInt8, NarrowType::kUint8, NarrowType::kInt16,
                                           NarrowType::kUint16, NarrowType::kBool),
                         TypeName);

INSTANTIATE_TEST_SUITE_P(AllNarrowTypes, NarrowOrderTest,
                         ::testing::Values(NarrowType::kInt8, NarrowType::kUint8, NarrowType::kInt16,
                                           NarrowType::kUint16, NarrowType::kFloat16,
                                           NarrowType::kBFloat16, NarrowType::kBool),
                         TypeName);

struct TimeCase {
  SortOrder order;
  NullPlacement nulls;
};

class TimeWordsTest : public ::testing::TestWithParam<TimeCase> {};

TEST_P(TimeWordsTest, NaTIsPlacedAndTimesKeepInt64Order) {
  const SortOrder order = GetParam().order;
  const NullPlacement nulls = GetParam().nulls;
  std::vector<int64_t> times = {kNaT, INT64_MAX, kNaT + 1, 0, -1, 1, kNaT, INT64_MAX, 42, kNaT + 1};
  std::mt19937_64 rng(7);
  for (int i = 0; i < 500; ++i) times.push_back(static_cast<int64_t>(rng()));
  for (int i = 0; i < 50; ++i) times.push_back(kNaT);
  const size_t n = times.size();
  std::vector<uint64_t> words(n);
  TimeToWords(times, order, nulls, absl::MakeSpan(words));
  // What an engine does: a stable sort of the words in `order`.
  std::vector<size_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](size_t a, size_t b) {
    return order == SortOrder::kAscending ? words[a] < words[b] : words[a] > words[b];
  });
  std::vector<uint64_t> sorted_words(n);
  for (size_t i = 0; i < n; ++i) sorted_words[i] = words[perm[i]];
  std::vector<int64_t> sorted(n);
  TimeFromWords(sorted_words, order, nulls, absl::MakeSpan(sorted));
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(sorted[i], times[perm[i]]) << "not restored at " << i;
  // The reference: NaTs at the placed end in input order, the rest stably
  // by int64 in `order`.
  std::vector<size_t> nat, rest;
  for (size_t i = 0; i < n; ++i) (times[i] == kNaT ? nat : rest).push_back(i);
  std::stable_sort(rest.begin(), rest.end(), [&](size_t a, size_t b) {
    return order == SortOrder::kAscending ? times[a] < times[b] : times[a] > times[b];
  });
  std::vector<size_t> expected;
  if (nulls == NullPlacement::kFirst) expected = nat;
  expected.insert(expected.end(), rest.begin(), rest.end());
  if (nulls == NullPlacement::kLast) expected.insert(expected.end(), nat.begin(), nat.end());
  EXPECT_EQ(perm, expected);
}

INSTANTIATE_TEST_SUITE_P(
    BothOrdersBothPlacements, TimeWordsTest,
    ::testing::Values(TimeCase{SortOrder::kAscending, NullPlacement::kLast},
                      TimeCase{SortOrder::kAscending, NullPlacement::kFirst},
                      TimeCase{SortOrder::kDescending, NullPlacement::kLast},
                      TimeCase{SortOrder::kDescending, NullPlacement::kFirst}),
    [](const ::testing::TestParamInfo<TimeCase>& info) {
      return std::string(info.param.order == SortOrder::kAscending ? "Ascending" : "Descending") +
             (info.param.nulls == NullPlacement::kLast ? "NullsLast" : "NullsFirst");
    });

}  // namespace
}  // namespace sortd
