// Shared helpers for the core unit tests: an independent reference of the
// sortd order (written from the product contract, not from
// core/key_transform.h), input generators and bit-exact comparisons.
#ifndef SORTD_TESTS_CORE_SORT_TEST_UTIL_H_
#define SORTD_TESTS_CORE_SORT_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "core/types.h"
#include "gtest/gtest.h"

namespace sortd::testing {

// ---------------------------------------------------------------------------
// Bit patterns.

template <typename T>
using BitsOf = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

template <typename T>
BitsOf<T> ToBits(T v) {
  BitsOf<T> b;
  std::memcpy(&b, &v, sizeof(b));
  return b;
}

template <typename T>
T FromBits(BitsOf<T> b) {
  T v;
  std::memcpy(&v, &b, sizeof(v));
  return v;
}

template <typename T>
std::string Describe(T v) {
  std::ostringstream os;
  if constexpr (std::is_floating_point_v<T>) {
    os.precision(std::numeric_limits<T>::max_digits10);
    os << v;
  } else {
    os << +v;
  }
  os << " (bits 0x" << std::hex << ToBits(v) << ")";
  return os.str();
}

// ---------------------------------------------------------------------------
// The reference order (the product contract).
//
// Integers: the usual order. Floats: -inf < negatives < -0.0 < +0.0 <
// positives < +inf < NaN, and all NaNs (any sign, any payload) are equal.
// Written with float comparisons and signbit, deliberately not with the
// engine's OrderedBits mapping.
template <typename T>
bool RefLess(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool na = std::isnan(a);
    const bool nb = std::isnan(b);
    if (na || nb) return !na && nb;
    if (a < b) return true;
    if (b < a) return false;
    return std::signbit(a) && !std::signbit(b);  // -0.0 < +0.0
  } else {
    return a < b;
  }
}

template <typename T>
struct RefResult {
  std::vector<T> keys;
  std::vector<uint64_t> indices;
};

// std::stable_sort of the input positions with the explicit total order;
// descending compares with the arguments swapped, so equal keys keep input
// order in both directions.
template <typename T>
RefResult<T> ReferenceSort(const std::vector<T>& in, SortOrder order) {
  RefResult<T> r;
  r.indices.resize(in.size());
  std::iota(r.indices.begin(), r.indices.end(), uint64_t{0});
  const T* k = in.data();
  if (order == SortOrder::kAscending) {
    std::stable_sort(r.indices.begin(), r.indices.end(),
                     [k](uint64_t a, uint64_t b) { return RefLess(k[a], k[b]); });
  } else {
    std::stable_sort(r.indices.begin(), r.indices.end(),
                     [k](uint64_t a, uint64_t b) { return RefLess(k[b], k[a]); });
  }
  r.keys.resize(in.size());
  for (size_t i = 0; i < in.size(); ++i) r.keys[i] = in[r.indices[i]];
  return r;
}

// ---------------------------------------------------------------------------
// Comparisons that report the first difference only (a failed 2^20 sort
// should not print a million lines).

template <typename T>
::testing::AssertionResult SameBits(const std::vector<T>& actual,
                                    const std::vector<T>& expected) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << "size " << actual.size() << " != expected " << expected.size();
  }
  size_t mismatches = 0;
  size_t first = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (ToBits(actual[i]) != ToBits(expected[i])) {
      if (mismatches++ == 0) first = i;
    }
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << mismatches << " of " << actual.size()
         << " keys differ bitwise; first at [" << first
         << "]: got " << Describe(actual[first]) << ", expected "
         << Describe(expected[first]);
}

inline ::testing::AssertionResult SameIndices(
    const std::vector<uint64_t>& actual, const std::vector<uint64_t>& expected) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << "size " << actual.size() << " != expected " << expected.size();
  }
  size_t mismatches = 0;
  size_t first = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (actual[i] != expected[i]) {
      if (mismatches++ == 0) first = i;
    }
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << mismatches << " of " << actual.size()
         << " indices differ; first at [" << first << "]: got "
         << actual[first] << ", expected " << expected[first];
}

inline ::testing::AssertionResult IsPermutation(
    const std::vector<uint64_t>& indices) {
  std::vector<bool> seen(indices.size(), false);
  for (size_t i = 0; i < indices.size(); ++i) {
    const uint64_t v = indices[i];
    if (v >= indices.size()) {
      return ::testing::AssertionFailure()
             << "indices[" << i << "] = " << v << " out of range";
    }
    if (seen[v]) {
      return ::testing::AssertionFailure()
             << "indices[" << i << "] = " << v << " repeated";
    }
    seen[v] = true;
  }
  return ::testing::AssertionSuccess();
}

// keys[i] is bitwise input[indices[i]] for every i.
template <typename T>
::testing::AssertionResult KeysMatchIndices(const std::vector<T>& keys,
                                            const std::vector<T>& input,
                                            const std::vector<uint64_t>& indices) {
  for (size_t i = 0; i < keys.size(); ++i) {
    if (indices[i] >= input.size() ||
        ToBits(keys[i]) != ToBits(input[indices[i]])) {
      return ::testing::AssertionFailure()
             << "keys[" << i << "] = " << Describe(keys[i])
             << " is not input[indices[" << i << "] = " << indices[i] << "]";
    }
  }
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------------------
// Inputs.

// Values at the edges of each type. For floats: NaNs of both signs with
// several payloads (quiet and signalling), +-0.0, +-inf, denormals, extreme
// finite values.
template <typename T>
std::vector<T> SpecialValues() {
  std::vector<T> v;
  if constexpr (std::is_floating_point_v<T>) {
    using L = std::numeric_limits<T>;
    using B = BitsOf<T>;
    constexpr int kBits = sizeof(T) * 8;
    constexpr int kMantBits = L::digits - 1;
    const B sign = B{1} << (kBits - 1);
    const B exp_all = ((B{1} << (kBits - 1 - kMantBits)) - 1) << kMantBits;
    const B quiet = B{1} << (kMantBits - 1);
    const B nan_bits[] = {
        exp_all | quiet,              // canonical quiet NaN
        exp_all | quiet | 1,          // quiet NaN, payload 1
        exp_all | quiet | 0x2a,       // quiet NaN, payload 42
        exp_all | 1,                  // signalling NaN, payload 1
        exp_all | (quiet - 1),        // signalling NaN, all-ones payload
        exp_all | (quiet | (quiet - 1)),  // quiet, all-ones mantissa
    };
    for (B b : nan_bits) {
      v.push_back(FromBits<T>(b));
      v.push_back(FromBits<T>(b | sign));
    }
    v.push_back(T(0.0));
    v.push_back(-T(0.0));
    v.push_back(L::infinity());
    v.push_back(-L::infinity());
    v.push_back(L::denorm_min());
    v.push_back(-L::denorm_min());
    v.push_back(FromBits<T>(quiet));        // a mid-range denormal
    v.push_back(FromBits<T>(quiet | sign));
    v.push_back(FromBits<T>(quiet - 1));    // largest denormal
    v.push_back(L::min());                  // smallest normal
    v.push_back(-L::min());
    v.push_back(L::max());
    v.push_back(L::lowest());
    v.push_back(T(1));
    v.push_back(T(-1));
    v.push_back(T(0.5));
    v.push_back(T(-1e10));
  } else {
    using L = std::numeric_limits<T>;
    v = {L::min(), L::max(), T(0), T(1), static_cast<T>(L::max() - 1),
         static_cast<T>(L::min() + 1), T(42)};
    if constexpr (std::is_signed_v<T>) v.push_back(T(-1));
  }
  return v;
}

template <typename T>
std::vector<T> NaNValues() {
  std::vector<T> nans;
  if constexpr (std::is_floating_point_v<T>) {
    for (T x : SpecialValues<T>()) {
      if (std::isnan(x)) nans.push_back(x);
    }
  }
  return nans;
}

enum class Pattern {
  kRandom,       // random bit patterns, with special values mixed in
  kAllEqual,     // one value repeated
  kSorted,       // ascending in the sortd order
  kReverse,      // descending in the sortd order
  kFewDistinct,  // four distinct values (for floats: two of them NaNs)
  kSpecials,     // only the special values (many duplicates; many NaNs)
};

inline const char* PatternName(Pattern p) {
  switch (p) {
    case Pattern::kRandom: return "random";
    case Pattern::kAllEqual: return "all-equal";
    case Pattern::kSorted: return "sorted";
    case Pattern::kReverse: return "reverse";
    case Pattern::kFewDistinct: return "few-distinct";
    case Pattern::kSpecials: return "specials";
  }
  return "?";
}

inline std::vector<Pattern> AllPatterns() {
  return {Pattern::kRandom, Pattern::kAllEqual, Pattern::kSorted,
          Pattern::kReverse, Pattern::kFewDistinct, Pattern::kSpecials};
}

template <typename T>
T RandomValue(std::mt19937_64& rng) {
  return FromBits<T>(static_cast<BitsOf<T>>(rng()));
}

template <typename T>
std::vector<T> MakeInput(Pattern pattern, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + n);
  const std::vector<T> specials = SpecialValues<T>();
  std::vector<T> v(n);
  auto random_or_special = [&]() -> T {
    if (rng() % 16 == 0) return specials[rng() % specials.size()];
    return RandomValue<T>(rng);
  };
  switch (pattern) {
    case Pattern::kRandom:
      for (auto& x : v) x = random_or_special();
      break;
    case Pattern::kAllEqual: {
      const T x = random_or_special();
      std::fill(v.begin(), v.end(), x);
      break;
    }
    case Pattern::kSorted:
    case Pattern::kReverse: {
      for (auto& x : v) x = random_or_special();
      // Sorted in the sortd order (NaNs last, then reversed: NaNs first).
      std::stable_sort(v.begin(), v.end(), [](T a, T b) { return RefLess(a, b); });
      if (pattern == Pattern::kReverse) std::reverse(v.begin(), v.end());
      break;
    }
    case Pattern::kFewDistinct: {
      std::vector<T> pool = {RandomValue<T>(rng), RandomValue<T>(rng)};
      if constexpr (std::is_floating_point_v<T>) {
        const std::vector<T> nans = NaNValues<T>();
        pool.push_back(nans[rng() % nans.size()]);
        pool.push_back(nans[rng() % nans.size()]);
      } else {
        pool.push_back(RandomValue<T>(rng));
        pool.push_back(RandomValue<T>(rng));
      }
      for (auto& x : v) x = pool[rng() % pool.size()];
      break;
    }
    case Pattern::kSpecials:
      for (auto& x : v) x = specials[rng() % specials.size()];
      break;
  }
  return v;
}

}  // namespace sortd::testing

#endif  // SORTD_TESTS_CORE_SORT_TEST_UTIL_H_
