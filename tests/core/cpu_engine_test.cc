// CPU engine against the product contract: every numeric type, both orders,
// keys-only and with indices, many sizes and input patterns, single- and
// multi-threaded; byte-string argsort; GatherByIndex; argument errors.
#include "core/cpu/cpu_engine.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/cpu/cpu_tuning.h"
#include "core/engine.h"
#include "core/types.h"
#include "gtest/gtest.h"
#include "tests/core/sort_test_util.h"

namespace sortd {
namespace {

using ::sortd::testing::AllPatterns;
using ::sortd::testing::FromBits;
using ::sortd::testing::IsPermutation;
using ::sortd::testing::KeysMatchIndices;
using ::sortd::testing::MakeInput;
using ::sortd::testing::NaNValues;
using ::sortd::testing::Pattern;
using ::sortd::testing::PatternName;
using ::sortd::testing::RandomValue;
using ::sortd::testing::RefResult;
using ::sortd::testing::ReferenceSort;
using ::sortd::testing::SpecialValues;
using ::sortd::testing::SameBits;
using ::sortd::testing::SameIndices;
using ::sortd::testing::ToBits;

constexpr SortOrder kOrders[] = {SortOrder::kAscending, SortOrder::kDescending};

const char* OrderName(SortOrder o) {
  return o == SortOrder::kAscending ? "asc" : "desc";
}

std::unique_ptr<SortEngine> SingleThreadEngine() {
  CpuEngineOptions o;
  o.max_threads = 1;
  return CreateCpuEngine(o);
}

std::unique_ptr<SortEngine> MultiThreadEngine(int threads, size_t threshold) {
  CpuEngineOptions o;
  o.max_threads = threads;
  o.parallel_threshold = threshold;
  return CreateCpuEngine(o);
}

template <typename T>
struct Sorted {
  std::vector<T> keys;
  std::vector<uint64_t> indices;  // empty for keys-only sorts
};

template <typename T>
Sorted<T> RunSort(SortEngine& engine, const std::vector<T>& input,
                  SortOrder order, bool with_indices) {
  Sorted<T> r;
  r.keys = input;
  if (with_indices) r.indices.assign(input.size(), ~uint64_t{0});
  const absl::Status s = engine.SortNumeric(
      NumericSpan(r.keys.data(), r.keys.size()), order,
      absl::MakeSpan(r.indices));
  EXPECT_TRUE(s.ok()) << s;
  return r;
}

// Sorts `input` with `engine` and checks the result bit-for-bit against the
// reference; with indices also checks the permutation directly.
template <typename T>
void ExpectSortMatches(SortEngine& engine, const std::vector<T>& input,
                       const RefResult<T>& ref, SortOrder order,
                       bool with_indices) {
  SCOPED_TRACE(::testing::Message()
               << "n=" << input.size() << " order=" << OrderName(order)
               << (with_indices ? " with indices" : " keys only"));
  const Sorted<T> got = RunSort(engine, input, order, with_indices);
  ASSERT_TRUE(SameBits(got.keys, ref.keys));
  if (with_indices && !input.empty()) {
    ASSERT_TRUE(IsPermutation(got.indices));
    ASSERT_TRUE(KeysMatchIndices(got.keys, input, got.indices));
    ASSERT_TRUE(SameIndices(got.indices, ref.indices));
  }
}

// Both orders, keys-only and with indices, on two engines.
template <typename T>
void ExpectBothEnginesMatchReference(SortEngine& a, SortEngine& b,
                                     const std::vector<T>& input) {
  for (SortOrder order : kOrders) {
    const RefResult<T> ref = ReferenceSort(input, order);
    for (bool with_indices : {false, true}) {
      ExpectSortMatches(a, input, ref, order, with_indices);
      ExpectSortMatches(b, input, ref, order, with_indices);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

template <typename T>
class CpuEngineTypedTest : public ::testing::Test {};

using NumericTypes =
    ::testing::Types<uint32_t, int32_t, float, uint64_t, int64_t, double>;
TYPED_TEST_SUITE(CpuEngineTypedTest, NumericTypes);

// Every pattern, both orders, both modes, small and odd sizes, on a
// single-threaded engine and on a default-options engine.
TYPED_TEST(CpuEngineTypedTest, MatchesReferenceSmallAndOddSizes) {
  using T = TypeParam;
  auto st = SingleThreadEngine();
  auto def = CreateCpuEngine(CpuEngineOptions{});
  const size_t sizes[] = {0,  1,   2,   3,   4,   5,   7,   8,   9,   15,  16,
                          17, 31,  32,  33,  63,  64,  65,  127, 128, 129, 255,
                          256, 257, 511, 1001, 4097, 16411};
  uint64_t seed = 1;
  for (Pattern pattern : AllPatterns()) {
    for (size_t n : sizes) {
      SCOPED_TRACE(::testing::Message() << "pattern=" << PatternName(pattern));
      ExpectBothEnginesMatchReference(*st, *def, MakeInput<T>(pattern, n, seed++));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// 2^20 + 7 keys: random for every type plus a duplicate-heavy pattern (the
// special values for floats, few distinct values for integers). The
// default-options engine takes its multi-threaded path at this size.
TYPED_TEST(CpuEngineTypedTest, MatchesReferenceLarge) {
  using T = TypeParam;
  constexpr size_t kN = (size_t{1} << 20) + 7;
  auto st = SingleThreadEngine();
  auto def = CreateCpuEngine(CpuEngineOptions{});
  const Pattern dup_heavy = std::is_floating_point_v<T> ? Pattern::kSpecials
                                                        : Pattern::kFewDistinct;
  uint64_t seed = 1000;
  for (Pattern pattern : {Pattern::kRandom, dup_heavy}) {
    SCOPED_TRACE(::testing::Message() << "pattern=" << PatternName(pattern));
    ExpectBothEnginesMatchReference(*st, *def, MakeInput<T>(pattern, kN, seed++));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Float keys with no NaN take a branch-free mapping pass (the usual case);
// one NaN anywhere sends the array back, mapped back bit for bit, to the
// NaN-aside path. Both against the reference, bit for bit, including -0.0,
// +-inf and subnormals, on one thread and across threads.
template <typename T>
void ExpectFloatsWithAndWithoutNaNsMatchReference() {
  auto st = SingleThreadEngine();
  auto mt = MultiThreadEngine(4, 1000);
  std::vector<T> finite_specials;
  for (T x : SpecialValues<T>()) {
    if (x == x) finite_specials.push_back(x);
  }
  const std::vector<T> nans = NaNValues<T>();
  uint64_t seed = 41;
  for (size_t n : {size_t{2}, size_t{1001}, size_t{65537}, (size_t{1} << 20) + 7}) {
    std::mt19937_64 rng(seed++);
    std::vector<T> no_nans(n);
    for (T& x : no_nans) {
      do {
        x = rng() % 8 == 0 ? finite_specials[rng() % finite_specials.size()] : RandomValue<T>(rng);
      } while (x != x);
    }
    std::vector<T> one_nan = no_nans;
    one_nan[rng() % n] = nans[rng() % nans.size()];
    for (const std::vector<T>* input : {&no_nans, &one_nan}) {
      SCOPED_TRACE(::testing::Message() << (input == &no_nans ? "no NaN" : "one NaN"));
      for (SortOrder order : kOrders) {
        const RefResult<T> ref = ReferenceSort(*input, order);
        for (SortEngine* engine : {st.get(), mt.get()}) {
          const Sorted<T> got = RunSort(*engine, *input, order, /*with_indices=*/false);
          ASSERT_TRUE(SameBits(got.keys, ref.keys)) << "n=" << n << " " << OrderName(order);
        }
      }
    }
  }
}

TEST(CpuEngineFloatMappingTest, FloatsWithAndWithoutNaNsMatchReference) {
  ExpectFloatsWithAndWithoutNaNsMatchReference<float>();
}

TEST(CpuEngineFloatMappingTest, DoublesWithAndWithoutNaNsMatchReference) {
  ExpectFloatsWithAndWithoutNaNsMatchReference<double>();
}

// The multi-threaded path (low threshold, 2..7 threads: one partition
// bucket per thread, uneven bucket sizes) gives exactly the single-threaded
// result, which is exactly the reference.
TYPED_TEST(CpuEngineTypedTest, MultiThreadedMatchesSingleThreaded) {
  using T = TypeParam;
  auto st = SingleThreadEngine();
  std::vector<std::unique_ptr<SortEngine>> mt;
  for (int threads : {2, 3, 4, 7}) mt.push_back(MultiThreadEngine(threads, 1000));
  const size_t sizes[] = {999, 1000, 1001, 1024, 4099, 65537, 100003};
  std::vector<Pattern> patterns = {Pattern::kRandom, Pattern::kFewDistinct,
                                   Pattern::kSorted};
  if (std::is_floating_point_v<T>) patterns.push_back(Pattern::kSpecials);
  uint64_t seed = 2000;
  for (Pattern pattern : patterns) {
    for (size_t n : sizes) {
      SCOPED_TRACE(::testing::Message() << "pattern=" << PatternName(pattern));
      const std::vector<T> input = MakeInput<T>(pattern, n, seed++);
      for (SortOrder order : kOrders) {
        const RefResult<T> ref = ReferenceSort(input, order);
        for (bool with_indices : {false, true}) {
          const Sorted<T> single = RunSort(*st, input, order, with_indices);
          ASSERT_TRUE(SameBits(single.keys, ref.keys));
          for (size_t e = 0; e < mt.size(); ++e) {
            SCOPED_TRACE(::testing::Message() << "engine #" << e << " n=" << n
                                              << " " << OrderName(order)
                                              << (with_indices ? " indices" : ""));
            const Sorted<T> multi = RunSort(*mt[e], input, order, with_indices);
            ASSERT_TRUE(SameBits(multi.keys, single.keys));
            ASSERT_TRUE(SameIndices(multi.indices, single.indices));
            if (with_indices) {
              ASSERT_TRUE(SameIndices(multi.indices, ref.indices));
            }
          }
        }
      }
    }
  }
}

// Stability checked directly (not only through the reference): within every
// run of equal keys the indices increase, in both orders.
TYPED_TEST(CpuEngineTypedTest, EqualKeysKeepInputOrder) {
  using T = TypeParam;
  auto st = SingleThreadEngine();
  auto mt = MultiThreadEngine(4, 1000);  // the parallel routes
  auto two = MultiThreadEngine(2, 1000);  // 2 threads: the one-thread radix routes
  for (size_t n : {size_t{50}, size_t{1001}, size_t{65537}}) {
    const std::vector<T> input = MakeInput<T>(Pattern::kFewDistinct, n, 77 + n);
    for (SortOrder order : kOrders) {
      for (SortEngine* engine : {st.get(), mt.get(), two.get()}) {
        const Sorted<T> got = RunSort(*engine, input, order, true);
        ASSERT_TRUE(IsPermutation(got.indices));
        for (size_t i = 1; i < n; ++i) {
          const T a = got.keys[i - 1];
          const T b = got.keys[i];
          const bool equal = !testing::RefLess(a, b) && !testing::RefLess(b, a);
          if (equal) {
            ASSERT_LT(got.indices[i - 1], got.indices[i])
                << "unstable at " << i << " n=" << n << " " << OrderName(order);
          } else if (order == SortOrder::kAscending) {
            ASSERT_TRUE(testing::RefLess(a, b)) << "out of order at " << i;
          } else {
            ASSERT_TRUE(testing::RefLess(b, a)) << "out of order at " << i;
          }
        }
      }
    }
  }
}

// Descending is the exact reverse of ascending when the keys are distinct.
TYPED_TEST(CpuEngineTypedTest, DescendingReversesAscendingForDistinctKeys) {
  using T = TypeParam;
  auto st = SingleThreadEngine();
  std::vector<T> input = MakeInput<T>(Pattern::kRandom, 5000, 99);
  // Make the keys distinct (and NaN-free, since NaNs are all equal).
  std::sort(input.begin(), input.end(),
            [](T a, T b) { return ToBits(a) < ToBits(b); });
  input.erase(std::unique(input.begin(), input.end(),
                          [](T a, T b) { return ToBits(a) == ToBits(b); }),
              input.end());
  input.erase(std::remove_if(input.begin(), input.end(),
                             [](T x) { return x != x; }),
              input.end());
  std::shuffle(input.begin(), input.end(), std::mt19937_64(5));
  for (bool with_indices : {false, true}) {
    Sorted<T> asc = RunSort(*st, input, SortOrder::kAscending, with_indices);
    const Sorted<T> desc = RunSort(*st, input, SortOrder::kDescending, with_indices);
    std::reverse(asc.keys.begin(), asc.keys.end());
    std::reverse(asc.indices.begin(), asc.indices.end());
    EXPECT_TRUE(SameBits(desc.keys, asc.keys));
    EXPECT_TRUE(SameIndices(desc.indices, asc.indices));
  }
}

// ---------------------------------------------------------------------------
// Floats: the documented order, spelled out.

template <typename T>
class CpuEngineFloatTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CpuEngineFloatTest, FloatTypes);

TYPED_TEST(CpuEngineFloatTest, DocumentedOrderAndNaNPayloads) {
  using T = TypeParam;
  using L = std::numeric_limits<T>;
  const std::vector<T> nans = NaNValues<T>();
  ASSERT_GE(nans.size(), 6u);
  const T nan_a = nans[0];  // +quiet
  const T nan_b = nans[3];  // -quiet payload 1
  const T nan_c = nans[4];  // +quiet payload 42
  const T nan_d = nans[7];  // -signalling payload 1
  ASSERT_TRUE(std::signbit(nan_b) && std::signbit(nan_d));
  ASSERT_FALSE(std::signbit(nan_a) || std::signbit(nan_c));
  const T dmin = L::denorm_min();
  const std::vector<T> input = {
      T(1),  nan_a,  -L::infinity(), -T(0),   L::infinity(), nan_b, dmin,
      T(-1), T(0),   -dmin,          nan_c,   L::lowest(),   L::max(),
      nan_d, T(-0.5), T(2)};
  const std::vector<T> ascending = {
      -L::infinity(), L::lowest(), T(-1), T(-0.5), -dmin, -T(0), T(0), dmin,
      T(1), T(2), L::max(), L::infinity(), nan_a, nan_b, nan_c, nan_d};
  const std::vector<T> descending = {
      nan_a, nan_b, nan_c, nan_d, L::infinity(), L::max(), T(2), T(1), dmin,
      T(0), -T(0), -dmin, T(-0.5), T(-1), L::lowest(), -L::infinity()};
  for (const auto& engine : {SingleThreadEngine(), MultiThreadEngine(3, 4)}) {
    for (bool with_indices : {false, true}) {
      SCOPED_TRACE(with_indices ? "with indices" : "keys only");
      const Sorted<T> asc =
          RunSort(*engine, input, SortOrder::kAscending, with_indices);
      EXPECT_TRUE(SameBits(asc.keys, ascending));
      const Sorted<T> desc =
          RunSort(*engine, input, SortOrder::kDescending, with_indices);
      EXPECT_TRUE(SameBits(desc.keys, descending));
      if (with_indices) {
        EXPECT_EQ(asc.indices, (std::vector<uint64_t>{2, 11, 7, 14, 9, 3, 8, 6,
                                                      0, 15, 12, 4, 1, 5, 10, 13}));
        EXPECT_EQ(desc.indices, (std::vector<uint64_t>{1, 5, 10, 13, 4, 12, 15,
                                                       0, 6, 8, 3, 9, 14, 7, 11, 2}));
      }
    }
  }
}

// Many NaNs with distinct payloads among numbers: keys-only sorts must keep
// every payload and their input order (NaNs last ascending, first
// descending), for large arrays too.
TYPED_TEST(CpuEngineFloatTest, NaNPayloadsKeepInputOrder) {
  using T = TypeParam;
  using B = testing::BitsOf<T>;
  const std::vector<T> nan_seeds = NaNValues<T>();
  std::mt19937_64 rng(11);
  for (size_t n : {size_t{100}, size_t{5003}, (size_t{1} << 18) + 3}) {
    std::vector<T> input(n);
    std::vector<B> nan_bits_in_order;
    for (size_t i = 0; i < n; ++i) {
      if (rng() % 3 == 0) {
        // A NaN with a unique payload: keep exponent/sign/quiet bit of a
        // seed NaN, put a counter in the low mantissa bits.
        B bits = ToBits(nan_seeds[rng() % nan_seeds.size()]);
        bits = (bits & ~B{0xffff}) | B(1 + nan_bits_in_order.size() % 0xfffe);
        input[i] = FromBits<T>(bits);
        nan_bits_in_order.push_back(bits);
      } else {
        input[i] = static_cast<T>(static_cast<int64_t>(rng() % 2001) - 1000) / T(8);
      }
    }
    for (const auto& engine : {SingleThreadEngine(), MultiThreadEngine(4, 1000)}) {
      for (SortOrder order : kOrders) {
        for (bool with_indices : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "n=" << n << " " << OrderName(order)
                                            << (with_indices ? " indices" : ""));
          const Sorted<T> got = RunSort(*engine, input, order, with_indices);
          const size_t first_nan =
              order == SortOrder::kAscending ? n - nan_bits_in_order.size() : 0;
          for (size_t j = 0; j < nan_bits_in_order.size(); ++j) {
            ASSERT_EQ(ToBits(got.keys[first_nan + j]), nan_bits_in_order[j])
                << "NaN #" << j;
          }
          ASSERT_TRUE(SameBits(got.keys, ReferenceSort(input, order).keys));
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Byte strings.

std::vector<uint64_t> ArgsortBytes(SortEngine& engine,
                                   const std::vector<std::string_view>& keys,
                                   SortOrder order) {
  std::vector<uint64_t> indices(keys.size(), ~uint64_t{0});
  const absl::Status s =
      engine.ArgsortBytes(absl::MakeConstSpan(keys), order, absl::MakeSpan(indices));
  EXPECT_TRUE(s.ok()) << s;
  return indices;
}

bool RefLessBytes(std::string_view a, std::string_view b) {
  return std::lexicographical_compare(
      a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
        return static_cast<unsigned char>(x) < static_cast<unsigned char>(y);
      });
}

std::vector<uint64_t> RefArgsortBytes(const std::vector<std::string_view>& keys,
                                      SortOrder order) {
  std::vector<uint64_t> idx(keys.size());
  std::iota(idx.begin(), idx.end(), uint64_t{0});
  std::stable_sort(idx.begin(), idx.end(), [&](uint64_t a, uint64_t b) {
    return order == SortOrder::kAscending ? RefLessBytes(keys[a], keys[b])
                                          : RefLessBytes(keys[b], keys[a]);
  });
  return idx;
}

TEST(CpuEngineBytesTest, DocumentedOrder) {
  using std::string_view;
  const std::vector<string_view> keys = {
      "b",                     // 0
      "a",                     // 1
      "ab",                    // 2
      "",                      // 3
      "a\x80",                 // 4  (0x80 > 'b' > 0x7f)
      "a\x7f",                 // 5
      "A",                     // 6
      "a",                     // 7
      "\xff",                  // 8
      string_view("\0", 1),    // 9
      string_view("a\0", 2),   // 10
      "",                      // 11
  };
  for (const auto& engine : {SingleThreadEngine(), MultiThreadEngine(3, 2)}) {
    EXPECT_EQ(ArgsortBytes(*engine, keys, SortOrder::kAscending),
              (std::vector<uint64_t>{3, 11, 9, 6, 1, 7, 10, 2, 5, 4, 0, 8}));
    EXPECT_EQ(ArgsortBytes(*engine, keys, SortOrder::kDescending),
              (std::vector<uint64_t>{8, 0, 4, 5, 2, 10, 1, 7, 6, 9, 3, 11}));
  }
}

TEST(CpuEngineBytesTest, MatchesReferenceSingleAndMultiThreaded) {
  const unsigned char alphabet[] = {0x00, 0x01, 'a', 'b', 0x7f, 0x80, 0x81, 0xff};
  std::vector<std::unique_ptr<SortEngine>> engines;
  engines.push_back(SingleThreadEngine());
  engines.push_back(CreateCpuEngine(CpuEngineOptions{}));
  engines.push_back(MultiThreadEngine(3, 1000));
  engines.push_back(MultiThreadEngine(4, 1000));
  std::mt19937_64 rng(3);
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{17},
                   size_t{1001}, size_t{4099}, size_t{100003}}) {
    std::vector<std::string> storage(n);
    for (auto& s : storage) {
      const size_t len = rng() % 6;
      for (size_t j = 0; j < len; ++j) {
        s.push_back(static_cast<char>(alphabet[rng() % sizeof(alphabet)]));
      }
    }
    const std::vector<std::string_view> keys(storage.begin(), storage.end());
    for (SortOrder order : kOrders) {
      const std::vector<uint64_t> ref = RefArgsortBytes(keys, order);
      for (size_t e = 0; e < engines.size(); ++e) {
        SCOPED_TRACE(::testing::Message() << "n=" << n << " " << OrderName(order)
                                          << " engine #" << e);
        const std::vector<uint64_t> got = ArgsortBytes(*engines[e], keys, order);
        ASSERT_TRUE(IsPermutation(got));
        ASSERT_TRUE(SameIndices(got, ref));
      }
    }
  }
}

// ---------------------------------------------------------------------------
// GatherByIndex.

template <typename T>
void CheckGather(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> src(n);
  for (auto& x : src) x = static_cast<T>(rng());
  // A permutation followed by repeated indices (gather need not be 1:1).
  std::vector<uint64_t> idx(n);
  std::iota(idx.begin(), idx.end(), uint64_t{0});
  std::shuffle(idx.begin(), idx.end(), rng);
  for (size_t i = 0; i < n / 4; ++i) idx.push_back(rng() % n);
  std::vector<T> dst(idx.size(), T(0));
  ASSERT_TRUE(GatherByIndex(src.data(), sizeof(T), absl::MakeConstSpan(idx),
                            dst.data())
                  .ok());
  for (size_t i = 0; i < idx.size(); ++i) {
    ASSERT_EQ(dst[i], src[idx[i]]) << "at " << i;
  }
}

TEST(GatherByIndexTest, FourAndEightByteElements) {
  for (size_t n : {size_t{1}, size_t{7}, size_t{1000}, size_t{100003}}) {
    CheckGather<uint32_t>(n, n);
    CheckGather<uint64_t>(n, n + 1);
  }
}

TEST(GatherByIndexTest, EmptyIsOk) {
  EXPECT_TRUE(GatherByIndex(nullptr, 4, {}, nullptr).ok());
  EXPECT_TRUE(GatherByIndex(nullptr, 8, {}, nullptr).ok());
}

TEST(GatherByIndexTest, GathersValuesOfAPairsSort) {
  auto engine = SingleThreadEngine();
  std::vector<float> keys = {3.f, -1.f, 3.f, 0.f, -1.f};
  const std::vector<uint32_t> values = {30, 10, 31, 0, 11};
  std::vector<uint64_t> idx(keys.size());
  ASSERT_TRUE(engine
                  ->SortNumeric(NumericSpan(keys.data(), keys.size()),
                                SortOrder::kAscending, absl::MakeSpan(idx))
                  .ok());
  std::vector<uint32_t> out(values.size());
  ASSERT_TRUE(GatherByIndex(values.data(), 4, absl::MakeConstSpan(idx), out.data()).ok());
  EXPECT_EQ(out, (std::vector<uint32_t>{10, 11, 0, 30, 31}));
}

TEST(GatherByIndexTest, RejectsOtherElementSizes) {
  const uint16_t src[2] = {1, 2};
  uint16_t dst[2];
  const std::vector<uint64_t> idx = {1, 0};
  for (size_t size : {size_t{0}, size_t{1}, size_t{2}, size_t{16}}) {
    EXPECT_EQ(GatherByIndex(src, size, absl::MakeConstSpan(idx), dst).code(),
              absl::StatusCode::kInvalidArgument)
        << size;
  }
}

// ---------------------------------------------------------------------------
// Argument errors and identity.

TEST(CpuEngineTest, KindIsCpu) {
  EXPECT_EQ(SingleThreadEngine()->kind(), EngineKind::kCpu);
  EXPECT_EQ(CreateCpuEngine(CpuEngineOptions{})->kind(), EngineKind::kCpu);
}

TEST(CpuEngineTest, RejectsBadArguments) {
  auto engine = SingleThreadEngine();
  std::vector<uint32_t> keys = {3, 1, 2};
  std::vector<uint64_t> short_indices(2);
  EXPECT_EQ(engine
                ->SortNumeric(NumericSpan(keys.data(), keys.size()),
                              SortOrder::kAscending, absl::MakeSpan(short_indices))
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine
                ->SortNumeric(NumericSpan(DataType::kBytes, keys.data(), keys.size()),
                              SortOrder::kAscending, {})
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine
                ->SortNumeric(NumericSpan(DataType::kUint32, nullptr, 3),
                              SortOrder::kAscending, {})
                .code(),
            absl::StatusCode::kInvalidArgument);
  // Nothing was touched by the failed calls.
  EXPECT_EQ(keys, (std::vector<uint32_t>{3, 1, 2}));

  const std::vector<std::string_view> strings = {"b", "a"};
  std::vector<uint64_t> one(1);
  EXPECT_EQ(engine
                ->ArgsortBytes(absl::MakeConstSpan(strings), SortOrder::kAscending,
                               absl::MakeSpan(one))
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CpuEngineTest, EmptyAndNullAreOk) {
  auto engine = SingleThreadEngine();
  EXPECT_TRUE(engine
                  ->SortNumeric(NumericSpan(DataType::kFloat64, nullptr, 0),
                                SortOrder::kDescending, {})
                  .ok());
  EXPECT_TRUE(engine->ArgsortBytes({}, SortOrder::kAscending, {}).ok());
}

}  // namespace
}  // namespace sortd

namespace sortd {
namespace {

// Pairs sorted together (CpuEngine::SortPairsNumeric: on one thread the
// radix sort moves each value with its key) give exactly what argsort +
// gather (the SortEngine default) gives: every key type, 4- and 8-byte
// values, both orders, sizes around the direct path's minimum and large,
// duplicates (stability: values are input positions), and float specials
// (with NaNs the direct path steps aside: their payloads must survive).
template <typename V>
std::vector<V> PositionValues(size_t n) {
  std::vector<V> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<V>(i * 2654435761u + (sizeof(V) == 8 ? (i << 40) : 0));
  return values;
}

template <typename T, typename V>
void ExpectPairsMatchArgsortAndGather(SortEngine& engine, const std::vector<T>& input, SortOrder order) {
  std::vector<T> keys = input, ref_keys = input;
  std::vector<V> values = PositionValues<V>(input.size()), ref_values = values;
  ASSERT_TRUE(engine.SortPairsNumeric(NumericSpan(keys.data(), keys.size()), values.data(), sizeof(V), order).ok());
  ASSERT_TRUE(engine.SortEngine::SortPairsNumeric(NumericSpan(ref_keys.data(), ref_keys.size()), ref_values.data(),
                                                  sizeof(V), order).ok());
  ASSERT_TRUE(SameBits(keys, ref_keys)) << "n=" << input.size() << " " << OrderName(order);
  ASSERT_EQ(values, ref_values) << "n=" << input.size() << " " << OrderName(order);
}

TYPED_TEST(CpuEngineTypedTest, PairsSortedTogetherMatchArgsortAndGather) {
  using T = TypeParam;
  auto st = SingleThreadEngine();
  auto mt = MultiThreadEngine(3, 1000);  // several threads: argsort + gather
  auto two = MultiThreadEngine(2, 1000);  // two threads: sorted together on one
  std::vector<Pattern> patterns = {Pattern::kRandom, Pattern::kFewDistinct, Pattern::kReverse};
  if (std::is_floating_point_v<T>) patterns.push_back(Pattern::kSpecials);
  uint64_t seed = 3000;
  for (Pattern pattern : patterns) {
    for (size_t n : {size_t{1}, size_t{255}, size_t{256}, size_t{257}, size_t{4099}, size_t{65537},
                     (size_t{1} << 20) + 3}) {
      SCOPED_TRACE(::testing::Message() << "pattern=" << PatternName(pattern));
      const std::vector<T> input = MakeInput<T>(pattern, n, seed++);
      for (SortOrder order : kOrders) {
        ExpectPairsMatchArgsortAndGather<T, uint32_t>(*st, input, order);
        ExpectPairsMatchArgsortAndGather<T, uint64_t>(*st, input, order);
        if (n > 1000) ExpectPairsMatchArgsortAndGather<T, uint32_t>(*mt, input, order);
        if (n > 1000) ExpectPairsMatchArgsortAndGather<T, uint64_t>(*two, input, order);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// The CPU tuning (core/cpu/cpu_tuning.h): names, the engine option's pin,
// and both tunings' routes around their crossovers, against the reference.
TEST(CpuTuningTest, ParsesItsNamesAndRejectsOthers) {
  for (cpu::CpuTuning t : {cpu::CpuTuning::kAuto, cpu::CpuTuning::kZen4, cpu::CpuTuning::kZen5,
                           cpu::CpuTuning::kAvx512, cpu::CpuTuning::kAvx2}) {
    const std::optional<cpu::CpuTuning> parsed = cpu::ParseCpuTuning(cpu::CpuTuningName(t));
    ASSERT_TRUE(parsed.has_value()) << cpu::CpuTuningName(t);
    EXPECT_EQ(*parsed, t);
  }
  EXPECT_FALSE(cpu::ParseCpuTuning("avx3").has_value());
  EXPECT_FALSE(cpu::ParseCpuTuning("").has_value());
  EXPECT_FALSE(cpu::ParseCpuTuning("AVX2").has_value());
  EXPECT_NE(cpu::CpuTuningForThisCpu(), cpu::CpuTuning::kAuto);
}

// What auto picks, by what the CPU reports: the CPUs measured (Zen 3
// without AVX-512, Zen 4 = family 19h, Zen 5 = family 1Ah, an Intel Xeon),
// and later AMD families taken for Zen 5's kind.
TEST(CpuTuningTest, AutoPicksByVendorFamilyAndSimd) {
  EXPECT_EQ(cpu::TuningForCpu(/*avx512=*/false, /*amd=*/true, 0x19), cpu::CpuTuning::kAvx2);
  EXPECT_EQ(cpu::TuningForCpu(/*avx512=*/false, /*amd=*/false, 6), cpu::CpuTuning::kAvx2);
  EXPECT_EQ(cpu::TuningForCpu(/*avx512=*/true, /*amd=*/true, 0x19), cpu::CpuTuning::kZen4);
  EXPECT_EQ(cpu::TuningForCpu(/*avx512=*/true, /*amd=*/true, 0x1a), cpu::CpuTuning::kZen5);
  EXPECT_EQ(cpu::TuningForCpu(/*avx512=*/true, /*amd=*/true, 0x1b), cpu::CpuTuning::kZen5);
  EXPECT_EQ(cpu::TuningForCpu(/*avx512=*/true, /*amd=*/false, 6), cpu::CpuTuning::kAvx512);
}

constexpr cpu::CpuTuning kEveryTuning[] = {cpu::CpuTuning::kZen4, cpu::CpuTuning::kZen5,
                                           cpu::CpuTuning::kAvx512, cpu::CpuTuning::kAvx2};

// An engine pinning `tuning` (for the process, as every engine does).
std::unique_ptr<SortEngine> TunedEngine(cpu::CpuTuning tuning, int threads,
                                        size_t parallel_threshold = size_t{1} << 18) {
  CpuEngineOptions o;
  o.tuning = tuning;
  o.max_threads = threads;
  o.parallel_threshold = parallel_threshold;
  return CreateCpuEngine(o);
}

// Creating an engine pins its tuning for the process; auto resolves to
// this CPU's. Every two tunings differ in some crossover (else one would be
// moot).
TEST(CpuTuningTest, EngineOptionPinsTheTuning) {
  std::vector<std::pair<cpu::CpuTuning, cpu::CpuCrossovers>> seen;
  for (cpu::CpuTuning t : kEveryTuning) {
    auto engine = TunedEngine(t, 1);
    EXPECT_EQ(cpu::ActiveCpuTuning(), t);
    const cpu::CpuCrossovers c = cpu::ActiveCpuCrossovers();
    for (const auto& [other, o] : seen) {
      EXPECT_FALSE(c.radix_min_keys32 == o.radix_min_keys32 && c.radix_min_pairs == o.radix_min_pairs &&
                   c.radix_min_argsort32 == o.radix_min_argsort32 &&
                   c.radix_min_argsort64 == o.radix_min_argsort64)
          << cpu::CpuTuningName(t) << " has " << cpu::CpuTuningName(other) << "'s crossovers";
    }
    seen.emplace_back(t, c);
  }
  auto automatic = TunedEngine(cpu::CpuTuning::kAuto, 1);
  EXPECT_EQ(cpu::ActiveCpuTuning(), cpu::CpuTuningForThisCpu());
}

// Sizes on both sides of each tuning's keys crossover (512, 2^21, none), on
// one thread and on two (the parallel radix sort, or for floats of few
// binades the partition into chunks, which the crossover routes), 4-byte
// keys of every type, both orders, bit for bit against the reference.
TEST(CpuTuningTest, KeysMatchReferenceAcrossEveryTuningsCrossovers) {
  uint64_t seed = 5000;
  for (size_t n : {size_t{511}, size_t{512}, size_t{4099}, (size_t{1} << 16) + 3,
                   (size_t{1} << 21) - 1, (size_t{1} << 21) + 5}) {
    const bool large = n > (size_t{1} << 20);
    for (Pattern pattern : {Pattern::kRandom, Pattern::kFewDistinct}) {
      if (large && pattern != Pattern::kRandom) continue;
      SCOPED_TRACE(::testing::Message() << "pattern=" << PatternName(pattern) << " n=" << n);
      const std::vector<uint32_t> u = MakeInput<uint32_t>(pattern, n, seed++);
      const std::vector<int32_t> i = MakeInput<int32_t>(pattern, n, seed++);
      const std::vector<float> f = MakeInput<float>(pattern, n, seed++);
      for (SortOrder order : kOrders) {
        const RefResult<uint32_t> ref_u = ReferenceSort(u, order);
        const RefResult<int32_t> ref_i = ReferenceSort(i, order);
        const RefResult<float> ref_f = ReferenceSort(f, order);
        for (cpu::CpuTuning tuning : kEveryTuning) {
          SCOPED_TRACE(cpu::CpuTuningName(tuning));
          auto st = TunedEngine(tuning, 1);
          auto two = TunedEngine(tuning, 2, /*parallel_threshold=*/4096);
          ASSERT_EQ(cpu::ActiveCpuTuning(), tuning);
          for (SortEngine* engine : {st.get(), two.get()}) {
            ExpectSortMatches(*engine, u, ref_u, order, /*with_indices=*/false);
            ExpectSortMatches(*engine, i, ref_i, order, /*with_indices=*/false);
            ExpectSortMatches(*engine, f, ref_f, order, /*with_indices=*/false);
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
      }
    }
  }
  cpu::PinCpuTuning(cpu::CpuTuning::kAuto);
}

// The permutations' crossovers (pairs sorted together from 2048 or 2^17
// keys, 32-bit argsorts from 65536 or 2^17, 64-bit ones from 256 or 2^17)
// under every tuning: argsorts against the reference, pairs against
// argsort + gather, both orders, one thread.
TEST(CpuTuningTest, PermutationsMatchAcrossEveryTuningsCrossovers) {
  uint64_t seed = 7000;
  for (size_t n : {size_t{255}, size_t{256}, size_t{2047}, size_t{2048}, size_t{65535}, size_t{65536},
                   (size_t{1} << 17) - 1, (size_t{1} << 17) + 1}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    const std::vector<uint32_t> u = MakeInput<uint32_t>(Pattern::kRandom, n, seed++);
    const std::vector<float> f = MakeInput<float>(Pattern::kFewDistinct, n, seed++);
    const std::vector<int64_t> l = MakeInput<int64_t>(Pattern::kRandom, n, seed++);
    for (SortOrder order : kOrders) {
      const RefResult<uint32_t> ref_u = ReferenceSort(u, order);
      const RefResult<float> ref_f = ReferenceSort(f, order);
      const RefResult<int64_t> ref_l = ReferenceSort(l, order);
      for (cpu::CpuTuning tuning : kEveryTuning) {
        SCOPED_TRACE(cpu::CpuTuningName(tuning));
        auto st = TunedEngine(tuning, 1);
        ExpectSortMatches(*st, u, ref_u, order, /*with_indices=*/true);
        ExpectSortMatches(*st, f, ref_f, order, /*with_indices=*/true);
        ExpectSortMatches(*st, l, ref_l, order, /*with_indices=*/true);
        ExpectPairsMatchArgsortAndGather<uint32_t, uint32_t>(*st, u, order);
        ExpectPairsMatchArgsortAndGather<int64_t, uint64_t>(*st, l, order);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
  cpu::PinCpuTuning(cpu::CpuTuning::kAuto);
}

}  // namespace
}  // namespace sortd
