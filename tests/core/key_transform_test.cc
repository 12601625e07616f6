// OrderedBits: the order of the mapped words is the sortd order of the keys,
// and Decode inverts Encode (NaNs: any NaN back).
#include "core/key_transform.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/core/sort_test_util.h"

namespace sortd {
namespace {

using ::sortd::testing::Describe;
using ::sortd::testing::RefLess;
using ::sortd::testing::SpecialValues;
using ::sortd::testing::ToBits;

template <typename T>
class KeyTransformTest : public ::testing::Test {};

using NumericTypes =
    ::testing::Types<uint32_t, int32_t, float, uint64_t, int64_t, double>;
TYPED_TEST_SUITE(KeyTransformTest, NumericTypes);

template <typename T>
std::vector<T> SampleValues() {
  std::vector<T> v = SpecialValues<T>();
  std::mt19937_64 rng(17);
  for (int i = 0; i < 600; ++i) {
    v.push_back(testing::RandomValue<T>(rng));
  }
  // Neighbours of the special values (bit pattern +-1).
  const std::vector<T> specials = SpecialValues<T>();
  for (T x : specials) {
    auto b = ToBits(x);
    v.push_back(testing::FromBits<T>(b + 1));
    v.push_back(testing::FromBits<T>(b - 1));
  }
  return v;
}

TYPED_TEST(KeyTransformTest, EncodePreservesTheSortdOrder) {
  using T = TypeParam;
  using Bits = OrderedBits<T>;
  static_assert(sizeof(typename Bits::Word) == sizeof(T));
  const std::vector<T> v = SampleValues<T>();
  for (T a : v) {
    for (T b : v) {
      const bool less = RefLess(a, b);
      const bool equal = !less && !RefLess(b, a);
      const auto ea = Bits::Encode(a);
      const auto eb = Bits::Encode(b);
      ASSERT_EQ(less, ea < eb) << Describe(a) << " vs " << Describe(b);
      ASSERT_EQ(equal, ea == eb) << Describe(a) << " vs " << Describe(b);
    }
  }
}

TYPED_TEST(KeyTransformTest, DecodeInvertsEncode) {
  using T = TypeParam;
  using Bits = OrderedBits<T>;
  for (T x : SampleValues<T>()) {
    const T y = Bits::Decode(Bits::Encode(x));
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(x)) {
        EXPECT_TRUE(std::isnan(y)) << Describe(x);
        continue;
      }
    }
    EXPECT_EQ(ToBits(y), ToBits(x)) << Describe(x);
  }
}

TEST(KeyTransformFloatTest, NaNsMapToOneWordAfterInfinity) {
  const auto inf32 = OrderedBits<float>::Encode(std::numeric_limits<float>::infinity());
  const auto inf64 = OrderedBits<double>::Encode(std::numeric_limits<double>::infinity());
  for (float x : testing::NaNValues<float>()) {
    EXPECT_EQ(OrderedBits<float>::Encode(x), 0xffffffffu) << Describe(x);
    EXPECT_LT(inf32, OrderedBits<float>::Encode(x));
  }
  for (double x : testing::NaNValues<double>()) {
    EXPECT_EQ(OrderedBits<double>::Encode(x), ~uint64_t{0}) << Describe(x);
    EXPECT_LT(inf64, OrderedBits<double>::Encode(x));
  }
  EXPECT_LT(OrderedBits<float>::Encode(-0.0f), OrderedBits<float>::Encode(0.0f));
  EXPECT_LT(OrderedBits<double>::Encode(-0.0), OrderedBits<double>::Encode(0.0));
}

}  // namespace
}  // namespace sortd
