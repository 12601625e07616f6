// GPU radix sort against a host reference: every key type and order,
// keys-only and pairs (4- and 8-byte values), sizes around tile boundaries
// and large, narrow-range and degenerate inputs, float specials, stability
// (values are input positions), and pass skipping. Skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/cuda/radix_sort.cuh"
#include "core/cuda/radix_tuning.cuh"
#include "tests/gpu/radix_reference.h"

namespace sortd::cuda {
namespace {

using namespace sortd::cuda::testing;  // NOLINT: test helpers


// Sorts on the GPU; values (when value_bytes > 0) are the input positions.
template <typename T>
void CheckSort(const std::vector<T>& keys, bool descending, int value_bytes,
               RadixSortStats* stats_out = nullptr, const std::string& what = "",
               bool skip_trivial_passes = true) {
  const size_t n = keys.size();
  DeviceBuffer d_in(n * sizeof(T)), d_out(n * sizeof(T));
  DeviceBuffer d_vin(n * 8), d_vout(n * 8);
  ASSERT_EQ(cudaMemcpy(d_in.ptr, keys.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  UploadPositionValues(d_vin.ptr, n, value_bytes);

  RadixSortProblem p;
  p.key_type = TypeOf<T>();
  p.num_items = n;
  p.descending = descending;
  p.d_keys_in = d_in.ptr;
  p.d_keys_out = d_out.ptr;
  p.value_bytes = value_bytes;
  p.d_values_in = value_bytes ? d_vin.ptr : nullptr;
  p.d_values_out = value_bytes ? d_vout.ptr : nullptr;
  p.skip_trivial_passes = skip_trivial_passes;
  size_t temp_bytes = 0;
  ASSERT_EQ(RadixSort(nullptr, temp_bytes, p, 0), cudaSuccess);
  DeviceBuffer temp(temp_bytes);
  RadixSortStats stats;
  ASSERT_EQ(RadixSort(temp.ptr, temp_bytes, p, 0, &stats), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  if (stats_out) *stats_out = stats;

  std::vector<T> out(n);
  cudaMemcpy(out.data(), d_out.ptr, n * sizeof(T), cudaMemcpyDeviceToHost);
  const std::vector<uint64_t> ref = ReferenceOrder(keys, descending);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(std::memcmp(&out[i], &keys[ref[i]], sizeof(T)), 0)
        << what << " key mismatch at " << i << " of " << n << (descending ? " desc" : " asc")
        << " value_bytes=" << value_bytes;
  }
  if (value_bytes == 4) {
    std::vector<uint32_t> vout(n);
    cudaMemcpy(vout.data(), d_vout.ptr, n * 4, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(vout[i], ref[i]) << what << " unstable/wrong value at " << i;
  } else if (value_bytes == 8) {
    std::vector<uint64_t> vout(n);
    cudaMemcpy(vout.data(), d_vout.ptr, n * 8, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(vout[i], PositionValue(ref[i], 8)) << what << " value at " << i;
  }
}


template <typename T>
class RadixSortTest : public ::testing::Test {};
using KeyTypes = ::testing::Types<uint32_t, int32_t, float, uint64_t, int64_t, double>;
TYPED_TEST_SUITE(RadixSortTest, KeyTypes);

TYPED_TEST(RadixSortTest, SizesAroundTilesBothOrdersKeysAndPairs) {
  SKIP_WITHOUT_GPU();
  using Tuning = OneSweepTuning<std::conditional_t<sizeof(TypeParam) == 4, uint32_t, uint64_t>>;
  const size_t keys_tile = static_cast<size_t>(Tuning::Keys::kBlockThreads) * Tuning::Keys::kItemsPerThread;
  const size_t pairs_tile = static_cast<size_t>(Tuning::Pairs::kBlockThreads) * Tuning::Pairs::kItemsPerThread;
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, keys_tile - 1, keys_tile, keys_tile + 1,
                   2 * keys_tile + 1, pairs_tile - 1, pairs_tile, pairs_tile + 1, 2 * pairs_tile + 1,
                   (size_t{1} << 20) + 7}) {
    const auto keys = Random<TypeParam>(n, n + 1);
    for (bool desc : {false, true}) {
      for (int vb : {0, 4, 8}) {
        CheckSort(keys, desc, vb, nullptr, "random n=" + std::to_string(n));
      }
    }
  }
}

TYPED_TEST(RadixSortTest, DegenerateAndNarrowInputs) {
  SKIP_WITHOUT_GPU();
  const size_t n = 100003;
  std::vector<TypeParam> equal(n, static_cast<TypeParam>(7));
  auto sorted = Random<TypeParam>(n, 5);
  std::sort(sorted.begin(), sorted.end(), Less<TypeParam>);
  auto reversed = sorted;
  std::reverse(reversed.begin(), reversed.end());
  auto few = Random<TypeParam>(n, 6, 2);
  for (bool desc : {false, true}) {
    for (int vb : {0, 4}) {
      CheckSort(equal, desc, vb, nullptr, "equal");
      CheckSort(sorted, desc, vb, nullptr, "sorted");
      CheckSort(reversed, desc, vb, nullptr, "reversed");
      CheckSort(few, desc, vb, nullptr, "few distinct");
      for (int bits : {8, 16, 24}) CheckSort(Random<TypeParam>(n, bits, bits), desc, vb, nullptr, "narrow");
    }
  }
}

TEST(RadixSortPassesTest, NarrowKeysSkipPasses) {
  SKIP_WITHOUT_GPU();
  RadixSortStats stats;
  CheckSort(Random<uint32_t>(1 << 20, 1, 8), false, 0, &stats);
  EXPECT_EQ(stats.passes_total, 4);
  EXPECT_EQ(stats.passes_run, 1);
  CheckSort(Random<uint32_t>(1 << 20, 2, 16), false, 4, &stats);
  EXPECT_EQ(stats.passes_run, 2);
  CheckSort(Random<uint64_t>(1 << 20, 3, 24), true, 8, &stats);
  EXPECT_EQ(stats.passes_total, 8);
  EXPECT_EQ(stats.passes_run, 3);
  CheckSort(std::vector<uint64_t>(5000, 42), false, 4, &stats);
  EXPECT_EQ(stats.passes_run, 0);
}


// The first pass is launched before the host has read the histogram and
// decides on the device: it must stand down when digit 0 is the same for
// every key (the host then runs the other passes from the input), and when
// it runs it must write the buffer that makes the last pass end in the
// caller's (odd and even pass counts).
TEST(RadixSortPassesTest, SpeculativeFirstPassStandsDownOrRoutes) {
  SKIP_WITHOUT_GPU();
  RadixSortStats stats;
  const size_t n = (size_t{1} << 18) + 3;
  auto low_digit_constant32 = Random<uint32_t>(n, 21, 24);
  for (auto& k : low_digit_constant32) k = (k << 8) | 0x5a;
  for (bool desc : {false, true}) {
    CheckSort(low_digit_constant32, desc, 0, &stats, "u32 digit 0 constant");
    EXPECT_EQ(stats.passes_run, 3);
    CheckSort(low_digit_constant32, desc, 4, &stats, "u32 digit 0 constant, pairs");
    EXPECT_EQ(stats.passes_run, 3);
  }
  auto low_digit_constant64 = Random<uint64_t>(n, 22, 16);
  for (auto& k : low_digit_constant64) k <<= 8;
  CheckSort(low_digit_constant64, false, 8, &stats, "u64 digit 0 constant");
  EXPECT_EQ(stats.passes_run, 2);
  auto signed_narrow = Random<int64_t>(n, 23, 40);  // 5 passes (odd), pass 0 runs
  CheckSort(signed_narrow, true, 4, &stats, "i64 40-bit desc");
  EXPECT_EQ(stats.passes_run, 5);
  auto ints_narrow = Random<int32_t>(n, 24, 16);  // sign bit constant too: 2 passes
  CheckSort(ints_narrow, false, 0, &stats, "i32 16-bit");
  EXPECT_EQ(stats.passes_run, 2);
}

// Without pass skipping every pass runs (no read-back for integer keys;
// floats still read the NaN count back).
TEST(RadixSortPassesTest, EveryPassWhenSkippingIsOff) {
  SKIP_WITHOUT_GPU();
  RadixSortStats stats;
  CheckSort(Random<uint32_t>(100003, 31, 8), false, 4, &stats, "u32 8-bit, no skipping", false);
  EXPECT_EQ(stats.passes_run, 4);
  CheckSort(Random<uint64_t>(100003, 32, 16), true, 0, &stats, "u64 16-bit desc, no skipping", false);
  EXPECT_EQ(stats.passes_run, 8);
  CheckSort(FloatSpecials<float>(100003, 33), false, 0, &stats, "f32 specials, no skipping", false);
  EXPECT_EQ(stats.passes_run, 4);
  EXPECT_TRUE(stats.nan_mode);
  CheckSort(Random<double>(100003, 34, 12), true, 8, &stats, "f64 12-bit, no skipping", false);
  EXPECT_EQ(stats.passes_run, 8);
}

TEST(RadixSortFloatTest, NaNsZerosInfinitiesDenormals) {
  SKIP_WITHOUT_GPU();
  for (size_t n : {size_t{1}, size_t{9}, size_t{4097}, size_t{200003}}) {
    for (bool desc : {false, true}) {
      for (int vb : {0, 4, 8}) {
        RadixSortStats stats;
        CheckSort(FloatSpecials<float>(n, n), desc, vb, &stats, "f32 specials");
        CheckSort(FloatSpecials<double>(n, n + 1), desc, vb, &stats, "f64 specials");
      }
    }
  }
  // Without NaNs the fast path runs (no NaN mode).
  RadixSortStats stats;
  std::vector<float> no_nan = {1.5f, -0.0f, 0.0f, -3.0f, std::numeric_limits<float>::infinity()};
  CheckSort(no_nan, false, 0, &stats);
  EXPECT_FALSE(stats.nan_mode);
  no_nan.push_back(std::nanf("7"));
  CheckSort(no_nan, true, 0, &stats);
  EXPECT_TRUE(stats.nan_mode);
}

TEST(RadixSortLargeTest, TwoToThe26) {
  SKIP_WITHOUT_GPU();
  CheckSort(Random<uint32_t>(size_t{1} << 26, 11), false, 4, nullptr, "u32 2^26 pairs");
  CheckSort(Random<double>(size_t{1} << 26, 12), true, 0, nullptr, "f64 2^26 desc");
}

}  // namespace
}  // namespace sortd::cuda

namespace sortd::cuda {
namespace {

// Small and quick: the case compute-sanitizer (memcheck, racecheck) runs.
TEST(RadixSortSanitizerTest, SmallMixedSizes) {
  SKIP_WITHOUT_GPU();
  for (size_t n : {size_t{1}, size_t{33}, size_t{4097}, size_t{10000}, size_t{30000}}) {
    CheckSort(Random<uint32_t>(n, n), false, 4, nullptr, "u32");
    CheckSort(Random<uint32_t>(n, n + 1), true, 0, nullptr, "u32 keys-only desc");  // unstable first pass
    CheckSort(Random<uint64_t>(n, n + 2, 40), false, 0, nullptr, "u64 keys-only");
    CheckSort(Random<int64_t>(n, n), true, 8, nullptr, "i64");
    CheckSort(FloatSpecials<float>(n, n), true, 0, nullptr, "f32 nan keys");
    CheckSort(FloatSpecials<double>(n, n), false, 4, nullptr, "f64 nan pairs");
  }
}

}  // namespace
}  // namespace sortd::cuda
