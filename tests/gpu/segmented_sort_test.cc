// GPU segmented sort against the host reference, segment by segment: every
// key type and order, keys with positions and with 4-/8-byte values, segment
// counts 1..100k, lengths 0..64k (every bin, its edges, and the merge-sort
// path for segments past the largest bin), mixes, float specials, narrow
// ranges (stability: values and positions are input positions). Skips
// without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/cuda/segmented_sort.cuh"
#include "tests/gpu/radix_reference.h"

namespace sortd::cuda {
namespace {

using namespace sortd::cuda::testing;  // NOLINT: test helpers

std::vector<uint32_t> OffsetsOf(const std::vector<uint32_t>& lengths, uint32_t first = 0) {
  std::vector<uint32_t> offsets(lengths.size() + 1, first);
  for (size_t s = 0; s < lengths.size(); ++s) offsets[s + 1] = offsets[s] + lengths[s];
  return offsets;
}

// Sorts `keys` split by `offsets` on the GPU and compares each segment
// with the stable host reference: keys bit for bit, positions, and values
// (value_bytes 4 or 8: input positions tagged in the high bits).
template <typename T>
void CheckSegmented(const std::vector<T>& keys, const std::vector<uint32_t>& offsets,
                    bool descending, int value_bytes, bool with_positions,
                    SegmentedSortStats* stats_out = nullptr) {
  const size_t n = keys.size();
  const int segments = static_cast<int>(offsets.size()) - 1;
  DeviceBuffer d_in(n * sizeof(T)), d_out(n * sizeof(T)), d_off(offsets.size() * 4);
  DeviceBuffer d_vin(n * 8), d_vout(n * 8), d_pos(n * 4);
  ASSERT_EQ(cudaMemcpy(d_in.ptr, keys.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_off.ptr, offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice),
            cudaSuccess);
  UploadPositionValues(d_vin.ptr, n, value_bytes);

  SegmentedSortProblem p;
  p.key_type = TypeOf<T>();
  p.descending = descending;
  p.num_segments = segments;
  p.h_offsets = offsets.data();
  p.d_offsets = static_cast<const uint32_t*>(d_off.ptr);
  p.d_keys_in = d_in.ptr;
  p.d_keys_out = d_out.ptr;
  p.value_bytes = value_bytes;
  p.d_values_in = value_bytes ? d_vin.ptr : nullptr;
  p.d_values_out = value_bytes ? d_vout.ptr : nullptr;
  p.d_indices_out = with_positions ? static_cast<uint32_t*>(d_pos.ptr) : nullptr;
  size_t temp_bytes = 0;
  ASSERT_EQ(SegmentedSort(nullptr, temp_bytes, p, nullptr), cudaSuccess);
  DeviceBuffer temp(temp_bytes);
  SegmentedSortStats stats;
  ASSERT_EQ(SegmentedSort(temp.ptr, temp_bytes, p, nullptr, &stats), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  if (stats_out != nullptr) *stats_out = stats;

  std::vector<T> out(n);
  std::vector<uint32_t> pos(n), vout32(n);
  std::vector<uint64_t> vout64(n);
  ASSERT_EQ(cudaMemcpy(out.data(), d_out.ptr, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  if (with_positions) cudaMemcpy(pos.data(), d_pos.ptr, n * 4, cudaMemcpyDeviceToHost);
  if (value_bytes == 4) cudaMemcpy(vout32.data(), d_vout.ptr, n * 4, cudaMemcpyDeviceToHost);
  if (value_bytes == 8) cudaMemcpy(vout64.data(), d_vout.ptr, n * 8, cudaMemcpyDeviceToHost);

  int bad_segments = 0;
  for (int s = 0; s < segments; ++s) {
    const uint32_t begin = offsets[s], end = offsets[s + 1];
    const std::vector<T> segment(keys.begin() + begin, keys.begin() + end);
    const std::vector<uint64_t> order = ReferenceOrder(segment, descending);
    bool ok = true;
    for (size_t i = 0; i < order.size() && ok; ++i) {
      const size_t at = begin + i;
      ok = std::memcmp(&out[at], &segment[order[i]], sizeof(T)) == 0;
      if (with_positions) ok = ok && pos[at] == order[i];
      if (value_bytes == 4) ok = ok && vout32[at] == begin + order[i];
      if (value_bytes == 8) ok = ok && vout64[at] == PositionValue(begin + order[i], 8);
    }
    if (!ok && ++bad_segments <= 3) {
      ADD_FAILURE() << "segment " << s << " [" << begin << ", " << end << ") differs from the reference";
    }
  }
  EXPECT_EQ(bad_segments, 0);
}

// The segment-local positions at d_positions (device) against the stable
// ascending host reference of each segment.
template <typename T>
void ExpectAscendingPositions(const std::vector<T>& keys, const std::vector<uint32_t>& offsets,
                              const void* d_positions) {
  std::vector<uint32_t> pos(keys.size());
  ASSERT_EQ(cudaMemcpy(pos.data(), d_positions, keys.size() * 4, cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (size_t s = 0; s + 1 < offsets.size(); ++s) {
    const std::vector<T> segment(keys.begin() + offsets[s], keys.begin() + offsets[s + 1]);
    const std::vector<uint64_t> order = ReferenceOrder(segment, false);
    for (size_t i = 0; i < order.size(); ++i) {
      ASSERT_EQ(pos[offsets[s] + i], order[i]) << "segment " << s << " at " << i;
    }
  }
}

// Lengths covering every bin and its edges for this key width, plus
// segments past the largest bin (merge sort: 3 * cap + 17 takes 3 passes).
std::vector<uint32_t> EdgeLengths(RadixKeyType type) {
  const uint32_t cap = static_cast<uint32_t>(SegmentedBlockCapacity(type));
  std::vector<uint32_t> lengths = {0, 1, 2, 3, 31, 32, 33};
  for (uint32_t edge = 64; edge <= cap; edge *= 2) {
    lengths.push_back(edge - 1);
    lengths.push_back(edge);
    lengths.push_back(edge + 1);
  }
  lengths.push_back(cap + 1);
  lengths.push_back(3 * cap + 17);
  return lengths;
}

template <typename T>
class SegmentedSortTyped : public ::testing::Test {};
using KeyTypes = ::testing::Types<uint32_t, int32_t, float, uint64_t, int64_t, double>;
TYPED_TEST_SUITE(SegmentedSortTyped, KeyTypes);

TYPED_TEST(SegmentedSortTyped, EveryBinBothOrdersKeysValuesPositions) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const std::vector<uint32_t> lengths = EdgeLengths(TypeOf<T>());
  const std::vector<uint32_t> offsets = OffsetsOf(lengths);
  const auto keys = Random<T>(offsets.back(), 11, /*range_bits=*/12);  // many equal keys
  for (bool descending : {false, true}) {
    for (int value_bytes : {0, 4, 8}) {
      SCOPED_TRACE(::testing::Message() << "descending=" << descending << " values=" << value_bytes);
      SegmentedSortStats stats;
      CheckSegmented(keys, offsets, descending, value_bytes, /*with_positions=*/value_bytes != 4,
                     &stats);
      const uint32_t cap = static_cast<uint32_t>(SegmentedBlockCapacity(TypeOf<T>()));
      EXPECT_EQ(stats.large_segments,
                std::count_if(lengths.begin(), lengths.end(), [&](uint32_t l) { return l > cap; }));
    }
  }
}

TYPED_TEST(SegmentedSortTyped, RandomMixOfLengthsUniformKeys) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  std::mt19937 rng(5);
  std::vector<uint32_t> lengths(3000);
  for (uint32_t& len : lengths) {
    const int kind = rng() % 10;
    len = kind < 6 ? rng() % 65 : kind < 9 ? rng() % 3000 : rng() % 20000;
  }
  const std::vector<uint32_t> offsets = OffsetsOf(lengths, /*first=*/0);
  const auto keys = Random<T>(offsets.back(), 12);
  CheckSegmented(keys, offsets, false, 0, true);
  CheckSegmented(keys, offsets, true, 8, false);
}

TEST(SegmentedSort, FloatSpecialsKeepNaNPayloadsAndInputOrder) {
  SKIP_WITHOUT_GPU();
  const std::vector<uint32_t> lengths = {7, 40, 300, 1500, 9000, 20000};
  const std::vector<uint32_t> offsets = OffsetsOf(lengths);
  for (bool descending : {false, true}) {
    CheckSegmented(FloatSpecials<float>(offsets.back(), 3), offsets, descending, 4, true);
    CheckSegmented(FloatSpecials<double>(offsets.back(), 4), offsets, descending, 0, true);
  }
}

// Segments of up to 128 keys are sorted by groups of 8 or 16 threads, so a
// warp holds 2-4 segments; bins whose segment count leaves the last warp
// partly idle (1, 3, 5, 7 segments) must still sort every live group (the
// idle groups' shuffles keep the warp whole; their reads are memcheck's
// to see, in SegmentedSortSanitizer).
TEST(SegmentedSort, SubWarpGroupsWithPartlyFilledWarps) {
  SKIP_WITHOUT_GPU();
  for (uint32_t len : {1u, 9u, 32u, 33u, 64u, 65u, 128u}) {
    for (size_t count : {1, 3, 5, 7, 9}) {
      SCOPED_TRACE(::testing::Message() << count << " segments of " << len);
      const std::vector<uint32_t> offsets = OffsetsOf(std::vector<uint32_t>(count, len));
      CheckSegmented(Random<uint64_t>(offsets.back(), len + count, 6), offsets, false, 4, true);
      CheckSegmented(Random<float>(offsets.back(), len * count), offsets, true, 0, true);
    }
  }
}

TEST(SegmentedSort, HundredThousandTinySegments) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(9);
  std::vector<uint32_t> lengths(100000);
  for (uint32_t& len : lengths) len = rng() % 17;
  const std::vector<uint32_t> offsets = OffsetsOf(lengths);
  CheckSegmented(Random<uint32_t>(offsets.back(), 1), offsets, false, 0, true);
  CheckSegmented(Random<int64_t>(offsets.back(), 2), offsets, true, 4, false);
}

TEST(SegmentedSort, OneSegmentOf64KAndNonzeroFirstOffset) {
  SKIP_WITHOUT_GPU();
  const std::vector<uint32_t> one = {0, 65536};
  CheckSegmented(Random<uint32_t>(65536, 6), one, false, 4, true);
  // Keys before offsets[0] are not part of any segment and stay unread.
  const std::vector<uint32_t> lengths = {100, 0, 5000};
  const std::vector<uint32_t> offsets = OffsetsOf(lengths, /*first=*/37);
  CheckSegmented(Random<double>(offsets.back(), 7), offsets, true, 8, true);
}

TEST(SegmentedSort, SortedReversedAndAllEqualSegments) {
  SKIP_WITHOUT_GPU();
  std::vector<int32_t> keys;
  std::vector<uint32_t> lengths;
  for (uint32_t len : {50u, 700u, 4000u}) {
    for (int kind = 0; kind < 3; ++kind) {
      for (uint32_t i = 0; i < len; ++i) {
        keys.push_back(kind == 0 ? static_cast<int32_t>(i) - 300
                                 : kind == 1 ? 1000 - static_cast<int32_t>(i) : -5);
      }
      lengths.push_back(len);
    }
  }
  const std::vector<uint32_t> offsets = OffsetsOf(lengths);
  CheckSegmented(keys, offsets, false, 4, true);
  CheckSegmented(keys, offsets, true, 4, true);
}

TEST(SegmentedSort, NoSegmentsAndEmptySegmentsOnly) {
  SKIP_WITHOUT_GPU();
  CheckSegmented(std::vector<uint32_t>{}, {0}, false, 0, true);
  CheckSegmented(std::vector<uint64_t>{}, {0, 0, 0, 0}, true, 8, true);
}

// Small: one segment per bin and one past the largest, for the
// compute-sanitizer runs (memcheck, racecheck).
TEST(SegmentedSortSanitizer, OneSegmentPerBin) {
  SKIP_WITHOUT_GPU();
  std::vector<uint32_t> lengths = {0, 1, 20, 50, 100, 200, 400, 900, 2000, 3000, 7000, 9000};
  lengths.push_back(static_cast<uint32_t>(SegmentedBlockCapacity(RadixKeyType::kUint32)) + 3);
  const std::vector<uint32_t> offsets = OffsetsOf(lengths);
  CheckSegmented(Random<uint32_t>(offsets.back(), 1, 8), offsets, false, 8, true);
  CheckSegmented(FloatSpecials<double>(offsets.back(), 2), offsets, true, 4, true);
}

// With length bounds the host never reads the offsets (null here).
TEST(SegmentedSort, LengthBoundsWithoutHostOffsets) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(4);
  std::vector<uint32_t> lengths(5000);
  for (uint32_t& len : lengths) len = 30 + rng() % 2000;  // every one fits a bin
  const std::vector<uint32_t> offsets = OffsetsOf(lengths);
  const auto keys = Random<float>(offsets.back(), 8);
  const size_t n = keys.size();
  DeviceBuffer d_in(n * 4), d_out(n * 4), d_off(offsets.size() * 4), d_pos(n * 4);
  cudaMemcpy(d_in.ptr, keys.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(d_off.ptr, offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice);
  SegmentedSortProblem p;
  p.key_type = RadixKeyType::kFloat32;
  p.num_segments = static_cast<int>(lengths.size());
  p.d_offsets = static_cast<const uint32_t*>(d_off.ptr);
  p.min_segment_items = 30;
  p.max_segment_items = 2029;
  ASSERT_LE(p.max_segment_items, SegmentedBlockCapacity(RadixKeyType::kFloat32));
  p.d_keys_in = d_in.ptr;
  p.d_keys_out = d_out.ptr;
  p.d_indices_out = static_cast<uint32_t*>(d_pos.ptr);
  size_t bytes = 0;
  ASSERT_EQ(SegmentedSort(nullptr, bytes, p, nullptr), cudaSuccess);
  DeviceBuffer temp(bytes);
  ASSERT_EQ(SegmentedSort(temp.ptr, bytes, p, nullptr), cudaSuccess);
  ExpectAscendingPositions(keys, offsets, d_pos.ptr);
}

// Without bounds the host finds them in the offsets: segments that all fall
// in one bin are launched like bounded ones (nothing filed on the host);
// lengths across bins, or past them, are filed segment by segment.
TEST(SegmentedSort, WithoutBoundsOneBinIsNotFiledOnTheHost) {
  SKIP_WITHOUT_GPU();
  SegmentedSortStats stats;
  const std::vector<uint32_t> uniform = OffsetsOf(std::vector<uint32_t>(65536, 64));
  CheckSegmented(Random<uint32_t>(uniform.back(), 11), uniform, false, 4, true, &stats);
  EXPECT_FALSE(stats.filed_on_host);
  EXPECT_EQ(stats.large_segments, 0);
  std::mt19937 rng(12);
  std::vector<uint32_t> within(3000);
  for (uint32_t& len : within) len = 33 + rng() % 32;  // 33..64: one bin
  const std::vector<uint32_t> one_bin = OffsetsOf(within);
  CheckSegmented(Random<uint64_t>(one_bin.back(), 13), one_bin, true, 8, false, &stats);
  EXPECT_FALSE(stats.filed_on_host);
  std::vector<uint32_t> across(3000);
  for (uint32_t& len : across) len = rng() % 300;  // several bins
  const std::vector<uint32_t> several = OffsetsOf(across);
  CheckSegmented(Random<float>(several.back(), 14), several, false, 0, true, &stats);
  EXPECT_TRUE(stats.filed_on_host);
}

// Callers (the GPU worker) size temp storage before they know where the
// outputs go: the size must hold once d_indices_out is set, also for the
// segments past the bins (the merge sort needs position scratch then).
TEST(SegmentedSort, SizeTakenWithoutOutputPointersHoldsForPositions) {
  SKIP_WITHOUT_GPU();
  const uint32_t cap = static_cast<uint32_t>(SegmentedBlockCapacity(RadixKeyType::kUint64));
  const std::vector<uint32_t> lengths = {5, 4 * cap + 9, 100, cap + 1};
  const std::vector<uint32_t> offsets = OffsetsOf(lengths);
  const auto keys = Random<int64_t>(offsets.back(), 12, /*range_bits=*/10);
  const size_t n = keys.size();
  SegmentedSortProblem p;
  p.key_type = RadixKeyType::kInt64;
  p.num_segments = static_cast<int>(lengths.size());
  p.h_offsets = offsets.data();
  size_t bytes = 0;
  ASSERT_EQ(SegmentedSort(nullptr, bytes, p, nullptr), cudaSuccess);  // no pointers yet
  DeviceBuffer d_in(n * 8), d_out(n * 8), d_off(offsets.size() * 4), d_pos(n * 4), temp(bytes);
  cudaMemcpy(d_in.ptr, keys.data(), n * 8, cudaMemcpyHostToDevice);
  cudaMemcpy(d_off.ptr, offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice);
  p.d_offsets = static_cast<const uint32_t*>(d_off.ptr);
  p.d_keys_in = d_in.ptr;
  p.d_keys_out = d_out.ptr;
  p.d_indices_out = static_cast<uint32_t*>(d_pos.ptr);
  ASSERT_EQ(SegmentedSort(temp.ptr, bytes, p, nullptr), cudaSuccess);
  ExpectAscendingPositions(keys, offsets, d_pos.ptr);
}

TEST(SegmentedSort, RejectsBadValueWidth) {
  SegmentedSortProblem p;
  p.value_bytes = 2;
  size_t bytes = 0;
  EXPECT_EQ(SegmentedSort(nullptr, bytes, p, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace sortd::cuda
