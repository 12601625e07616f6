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

#include "core/cuda/dependent_launch.cuh"
#include "core/cuda/merge_sort.cuh"
#include "core/cuda/radix_sort.cuh"
#include "core/cuda/radix_tuning.cuh"
#include "tests/gpu/radix_reference.h"

namespace sortd::cuda {
namespace {

using namespace sortd::cuda::testing;  // NOLINT: test helpers


// Sizes the temp storage, sorts and waits for the sort (the temp buffer is
// freed on return).
cudaError_t SortAndWait(const RadixSortProblem& p, RadixSortStats* stats) {
  size_t temp_bytes = 0;
  cudaError_t err = RadixSort(nullptr, temp_bytes, p, 0);
  if (err != cudaSuccess) return err;
  DeviceBuffer temp(temp_bytes);
  err = RadixSort(temp.ptr, temp_bytes, p, 0, stats);
  return err != cudaSuccess ? err : cudaDeviceSynchronize();
}

// Sorts on the GPU; values (when value_bytes > 0) are the input positions.
template <typename T>
void CheckSort(const std::vector<T>& keys, bool descending, int value_bytes,
               RadixSortStats* stats_out = nullptr, const std::string& what = "",
               bool skip_trivial_passes = true, size_t presorted_min_items = 0,
               bool concentrated_passes = true) {
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
  // Order detection at every size the tests use (the default leaves arrays
  // below 2^25 keys alone; RadixSortPresortedTest covers that too).
  p.presorted_min_items = presorted_min_items;
  p.concentrated_passes = concentrated_passes;
  RadixSortStats stats;
  ASSERT_EQ(SortAndWait(p, &stats), cudaSuccess);
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

// Sizes around the tiles of one tuning policy: k whole tiles and one key
// either side. Small tiles (where the policy has them) past the
// single-launch sizes, and their limit; each regular tile (keys-only,
// 4-byte and 8-byte values) past the small tiles' sizes.
template <typename Policy>
std::vector<size_t> TileSizes() {
  std::vector<size_t> sizes;
  auto around = [&](size_t tile, size_t above) {
    const size_t k = above / tile + 1;  // k tiles hold more than `above` keys
    for (size_t n : {k * tile - 1, k * tile, k * tile + 1}) sizes.push_back(n);
  };
  size_t regular_above = 0;
  if constexpr (!std::is_void_v<typename Policy::Small>) {
    const size_t small = size_t{Policy::Small::kBlockThreads} * Policy::Small::kItemsPerThread;
    const size_t single_launch = RadixSortProblem{}.single_launch_max_items;
    around(small, single_launch);
    sizes.push_back(2 * single_launch + small / 2 + 1);
    for (size_t n : {Policy::kSmallTilesMaxItems, Policy::kSmallTilesMaxItems + 1}) sizes.push_back(n);
    regular_above = Policy::kSmallTilesMaxItems;
  }
  for (size_t tile : {size_t{Policy::Keys::kBlockThreads} * Policy::Keys::kItemsPerThread,
                      size_t{Policy::Pairs::kBlockThreads} * Policy::Pairs::kItemsPerThread,
                      size_t{Policy::WidePairs::kBlockThreads} * Policy::WidePairs::kItemsPerThread}) {
    around(tile, regular_above);
  }
  return sizes;
}

// The kernel sets a device can run, pinned in turn: each profile with
// count-order ranks, and the matched-ranks fallback (which serves every
// GPU kind with the H200's tiles). A GPU that fails the count-order check
// runs only the fallback here (RadixRanksTest fails on it if it is sm_90).
struct PassKernels {
  RadixTuning tuning;
  RadixRanks ranks;
  std::string Name() const {
    return std::string(RadixTuningName(tuning)) + (ranks == RadixRanks::kMatched ? " matched" : "");
  }
};
const PassKernels kPassKernels[] = {{RadixTuning::kH100, RadixRanks::kCountOrder},
                                    {RadixTuning::kH200, RadixRanks::kCountOrder},
                                    {RadixTuning::kH200, RadixRanks::kMatched}};
void Pin(const PassKernels& k) {
  PinRadixTuning(k.tuning);
  PinRadixRanks(k.ranks);
}
void Unpin() {
  PinRadixTuning(RadixTuning::kAuto);
  PinRadixRanks(RadixRanks::kAuto);
}
// Whether device 0 would run count order by itself (its check, once).
bool CountOrderHere() {
  PinRadixRanks(RadixRanks::kAuto);
  return RadixRanksFor(0) == RadixRanks::kCountOrder;
}

// Every kernel set (pinned in turn, whatever this GPU would choose), sizes
// around each of its tiles.
TYPED_TEST(RadixSortTest, SizesAroundTilesBothOrdersKeysAndPairs) {
  SKIP_WITHOUT_GPU();
  using Word = std::conditional_t<sizeof(TypeParam) == 4, uint32_t, uint64_t>;
  const bool count_order = CountOrderHere();
  for (const PassKernels& kernels : kPassKernels) {
    if (kernels.ranks == RadixRanks::kCountOrder && !count_order) continue;
    Pin(kernels);
    const RadixTuning tuning = kernels.tuning;
    std::vector<size_t> sizes = tuning == RadixTuning::kH100 ? TileSizes<OneSweepTuningH100<Word>>()
                                                             : TileSizes<OneSweepTuningH200<Word>>();
    for (size_t n : {size_t{0}, size_t{1}, size_t{2}, (size_t{1} << 20) + 7}) sizes.push_back(n);
    for (size_t n : sizes) {
      const auto keys = Random<TypeParam>(n, n + 1);
      for (bool desc : {false, true}) {
        for (int vb : {0, 4, 8}) {
          CheckSort(keys, desc, vb, nullptr, kernels.Name() + " random n=" + std::to_string(n));
        }
      }
    }
  }
  Unpin();
}

// The rule that marks a pass concentrated (no GPU needed): expected
// distinct digits in a warp of 32 keys at most 20. Uniform digits (30.2)
// and one hot digit among uniform ones are not; few values and skewed bits
// are.
TEST(RadixSortPlanTest, ConcentratedPassesFromTheHistogram) {
  const size_t n = size_t{1} << 26;
  std::vector<unsigned long long> counts(256, 0);
  auto fill = [&](auto share) {
    for (int d = 0; d < 256; ++d) counts[d] = static_cast<unsigned long long>(share(d) * static_cast<double>(n));
  };
  fill([](int) { return 1.0 / 256; });
  EXPECT_FALSE(RadixPassIsConcentrated(counts.data(), n)) << "uniform";
  fill([](int d) { return d % 16 == 0 ? 1.0 / 16 : 0.0; });
  EXPECT_TRUE(RadixPassIsConcentrated(counts.data(), n)) << "16 values";
  fill([](int d) { return d < 2 ? 0.5 : 0.0; });
  EXPECT_TRUE(RadixPassIsConcentrated(counts.data(), n)) << "2 values";
  fill([](int d) { return d == 0 ? 0.1 + 0.9 / 256 : 0.9 / 256; });
  EXPECT_FALSE(RadixPassIsConcentrated(counts.data(), n)) << "a tenth of the keys on one digit, the rest uniform";
  fill([](int d) {  // each bit set with probability 1/8
    const int bits = __builtin_popcount(static_cast<unsigned>(d));
    return std::pow(1.0 / 8, bits) * std::pow(7.0 / 8, 8 - bits);
  });
  EXPECT_TRUE(RadixPassIsConcentrated(counts.data(), n)) << "skewed bits";
  fill([](int d) { return d < 40 ? 1.0 / 40 : 0.0; });
  EXPECT_FALSE(RadixPassIsConcentrated(counts.data(), n)) << "40 equal digits (about 22 in a warp)";
}

// The rule that marks a concentrated pass hot (no GPU needed): a digit
// with at least a quarter of the keys and at least 8 expected distinct
// digits in a warp. Skewed bits are hot (a third on digit 0, about 15
// distinct); 3 or 2 values are not (match.any is faster with so few);
// 16 values have no hot digit; a hot digit among uniform ones is not
// concentrated.
TEST(RadixSortPlanTest, HotPassesFromTheHistogram) {
  const size_t n = size_t{1} << 26;
  std::vector<unsigned long long> counts(256, 0);
  auto fill = [&](auto share) {
    for (int d = 0; d < 256; ++d) counts[d] = static_cast<unsigned long long>(share(d) * static_cast<double>(n));
  };
  fill([](int d) {  // each bit set with probability 1/8
    const int bits = __builtin_popcount(static_cast<unsigned>(d));
    return std::pow(1.0 / 8, bits) * std::pow(7.0 / 8, 8 - bits);
  });
  EXPECT_TRUE(RadixPassIsHot(counts.data(), n)) << "skewed bits";
  fill([](int d) { return d < 3 ? 1.0 / 3 : 0.0; });
  EXPECT_TRUE(RadixPassIsConcentrated(counts.data(), n));
  EXPECT_FALSE(RadixPassIsHot(counts.data(), n)) << "3 values";
  fill([](int d) { return d < 2 ? 0.5 : 0.0; });
  EXPECT_FALSE(RadixPassIsHot(counts.data(), n)) << "2 values";
  fill([](int d) { return d % 16 == 0 ? 1.0 / 16 : 0.0; });
  EXPECT_FALSE(RadixPassIsHot(counts.data(), n)) << "16 values";
  fill([](int d) { return d == 0 ? 0.3 + 0.7 / 256 : 0.7 / 256; });
  EXPECT_FALSE(RadixPassIsHot(counts.data(), n)) << "three tenths on one digit, the rest uniform";
  fill([](int d) { return d < 12 ? (d == 0 ? 0.34 : 0.06) : 0.0; });
  EXPECT_TRUE(RadixPassIsHot(counts.data(), n)) << "a third on one digit, the rest on 11";
  fill([](int) { return 1.0 / 256; });
  EXPECT_FALSE(RadixPassIsHot(counts.data(), n)) << "uniform";
}

// Sizing reads no device memory (no GPU needed): the size holds whatever
// the order check's minimum, since a caller may size with the default and
// sort with another (a few sorted runs are merged in the same storage).
TEST(RadixSortSizingTest, SizeHoldsForAnyOrderCheckMinimum) {
  for (size_t n : {size_t{5000}, size_t{1} << 20, (size_t{1} << 22) + 3}) {
    for (int vb : {0, 4, 8}) {
      for (RadixKeyType type : {RadixKeyType::kUint32, RadixKeyType::kFloat64}) {
        RadixSortProblem p;
        p.key_type = type;
        p.num_items = n;
        p.value_bytes = vb;
        size_t by_default = 0, looked_at = 0;
        ASSERT_EQ(RadixSort(nullptr, by_default, p, nullptr), cudaSuccess);
        p.presorted_min_items = 0;
        ASSERT_EQ(RadixSort(nullptr, looked_at, p, nullptr), cudaSuccess);
        EXPECT_EQ(by_default, looked_at) << "n " << n << " values " << vb;
        EXPECT_GE(looked_at, MergeSortedRunsTempBound(type, n, vb, kRadixMaxMergedRuns)) << "n " << n;
      }
    }
  }
}

// The size never shrinks as n grows (a caller may size once for the
// largest of its sorts): small sorts' tiles are smaller, so their status
// words must not outnumber those of larger sorts.
TEST(RadixSortSizingTest, SizeGrowsWithN) {
  for (RadixKeyType type : {RadixKeyType::kUint32, RadixKeyType::kUint64}) {
    for (int vb : {0, 4, 8}) {
      size_t previous = 0;
      for (size_t n : {size_t{4097}, size_t{65536}, kSmallTilesMaxItems - 1, kSmallTilesMaxItems,
                       kSmallTilesMaxItems + 1, kSmallTilesMaxItems + 4096, size_t{1} << 20}) {
        RadixSortProblem p;
        p.key_type = type;
        p.num_items = n;
        p.value_bytes = vb;
        size_t bytes = 0;
        ASSERT_EQ(RadixSort(nullptr, bytes, p, nullptr), cudaSuccess);
        EXPECT_GE(bytes, previous) << "n " << n << " values " << vb;
        previous = bytes;
      }
    }
  }
}

// Each device gets a profile from its L2 size, once; a pin overrides it
// for every device and kAuto gives each its own back.
TEST(RadixTuningTest, ChosenFromTheDeviceAndPinnable) {
  SKIP_WITHOUT_GPU();
  int l2 = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0), cudaSuccess);
  const RadixTuning own = l2 >= (56 << 20) ? RadixTuning::kH200 : RadixTuning::kH100;
  EXPECT_EQ(RadixTuningFor(0), own) << "L2 " << l2;
  const RadixTuning other = own == RadixTuning::kH100 ? RadixTuning::kH200 : RadixTuning::kH100;
  PinRadixTuning(other);
  EXPECT_EQ(RadixTuningFor(0), other);
  PinRadixTuning(RadixTuning::kAuto);
  EXPECT_EQ(RadixTuningFor(0), own);
  EXPECT_STREQ(RadixTuningName(RadixTuning::kH100), "h100");
  EXPECT_STREQ(RadixTuningName(RadixTuning::kH200), "h200");
}

// Count-order ranks hold on this GPU by a long run of the check (expected
// of sm_90: run on H200s so far, not yet on an H100); each device is
// checked once, answers kCountOrder where it passes, and a pin overrides
// the check.
TEST(RadixRanksTest, CountOrderHoldsOnSm90AndThePinOverridesTheCheck) {
  SKIP_WITHOUT_GPU();
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  unsigned long long checked = 0, wrong = 0;
  ASSERT_EQ(CheckCountOrderRanks(0, 1024, &checked, &wrong), cudaSuccess);
  EXPECT_GE(checked, 1024ull * 32 * 384 * prop.multiProcessorCount) << "every lane of 2 blocks an SM, some idle";
  if (prop.major == 9) EXPECT_EQ(wrong, 0u) << prop.name << ": count-order ranks would not be stable";
  // The device's own check (16 rounds, kept) agrees where the long one
  // found nothing; a device that failed the long one may have passed the
  // short one.
  const RadixRanks own = RadixRanksFor(0);
  if (wrong == 0) EXPECT_EQ(own, RadixRanks::kCountOrder);
  PinRadixRanks(RadixRanks::kMatched);
  EXPECT_EQ(RadixRanksFor(0), RadixRanks::kMatched);
  PinRadixRanks(RadixRanks::kCountOrder);
  EXPECT_EQ(RadixRanksFor(0), RadixRanks::kCountOrder);
  PinRadixRanks(RadixRanks::kAuto);
  EXPECT_EQ(RadixRanksFor(0), own);
  EXPECT_STREQ(RadixRanksName(RadixRanks::kCountOrder), "count-order");
  EXPECT_STREQ(RadixRanksName(RadixRanks::kMatched), "matched");
  EXPECT_STREQ(RadixRanksName(RadixRanks::kAuto), "auto");
}

// The check fails hardware that returns counts out of lane order (lanes
// made to add one at a time from the highest).
TEST(RadixRanksTest, TheCheckCatchesCountsOutOfLaneOrder) {
  SKIP_WITHOUT_GPU();
  unsigned long long checked = 0, wrong = 0;
  ASSERT_EQ(CheckCountOrderRanks(0, 16, &checked, &wrong, /*reverse_lanes=*/true), cudaSuccess);
  EXPECT_GT(checked, 0u);
  EXPECT_GT(wrong, checked / 4) << "most lanes share a digit with a lower lane in some round";
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

// Up to one block's tile (4096 keys) the sort is one launch: every type,
// both orders, keys and pairs, sizes around the item counts per thread and
// the warp, narrow and equal keys (passes skipped on the GPU), float
// specials, and every pass when skipping is off. Order detection is off
// here (it would take the general path).
constexpr size_t kNoOrderDetection = ~size_t{0};

TYPED_TEST(RadixSortTest, SingleLaunchUpToOneTile) {
  SKIP_WITHOUT_GPU();
  for (size_t n : {size_t{2}, size_t{3}, size_t{31}, size_t{32}, size_t{33}, size_t{255}, size_t{1023},
                   size_t{1024}, size_t{1025}, size_t{2047}, size_t{2048}, size_t{2049}, size_t{4095},
                   size_t{4096}}) {
    for (bool desc : {false, true}) {
      for (int vb : {0, 4, 8}) {
        const std::string what = "single launch n=" + std::to_string(n);
        RadixSortStats stats;
        CheckSort(Random<TypeParam>(n, n + 3), desc, vb, &stats, what + " random", true, kNoOrderDetection);
        EXPECT_TRUE(stats.single_launch) << what;
        CheckSort(Random<TypeParam>(n, n + 4, 12), desc, vb, &stats, what + " 12-bit", true, kNoOrderDetection);
        CheckSort(Random<TypeParam>(n, n + 5, 2), desc, vb, &stats, what + " 2-bit", false, kNoOrderDetection);
        CheckSort(std::vector<TypeParam>(n, static_cast<TypeParam>(3)), desc, vb, &stats, what + " equal", true,
                  kNoOrderDetection);
        if constexpr (std::is_floating_point_v<TypeParam>) {
          CheckSort(FloatSpecials<TypeParam>(n, n + 6), desc, vb, &stats, what + " specials", true,
                    kNoOrderDetection);
          EXPECT_TRUE(stats.single_launch) << what;
          EXPECT_FALSE(stats.nan_mode) << what;
        }
      }
    }
  }
  // One key past the tile: the general path.
  RadixSortStats stats;
  CheckSort(Random<TypeParam>(4097, 7), false, 4, &stats, "n=4097", true, kNoOrderDetection);
  EXPECT_FALSE(stats.single_launch);
}

// The single launch reads every input before it writes: the output may be
// the input.
TEST(RadixSortSingleLaunchTest, InPlace) {
  SKIP_WITHOUT_GPU();
  for (size_t n : {size_t{2}, size_t{1000}, size_t{4096}}) {
    auto keys = FloatSpecials<double>(n, n);
    DeviceBuffer d_keys(n * 8), d_values(n * 4);
    ASSERT_EQ(cudaMemcpy(d_keys.ptr, keys.data(), n * 8, cudaMemcpyHostToDevice), cudaSuccess);
    UploadPositionValues(d_values.ptr, n, 4);
    RadixSortProblem p;
    p.key_type = RadixKeyType::kFloat64;
    p.num_items = n;
    p.descending = true;
    p.d_keys_in = p.d_keys_out = d_keys.ptr;
    p.value_bytes = 4;
    p.d_values_in = p.d_values_out = d_values.ptr;
    RadixSortStats stats;
    ASSERT_EQ(SortAndWait(p, &stats), cudaSuccess);
    ASSERT_TRUE(stats.single_launch);
    std::vector<double> out(n);
    std::vector<uint32_t> values(n);
    ASSERT_EQ(cudaMemcpy(out.data(), d_keys.ptr, n * 8, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(values.data(), d_values.ptr, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    const std::vector<uint64_t> ref = ReferenceOrder(keys, true);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::memcmp(&out[i], &keys[ref[i]], 8), 0) << "n=" << n << " at " << i;
      ASSERT_EQ(values[i], ref[i]) << "n=" << n << " at " << i;
    }
  }
}

// single_launch_max_items = 0 keeps every size on the general path.
TEST(RadixSortSingleLaunchTest, CanBeTurnedOff) {
  SKIP_WITHOUT_GPU();
  const size_t n = 1000;
  DeviceBuffer d_in(n * 4), d_out(n * 4);
  const auto keys = Random<uint32_t>(n, 9);
  ASSERT_EQ(cudaMemcpy(d_in.ptr, keys.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  RadixSortProblem p;
  p.num_items = n;
  p.d_keys_in = d_in.ptr;
  p.d_keys_out = d_out.ptr;
  p.single_launch_max_items = 0;
  RadixSortStats stats;
  ASSERT_EQ(SortAndWait(p, &stats), cudaSuccess);
  EXPECT_FALSE(stats.single_launch);
  std::vector<uint32_t> out(n);
  ASSERT_EQ(cudaMemcpy(out.data(), d_out.ptr, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  auto expect = keys;
  std::sort(expect.begin(), expect.end());
  EXPECT_EQ(out, expect);
}

// Input already in the requested order is copied (0 passes), input in
// reverse order reversed, in the histogram's read: every key type, keys and
// pairs. Ties stop the reversal where it would not be stable (pairs, NaNs),
// and a single key out of place anywhere (a lane, warp or load boundary of
// the histogram, the last key) means a full sort.
TYPED_TEST(RadixSortTest, PresortedInputIsCopiedOrReversed) {
  SKIP_WITHOUT_GPU();
  using Presorted = RadixSortStats::Presorted;
  for (size_t n : {size_t{1}, size_t{2}, size_t{33}, size_t{4097}, (size_t{1} << 20) + 7}) {
    const std::string at = " n=" + std::to_string(n);
    auto sorted = Random<TypeParam>(n, n + 3);
    std::sort(sorted.begin(), sorted.end(), Less<TypeParam>);
    sorted.erase(std::unique(sorted.begin(), sorted.end(),
                             [](TypeParam a, TypeParam b) { return !Less(a, b) && !Less(b, a); }),
                 sorted.end());
    for (int vb : {0, 4, 8}) {
      RadixSortStats stats;
      CheckSort(sorted, false, vb, &stats, "sorted" + at);
      EXPECT_EQ(stats.presorted, Presorted::kSorted) << at << " vb=" << vb;
      EXPECT_EQ(stats.passes_run, 0);
      // Distinct keys in order: copied by the order check as it read them.
      if (sorted.size() > 1) EXPECT_TRUE(stats.written_while_reading) << at << " vb=" << vb;
      // Distinct keys asked for in the other order: a stable reversal,
      // written reversed as they were read.
      CheckSort(sorted, true, vb, &stats, "reversed" + at);
      if (sorted.size() > 1) EXPECT_EQ(stats.presorted, Presorted::kReversed) << at << " vb=" << vb;
      if (sorted.size() > 1) EXPECT_TRUE(stats.written_while_reading) << at << " vb=" << vb;
    }
    if (n < 64) continue;
    // Ties in reverse order: keys only (integers: equal keys are equal bits)
    // reverse; pairs must keep equal keys' input order, so they sort.
    auto ties = Random<TypeParam>(n, n + 4, 6);
    std::sort(ties.begin(), ties.end(), Less<TypeParam>);
    RadixSortStats stats;
    CheckSort(ties, true, 4, &stats, "ties reversed, pairs" + at);
    EXPECT_EQ(stats.presorted, Presorted::kNo) << at;
    EXPECT_FALSE(stats.written_while_reading) << at;
    CheckSort(ties, true, 0, &stats, "ties reversed, keys" + at);
    EXPECT_EQ(stats.presorted, Presorted::kReversed) << at;
    CheckSort(ties, false, 8, &stats, "ties in order, pairs" + at);
    EXPECT_EQ(stats.presorted, Presorted::kSorted) << at;
    // One pair of neighbours out of order: in a probe, across lanes, across
    // a warp's rows of vectors (the 32nd vector's last key), across a
    // warp's chunks of 8 rows (its successor loaded, not shuffled). Sorted
    // input with one swap is two sorted runs: merged.
    constexpr size_t kPerVector = 16 / sizeof(TypeParam);
    for (size_t swap : {size_t{0}, size_t{30}, size_t{31}, size_t{32}, 32 * kPerVector - 1, 256 * kPerVector - 1,
                        512 * kPerVector - 1, n / 2, n - 2}) {
      if (swap + 1 >= sorted.size()) continue;
      auto almost = sorted;
      std::swap(almost[swap], almost[swap + 1]);
      // Stretches before the swap may have been copied already: the sort
      // overwrites them.
      CheckSort(almost, false, 4, &stats, "swapped at " + std::to_string(swap) + at);
      EXPECT_EQ(stats.presorted, Presorted::kRuns) << "swapped at " << swap << at;
      EXPECT_EQ(stats.runs, 2) << "swapped at " << swap << at;
      EXPECT_FALSE(stats.written_while_reading);
      auto almost_reversed = sorted;
      std::reverse(almost_reversed.begin(), almost_reversed.end());
      std::swap(almost_reversed[swap], almost_reversed[swap + 1]);
      CheckSort(almost_reversed, false, 0, &stats, "reversed, swapped at " + std::to_string(swap) + at);
      EXPECT_EQ(stats.presorted, Presorted::kNo) << "reversed, swapped at " << swap << at;
    }
  }
  if constexpr (std::is_floating_point_v<TypeParam>) {
    // NaNs (all sort as one key, payloads in input order): in order is
    // copied; the other order is not a stable reversal, so it sorts.
    auto specials = FloatSpecials<TypeParam>(100003, 9);
    std::stable_sort(specials.begin(), specials.end(), Less<TypeParam>);
    RadixSortStats stats;
    CheckSort(specials, false, 0, &stats, "specials in order");
    EXPECT_EQ(stats.presorted, Presorted::kSorted);
    CheckSort(specials, true, 0, &stats, "specials, other order");
    EXPECT_EQ(stats.presorted, Presorted::kNo);
  }
}

// Runs in the requested order back to back, of the given lengths; keys of
// `bits` random bits (few bits: equal keys across runs).
template <typename T>
std::vector<T> SortedRuns(const std::vector<size_t>& lengths, bool descending, uint64_t bits, uint64_t seed) {
  std::vector<T> keys;
  for (size_t r = 0; r < lengths.size(); ++r) {
    auto run = Random<T>(lengths[r], seed + r, bits);
    std::sort(run.begin(), run.end(), [&](T a, T b) { return descending ? Less(b, a) : Less(a, b); });
    keys.insert(keys.end(), run.begin(), run.end());
  }
  return keys;
}

// Descents in the requested order: the runs the order check finds are one
// more.
template <typename T>
size_t Descents(const std::vector<T>& keys, bool descending) {
  size_t count = 0;
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    count += descending ? Less(keys[i], keys[i + 1]) : Less(keys[i + 1], keys[i]);
  }
  return count;
}

// A few sorted runs are merged instead of sorted, up to kRadixMaxMergedRuns
// runs of any lengths (one key; around the order check's 1024-key chunks),
// equal keys across runs keeping run order (values are positions); one run
// more is sorted in full.
TYPED_TEST(RadixSortTest, FewSortedRunsAreMerged) {
  SKIP_WITHOUT_GPU();
  using Presorted = RadixSortStats::Presorted;
  std::vector<size_t> eight;
  for (size_t r = 0; r < 8; ++r) eight.push_back((size_t{1} << 17) + 1023 * r + (r % 3));
  std::vector<size_t> many = {1, 1023, 1024, 1025, 2048, 1, 7};
  while (many.size() < static_cast<size_t>(kRadixMaxMergedRuns)) many.push_back(4096 + 31 * many.size());
  std::vector<size_t> too_many = many;
  too_many.push_back(5000);
  const std::vector<std::vector<size_t>> shapes = {{(size_t{1} << 19) + 3, (size_t{1} << 19) - 3}, eight, many,
                                                   too_many};
  for (bool descending : {false, true}) {
    for (uint64_t bits : {uint64_t{64}, uint64_t{5}}) {
      for (size_t s = 0; s < shapes.size(); ++s) {
        const auto keys = SortedRuns<TypeParam>(shapes[s], descending, bits, 100 + s);
        const size_t runs = Descents(keys, descending) + 1;
        for (int vb : {0, 4, 8}) {
          const std::string what = "shape " + std::to_string(s) + " runs " + std::to_string(runs) + " bits " +
                                   std::to_string(bits) + (descending ? " desc" : " asc");
          RadixSortStats stats;
          CheckSort(keys, descending, vb, &stats, what);
          if (runs <= static_cast<size_t>(kRadixMaxMergedRuns)) {
            EXPECT_EQ(stats.presorted, Presorted::kRuns) << what;
            EXPECT_EQ(stats.runs, static_cast<int>(runs)) << what;
          } else {
            EXPECT_EQ(stats.presorted, Presorted::kNo) << what;
          }
        }
      }
    }
  }
}

// With allow_result_in_input, sorted input is neither sorted nor copied:
// the output buffer is never written and the stats point at the input.
TEST(RadixSortPresortedTest, SortedInputMayStayInTheInput) {
  SKIP_WITHOUT_GPU();
  const size_t n = (size_t{1} << 20) + 5;
  auto keys = Random<uint64_t>(n, 77);
  std::sort(keys.begin(), keys.end());
  DeviceBuffer d_in(n * 8), d_out(n * 8), d_vin(n * 4), d_vout(n * 4);
  ASSERT_EQ(cudaMemcpy(d_in.ptr, keys.data(), n * 8, cudaMemcpyHostToDevice), cudaSuccess);
  UploadPositionValues(d_vin.ptr, n, 4);
  ASSERT_EQ(cudaMemset(d_out.ptr, 0xab, n * 8), cudaSuccess);
  RadixSortProblem p;
  p.key_type = RadixKeyType::kUint64;
  p.num_items = n;
  p.d_keys_in = d_in.ptr;
  p.d_keys_out = d_out.ptr;
  p.value_bytes = 4;
  p.d_values_in = d_vin.ptr;
  p.d_values_out = d_vout.ptr;
  p.allow_result_in_input = true;
  p.presorted_min_items = 0;
  RadixSortStats stats;
  ASSERT_EQ(SortAndWait(p, &stats), cudaSuccess);
  EXPECT_TRUE(stats.result_in_input);
  EXPECT_EQ(stats.presorted, RadixSortStats::Presorted::kSorted);
  std::vector<uint64_t> in(n), out(n);
  cudaMemcpy(in.data(), d_in.ptr, n * 8, cudaMemcpyDeviceToHost);
  cudaMemcpy(out.data(), d_out.ptr, n * 8, cudaMemcpyDeviceToHost);
  EXPECT_EQ(in, keys);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], 0xababababababababull) << "output written at " << i;
  // Random input ignores the option: sorted into the output as always.
  std::shuffle(keys.begin(), keys.end(), std::mt19937_64(5));
  ASSERT_EQ(cudaMemcpy(d_in.ptr, keys.data(), n * 8, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(SortAndWait(p, &stats), cudaSuccess);
  EXPECT_FALSE(stats.result_in_input);
  EXPECT_EQ(stats.presorted, RadixSortStats::Presorted::kNo);
  cudaMemcpy(out.data(), d_out.ptr, n * 8, cudaMemcpyDeviceToHost);
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(out, keys);
}

// The order check writes presorted input to the output as it reads it in
// 16-byte vectors: copies only where input and output share their
// alignment, reversals at any (vector stores where the reversed positions
// are aligned, else scalar); keys before and after the vectors are written
// one by one. Every combination of misalignment, both directions, keys and
// pairs, against the reference and with the path checked.
template <typename T>
void CheckWrittenWhileReading(size_t in_shift, size_t out_shift, size_t n, bool descending, int value_bytes) {
  const std::string at = "in+" + std::to_string(in_shift) + " out+" + std::to_string(out_shift) + " n=" +
                         std::to_string(n) + (descending ? " reversed" : " sorted") + " vb=" +
                         std::to_string(value_bytes) + " key bytes " + std::to_string(sizeof(T));
  std::vector<T> keys(n);
  std::mt19937_64 rng(n + in_shift);
  T next = 1;
  for (T& k : keys) k = next += 1 + rng() % 5;  // distinct, ascending
  DeviceBuffer d_in((n + in_shift) * sizeof(T)), d_out((n + out_shift) * sizeof(T));
  DeviceBuffer d_vin((n + in_shift) * 8), d_vout((n + out_shift) * 8);
  T* in = static_cast<T*>(d_in.ptr) + in_shift;
  T* out = static_cast<T*>(d_out.ptr) + out_shift;
  ASSERT_EQ(cudaMemcpy(in, keys.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  char* vin = static_cast<char*>(d_vin.ptr) + in_shift * value_bytes;
  char* vout = static_cast<char*>(d_vout.ptr) + out_shift * value_bytes;
  UploadPositionValues(vin, n, value_bytes);
  RadixSortProblem p;
  p.key_type = TypeOf<T>();
  p.num_items = n;
  p.descending = descending;
  p.d_keys_in = in;
  p.d_keys_out = out;
  p.value_bytes = value_bytes;
  p.d_values_in = value_bytes ? vin : nullptr;
  p.d_values_out = value_bytes ? vout : nullptr;
  p.presorted_min_items = 0;
  RadixSortStats stats;
  ASSERT_EQ(SortAndWait(p, &stats), cudaSuccess);
  EXPECT_EQ(stats.presorted, descending ? RadixSortStats::Presorted::kReversed : RadixSortStats::Presorted::kSorted)
      << at;
  const bool same_alignment = (in_shift - out_shift) * sizeof(T) % 16 == 0;
  EXPECT_EQ(stats.written_while_reading, descending || same_alignment) << at;
  std::vector<T> got(n);
  ASSERT_EQ(cudaMemcpy(got.data(), out, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < n; ++i) {
    const size_t from = descending ? n - 1 - i : i;
    ASSERT_EQ(got[i], keys[from]) << at << " key at " << i;
  }
  if (value_bytes == 4) {
    std::vector<uint32_t> v(n);
    ASSERT_EQ(cudaMemcpy(v.data(), vout, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(v[i], descending ? n - 1 - i : i) << at << " value at " << i;
  }
}

TEST(RadixSortPresortedTest, WrittenWhileReadingAtAnyAlignment) {
  SKIP_WITHOUT_GPU();
  // 2^20 + 7: the last warp's probe runs past the vectors into the keys after.
  for (size_t n : {size_t{4099}, (size_t{1} << 20) + 7}) {
    for (size_t in_shift : {size_t{0}, size_t{1}, size_t{3}}) {
      for (size_t out_shift : {size_t{0}, size_t{1}, size_t{2}}) {
        for (bool descending : {false, true}) {
          for (int vb : {0, 4}) {
            CheckWrittenWhileReading<uint32_t>(in_shift, out_shift, n, descending, vb);
            CheckWrittenWhileReading<uint64_t>(in_shift, out_shift, n, descending, vb);
          }
        }
      }
    }
  }
}

// Below presorted_min_items the order is not looked at: sorted input takes
// the ordinary passes (and the speculative first pass still runs).
TEST(RadixSortPresortedTest, SmallArraysAreNotCheckedForOrder) {
  SKIP_WITHOUT_GPU();
  std::vector<uint32_t> sorted(100003);
  std::iota(sorted.begin(), sorted.end(), 7u);
  RadixSortStats stats;
  CheckSort(sorted, false, 4, &stats, "sorted, below the minimum", true, size_t{1} << 20);
  EXPECT_EQ(stats.presorted, RadixSortStats::Presorted::kNo);
  EXPECT_EQ(stats.passes_run, 3);  // the top digit is constant below 2^24
  CheckSort(sorted, true, 0, &stats, "reversed, below the minimum", true, size_t{1} << 20);
  EXPECT_EQ(stats.presorted, RadixSortStats::Presorted::kNo);
  // Every digit trivial (one key, equal keys): the input is the answer.
  for (size_t n : {size_t{1}, size_t{5000}}) {
    for (int vb : {0, 4, 8}) {
      CheckSort(std::vector<uint32_t>(n, 42), false, vb, &stats, "equal keys", true, size_t{1} << 20);
      EXPECT_EQ(stats.passes_run, 0);
      CheckSort(std::vector<double>(n, -1.5), true, vb, &stats, "equal keys", true, size_t{1} << 20);
      EXPECT_EQ(stats.passes_run, 0);
    }
  }
}

// n keys drawn from `distinct` random keys.
template <typename T>
std::vector<T> FewDistinct(size_t n, size_t distinct, uint64_t seed) {
  const std::vector<T> pool = Random<T>(distinct, seed);
  std::mt19937_64 rng(seed + 1);
  std::vector<T> keys(n);
  for (T& k : keys) k = pool[rng() % distinct];
  return keys;
}

// Keys whose bits are each set with probability 1/8 (one digit value holds
// about a third of the keys in every pass). Floats keep their exponent's
// top bit clear: no NaN (a NaN takes the NaN mode, which is never
// concentrated).
template <typename T>
std::vector<T> SkewedBits(size_t n, uint64_t seed) {
  using Word = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  constexpr Word kNoNan = std::is_floating_point_v<T> ? ~(Word{1} << (sizeof(T) * 8 - 2)) : ~Word{0};
  std::mt19937_64 rng(seed);
  std::vector<T> keys(n);
  for (T& k : keys) {
    const Word w = static_cast<Word>(rng() & rng() & rng()) & kNoNan;
    std::memcpy(&k, &w, sizeof(T));
  }
  return keys;
}

// Few distinct keys and skewed bits make concentrated passes (one digit
// holds many keys), which find digit groups with match.any: after
// the first pass over few distinct keys whole warps share a digit. Skewed
// bits make hot passes (a digit with a third of the keys, about 15
// distinct digits a warp), which run the hot-digit kernel. Sizes
// with a partial last tile (padding lanes); both orders, keys and pairs
// (stability: values are positions), every profile; and the same sorts
// with the plain kernel only.
TYPED_TEST(RadixSortTest, FewDistinctAndSkewedKeysRunConcentratedPasses) {
  SKIP_WITHOUT_GPU();
  using Word = std::conditional_t<sizeof(TypeParam) == 4, uint32_t, uint64_t>;
  const bool count_order = CountOrderHere();
  for (const PassKernels& kernels : kPassKernels) {
    if (kernels.ranks == RadixRanks::kCountOrder && !count_order) continue;
    Pin(kernels);
    const RadixTuning tuning = kernels.tuning;
    // Small tiles (a partial last one), and the pairs config's past them.
    const size_t pairs_tile = tuning == RadixTuning::kH100
                                  ? size_t{OneSweepTuningH100<Word>::Pairs::kBlockThreads} *
                                        OneSweepTuningH100<Word>::Pairs::kItemsPerThread
                                  : size_t{OneSweepTuningH200<Word>::Pairs::kBlockThreads} *
                                        OneSweepTuningH200<Word>::Pairs::kItemsPerThread;
    for (size_t n : {size_t{20077}, size_t{200003}, kSmallTilesMaxItems + 3 * pairs_tile + 77}) {
      const std::vector<std::pair<std::string, std::vector<TypeParam>>> inputs = {
          {"16 distinct", FewDistinct<TypeParam>(n, 16, n)},
          {"3 distinct", FewDistinct<TypeParam>(n, 3, n + 1)},
          {"skewed bits", SkewedBits<TypeParam>(n, n + 2)},
      };
      for (const auto& [name, keys] : inputs) {
        for (bool desc : {false, true}) {
          for (int vb : {0, 4, 8}) {
            const std::string what = kernels.Name() + " " + name + " n=" + std::to_string(n);
            RadixSortStats stats;
            CheckSort(keys, desc, vb, &stats, what);
            const int special = stats.passes_concentrated + stats.passes_hot;
            EXPECT_GE(special, 1) << what;
            if (name == "3 distinct" && vb == 0) {
              // Few distinct digits a warp (kFewShift): the speculative first
              // pass stands down and the host runs the concentrated kernel.
              EXPECT_EQ(stats.passes_concentrated, stats.passes_run) << what << " (the first pass too)";
            } else {
              EXPECT_LT(special, stats.passes_run) << what << " (the first pass is plain)";
            }
            if (name == "skewed bits") {
              EXPECT_GE(stats.passes_hot, 1) << what;
            } else {
              EXPECT_EQ(stats.passes_hot, 0) << what << " (no hot digit, or too few distinct digits)";
            }
            CheckSort(keys, desc, vb, &stats, what + " plain", true, 0, /*concentrated_passes=*/false);
            EXPECT_EQ(stats.passes_concentrated, 0) << what;
            EXPECT_EQ(stats.passes_hot, 0) << what;
          }
        }
      }
    }
    // Uniform random integers: no concentrated pass. (Random floats are
    // not uniform in their exponent bits: their top passes may be.)
    if constexpr (std::is_integral_v<TypeParam>) {
      RadixSortStats stats;
      CheckSort(Random<TypeParam>(200003, 5), false, 4, &stats, "uniform");
      EXPECT_EQ(stats.passes_concentrated, 0);
      EXPECT_EQ(stats.passes_hot, 0);
    }
  }
  Unpin();
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
  // Past the small tiles' sizes, and on them.
  for (size_t n : {kSmallTilesMaxItems + 3, size_t{100003}}) {
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
}

// Without pass skipping every pass runs (no read-back for integer keys;
// floats still read the NaN count back).
TEST(RadixSortPassesTest, EveryPassWhenSkippingIsOff) {
  SKIP_WITHOUT_GPU();
  RadixSortStats stats;
  for (size_t n : {size_t{100003}, kSmallTilesMaxItems + 5}) {  // small tiles, then regular ones
    CheckSort(Random<uint32_t>(n, 31, 8), false, 4, &stats, "u32 8-bit, no skipping", false);
    EXPECT_EQ(stats.passes_run, 4);
    CheckSort(Random<uint64_t>(n, 32, 16), true, 0, &stats, "u64 16-bit desc, no skipping", false);
    EXPECT_EQ(stats.passes_run, 8);
    CheckSort(FloatSpecials<float>(n, 33), false, 0, &stats, "f32 specials, no skipping", false);
    EXPECT_EQ(stats.passes_run, 4);
    EXPECT_TRUE(stats.nan_mode);
    CheckSort(Random<double>(n, 34, 12), true, 8, &stats, "f64 12-bit, no skipping", false);
    EXPECT_EQ(stats.passes_run, 8);
  }
}

TEST(RadixSortFloatTest, NaNsZerosInfinitiesDenormals) {
  SKIP_WITHOUT_GPU();
  // Up to 4096 keys one launch, then small tiles, then regular ones (NaN
  // modes: keys-only with the originals as values, pairs by index).
  for (size_t n : {size_t{1}, size_t{9}, size_t{4097}, size_t{200003}, kSmallTilesMaxItems + 7}) {
    for (bool desc : {false, true}) {
      for (int vb : {0, 4, 8}) {
        RadixSortStats stats;
        CheckSort(FloatSpecials<float>(n, n), desc, vb, &stats, "f32 specials");
        CheckSort(FloatSpecials<double>(n, n + 1), desc, vb, &stats, "f64 specials");
      }
    }
  }
  // Without NaNs the fast path runs (no NaN mode). Random keys around the
  // specials: a handful of keys would be a few sorted runs, merged.
  RadixSortStats stats;
  std::vector<float> no_nan = Random<float>(5000, 41);
  for (float x : {1.5f, -0.0f, 0.0f, -3.0f, std::numeric_limits<float>::infinity()}) no_nan.push_back(x);
  CheckSort(no_nan, false, 0, &stats, "no NaN");
  EXPECT_FALSE(stats.nan_mode);
  EXPECT_EQ(stats.presorted, RadixSortStats::Presorted::kNo);
  no_nan.push_back(std::nanf("7"));
  CheckSort(no_nan, true, 0, &stats, "a NaN");
  EXPECT_TRUE(stats.nan_mode);
  // Few keys are a few runs: merged, the NaN first when descending.
  const std::vector<float> few = {1.5f, -0.0f, 0.0f, -3.0f, std::numeric_limits<float>::infinity(), std::nanf("7")};
  CheckSort(few, true, 4, &stats, "a NaN, runs");
  EXPECT_EQ(stats.presorted, RadixSortStats::Presorted::kRuns);
}

// The histogram maps a warp's float keys without the NaN select when none
// of its loads is a NaN. A few NaNs among many keys of 3 values (one in
// the first loads, one in the middle, one in the last, partial stride;
// 2^22 keys so that every thread's loop runs) still make the NaN mode,
// with every NaN counted where it sorts: a NaN counted at its own bits
// would shift the digit offsets and the output.
template <typename T>
void CheckScatteredNaNs(bool descending, int value_bytes, uint64_t seed) {
  const size_t n = (size_t{1} << 22) + 5;
  std::vector<T> keys = FewDistinct<T>(n, 3, seed);
  RadixSortStats stats;
  CheckSort(keys, descending, value_bytes, &stats, "3 values");
  EXPECT_FALSE(stats.nan_mode);
  keys[5] = std::numeric_limits<T>::quiet_NaN();
  keys[n / 3] = -std::numeric_limits<T>::quiet_NaN();
  keys[n - 1] = std::numeric_limits<T>::signaling_NaN();
  CheckSort(keys, descending, value_bytes, &stats, "3 values, 3 NaNs");
  EXPECT_TRUE(stats.nan_mode);
}

TEST(RadixSortFloatTest, ScatteredNaNsAmongFewDistinctKeys) {
  SKIP_WITHOUT_GPU();
  for (bool desc : {false, true}) {
    for (int vb : {0, 4}) CheckScatteredNaNs<float>(desc, vb, 50 + vb + desc);
  }
  CheckScatteredNaNs<double>(true, 0, 60);
}

// Large sorts launch their digit passes as dependents of the kernel before
// (kDependentPassMinItems) and take the tuning's large-tile configs
// (kLargeTilesMinItems), pinned to the h100 profile (the h200 profile is
// the same today), whose large tiles differ from its others for 32-bit
// keys with 4-byte values and for 64-bit keys-only: u32/u32 pairs, 64-bit keys, and
// from the smallest such size keys only (the first pass ranks without
// matching peers), f32 keys descending with NaNs (their originals carried
// as values), u32/u64 pairs, and concentrated passes (skewed keys, and
// pairs of 16 distinct keys).
TEST(RadixSortLargeTest, TwoToThe26) {
  SKIP_WITHOUT_GPU();
  constexpr size_t kLarge = std::max(kDependentPassMinItems, kLargeTilesMinItems);
  PinRadixTuning(RadixTuning::kH100);
  CheckSort(Random<uint32_t>(size_t{1} << 26, 11), false, 4, nullptr, "u32 2^26 pairs");
  CheckSort(Random<double>(size_t{1} << 26, 12), true, 0, nullptr, "f64 2^26 desc");
  CheckSort(Random<uint32_t>(kLarge + 3, 13), false, 0, nullptr, "u32 keys, large paths");
  CheckSort(Random<float>(kLarge + 1000, 14), true, 0, nullptr, "f32 keys desc, large paths");
  RadixSortStats stats;
  CheckSort(FloatSpecials<float>(kLarge + 7, 15), true, 0, &stats, "f32 keys desc with NaNs, large paths");
  EXPECT_TRUE(stats.nan_mode);
  CheckSort(Random<uint32_t>(kLarge + 5, 16), false, 8, nullptr, "u32/u64 pairs, large paths");
  CheckSort(SkewedBits<uint32_t>(kLarge + 9, 17), false, 0, &stats, "u32 skewed keys, large paths");
  EXPECT_GE(stats.passes_hot, 1) << "skewed digits: hot passes after the first";
  CheckSort(FewDistinct<uint32_t>(kLarge + 11, 16, 18), true, 4, &stats, "u32/u32 pairs, 16 values, large paths");
  EXPECT_GE(stats.passes_concentrated, 1) << "16 values: concentrated passes after the first";
  // The matched-ranks fallback's large tiles (the rows above ran the
  // device's own ranks: count order on sm_90).
  PinRadixRanks(RadixRanks::kMatched);
  CheckSort(Random<uint32_t>(kLarge + 19, 19), true, 4, nullptr, "u32/u32 pairs desc, large paths, matched ranks");
  PinRadixRanks(RadixRanks::kAuto);
  PinRadixTuning(RadixTuning::kAuto);
}

}  // namespace
}  // namespace sortd::cuda

namespace sortd::cuda {
namespace {

// Small and quick: the case compute-sanitizer (memcheck, racecheck) runs.
TEST(RadixSortSanitizerTest, SmallMixedSizes) {
  SKIP_WITHOUT_GPU();
  RadixSortStats stats;
  // The single launch (order detection off), then the general path.
  for (size_t n : {size_t{2}, size_t{1000}, size_t{2000}, size_t{4096}}) {
    const size_t off = ~size_t{0};
    CheckSort(Random<uint32_t>(n, n), false, 4, nullptr, "u32 single launch", true, off);
    CheckSort(Random<uint64_t>(n, n + 2, 40), true, 8, nullptr, "u64 single launch", true, off);
    CheckSort(FloatSpecials<float>(n, n), true, 0, nullptr, "f32 single launch", true, off);
  }
  for (size_t n : {size_t{1}, size_t{33}, size_t{4097}, size_t{10000}, size_t{30000}}) {
    CheckSort(Random<uint32_t>(n, n), false, 4, nullptr, "u32");
    CheckSort(Random<uint32_t>(n, n + 1), true, 0, nullptr, "u32 keys-only desc");  // unstable first pass
    CheckSort(Random<uint64_t>(n, n + 2, 40), false, 0, nullptr, "u64 keys-only");
    CheckSort(Random<int64_t>(n, n), true, 8, nullptr, "i64");
    CheckSort(FloatSpecials<float>(n, n), true, 0, nullptr, "f32 nan keys");
    CheckSort(FloatSpecials<double>(n, n), false, 4, nullptr, "f64 nan pairs");
    CheckSort(Random<uint32_t>(n, n + 3), true, 8, nullptr, "u32/u64 pairs desc");
  }
  // Presorted input written while read: vector and scalar stores, both ways.
  for (bool descending : {false, true}) {
    CheckWrittenWhileReading<uint32_t>(0, 0, 4099, descending, 4);
    CheckWrittenWhileReading<uint32_t>(1, 2, 4099, descending, 0);
    CheckWrittenWhileReading<uint64_t>(1, 0, 4099, descending, 4);
  }
  // Concentrated passes (few distinct keys), a partial last tile.
  CheckSort(FewDistinct<uint32_t>(30011, 16, 7), false, 4, nullptr, "u32 16 distinct");
  CheckSort(FewDistinct<uint64_t>(30011, 5, 8), true, 0, nullptr, "u64 5 distinct desc");
  // Hot passes (the hot-digit kernel), a partial last tile: unstable and
  // stable ranks.
  CheckSort(SkewedBits<uint32_t>(30011, 10), false, 0, &stats, "u32 skewed keys");
  EXPECT_GE(stats.passes_hot, 1);
  CheckSort(SkewedBits<uint64_t>(30011, 11), true, 4, &stats, "u64/u32 skewed pairs desc");
  EXPECT_GE(stats.passes_hot, 1);
  CheckSort(FewDistinct<uint32_t>(30011, 16, 9), false, 8, nullptr, "u32/u64 16 distinct");
  // A few sorted runs, merged: descents counted and noted by the order check.
  CheckSort(SortedRuns<uint32_t>({3000, 1, 5000, 2047}, false, 64, 5), false, 4, &stats, "u32 runs");
  EXPECT_EQ(stats.presorted, RadixSortStats::Presorted::kRuns);
  CheckSort(SortedRuns<uint64_t>({4099, 513, 6000}, true, 8, 6), true, 0, &stats, "u64 runs desc");
  EXPECT_EQ(stats.presorted, RadixSortStats::Presorted::kRuns);
}

// Past the small tiles: the profiles' count-order kernels, whose tile lies
// apart from the counters (OneSweepTileOffset), keys-only (the unstable
// first pass, then stable ones) and with 4- and 8-byte values, a partial
// last tile, and hot passes (skewed keys); and the matched-ranks
// fallback's tiles of the same sizes.
TEST(RadixSortSanitizerTest, CountOrderTiles) {
  SKIP_WITHOUT_GPU();
  const size_t n = kSmallTilesMaxItems + 4099;
  for (RadixRanks ranks : {RadixRanks::kAuto, RadixRanks::kMatched}) {
    PinRadixRanks(ranks);
    CheckSort(Random<uint32_t>(n, 21), false, 0, nullptr, "u32 keys");
    CheckSort(Random<uint32_t>(n, 22), true, 4, nullptr, "u32/u32 pairs desc");
    CheckSort(Random<uint32_t>(n, 23), false, 8, nullptr, "u32/u64 pairs");
    CheckSort(Random<uint64_t>(n, 24), true, 4, nullptr, "u64/u32 pairs desc");
    // Hot passes past the small tiles: the profiles' hot-digit kernel
    // (count order's tiles, the hot digit's lanes grouped by a ballot), and
    // the matched fallback's.
    RadixSortStats stats;
    CheckSort(SkewedBits<uint32_t>(n, 25), false, 0, &stats, "u32 skewed keys");
    EXPECT_GE(stats.passes_hot, 1);
    CheckSort(SkewedBits<uint32_t>(n, 26), true, 4, &stats, "u32/u32 skewed pairs desc");
    EXPECT_GE(stats.passes_hot, 1);
  }
  PinRadixRanks(RadixRanks::kAuto);
}

}  // namespace
}  // namespace sortd::cuda
