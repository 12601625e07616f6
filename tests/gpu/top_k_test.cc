// GPU selection (core/cuda/select/top_k.cuh) against the stable host
// reference sort's first k, segment by segment: every key type and order;
// positions, keys bit for bit and 4-/8-byte values; each path (rows of
// every block size, the guess, the guess failing into the exact select and
// its tie pass, the sort for large k); ties, float specials, sorted and
// adversarial input. Skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/cuda/select/top_k.cuh"
#include "tests/gpu/radix_reference.h"

namespace sortd::cuda {
namespace {

using namespace sortd::cuda::testing;  // NOLINT: test helpers

struct Shape {
  size_t row_length = 0;          // rows
  std::vector<uint64_t> offsets;  // else ragged segments (empty: one array)
};

std::vector<uint64_t> Offsets(size_t n, const Shape& shape) {
  if (shape.row_length > 0) {
    std::vector<uint64_t> o;
    for (size_t b = 0; b <= n; b += shape.row_length) o.push_back(b);
    return o;
  }
  if (!shape.offsets.empty()) return shape.offsets;
  return {0, n};
}

// Selects on the GPU and compares every segment with the reference.
template <typename T>
void CheckTopK(const std::vector<T>& keys, uint64_t k, bool descending, const Shape& shape,
               int value_bytes, TopKStats* stats_out = nullptr) {
  const size_t n = keys.size();
  const std::vector<uint64_t> offsets = Offsets(n, shape);
  size_t kept = 0;
  for (size_t s = 0; s + 1 < offsets.size(); ++s) kept += std::min<uint64_t>(k, offsets[s + 1] - offsets[s]);
  DeviceBuffer d_keys(std::max<size_t>(n, 1) * sizeof(T)), d_values(std::max<size_t>(n, 1) * 8);
  DeviceBuffer d_pos(std::max<size_t>(kept, 1) * 4), d_kout(std::max<size_t>(kept, 1) * sizeof(T));
  DeviceBuffer d_vout(std::max<size_t>(kept, 1) * 8);
  ASSERT_EQ(cudaMemcpy(d_keys.ptr, keys.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  UploadPositionValues(d_values.ptr, n, value_bytes);

  TopKProblem p;
  p.key_type = TypeOf<T>();
  p.descending = descending;
  p.d_keys = d_keys.ptr;
  p.num_items = n;
  p.row_length = shape.row_length;
  if (shape.row_length == 0 && !shape.offsets.empty()) {
    p.num_segments = shape.offsets.size() - 1;
    p.h_offsets = shape.offsets.data();
  }
  p.k = k;
  p.d_positions = static_cast<uint32_t*>(d_pos.ptr);
  p.d_keys_out = d_kout.ptr;
  p.value_bytes = value_bytes;
  p.d_values = value_bytes ? d_values.ptr : nullptr;
  p.d_values_out = value_bytes ? d_vout.ptr : nullptr;
  size_t temp_bytes = 0;
  ASSERT_EQ(TopKTempBytes(p, &temp_bytes), cudaSuccess);
  DeviceBuffer temp(temp_bytes);
  TopKStats stats;
  ASSERT_EQ(TopK(temp.ptr, temp_bytes, p, nullptr, &stats), cudaSuccess);
  if (stats_out != nullptr) *stats_out = stats;

  std::vector<uint32_t> pos(kept);
  std::vector<T> kout(kept);
  std::vector<uint8_t> vout(kept * 8);
  ASSERT_EQ(cudaMemcpy(pos.data(), d_pos.ptr, kept * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(kout.data(), d_kout.ptr, kept * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  if (value_bytes) {
    ASSERT_EQ(cudaMemcpy(vout.data(), d_vout.ptr, kept * value_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  }
  size_t at = 0;
  for (size_t s = 0; s + 1 < offsets.size(); ++s) {
    const std::vector<T> segment(keys.begin() + offsets[s], keys.begin() + offsets[s + 1]);
    const std::vector<uint64_t> order = ReferenceOrder(segment, descending);
    const size_t keep = std::min<uint64_t>(k, segment.size());
    for (size_t i = 0; i < keep; ++i, ++at) {
      ASSERT_EQ(pos[at], order[i]) << "segment " << s << " rank " << i << " of " << keep;
      ASSERT_EQ(std::memcmp(&kout[at], &segment[order[i]], sizeof(T)), 0) << "segment " << s;
      if (value_bytes) {
        uint64_t v = 0;
        std::memcpy(&v, vout.data() + at * value_bytes, value_bytes);
        ASSERT_EQ(v, PositionValue(offsets[s] + order[i], value_bytes)) << "segment " << s;
      }
    }
  }
}

template <typename T>
class GpuTopKTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  }
};

using KeyTypes = ::testing::Types<uint32_t, int32_t, float, uint64_t, int64_t, double>;
TYPED_TEST_SUITE(GpuTopKTest, KeyTypes);

TYPED_TEST(GpuTopKTest, OneArrayEveryPathAndK) {
  using T = TypeParam;
  for (size_t n : {size_t{1}, size_t{100}, size_t{4096}, size_t{4097}, size_t{70000}, size_t{1} << 20}) {
    const auto keys = Random<T>(n, n);
    for (uint64_t k : {uint64_t{1}, uint64_t{10}, uint64_t{100}, uint64_t{2048}, uint64_t{2049},
                       uint64_t{n}, uint64_t{n + 5}}) {
      for (bool descending : {false, true}) {
        SCOPED_TRACE("n " + std::to_string(n) + " k " + std::to_string(k) + (descending ? " desc" : ""));
        CheckTopK(keys, k, descending, Shape{}, k == 100 ? 8 : 0);
      }
    }
  }
}

TYPED_TEST(GpuTopKTest, RowsOfEveryBlockSize) {
  using T = TypeParam;
  for (size_t row : {size_t{1}, size_t{7}, size_t{1024}, size_t{1500}, size_t{2048}, size_t{4096}}) {
    const size_t rows = std::max<size_t>(1, 300000 / row / 4);
    const auto keys = Random<T>(rows * row, row, row == 1500 ? 6 : 64);  // 1500: ties
    for (uint64_t k : {uint64_t{1}, uint64_t{10}, uint64_t{100}, uint64_t{row}}) {
      SCOPED_TRACE("row " + std::to_string(row) + " k " + std::to_string(k));
      TopKStats stats;
      CheckTopK(keys, k, k == 10, Shape{row, {}}, k == 100 ? 4 : 0, &stats);
      EXPECT_EQ(stats.row_launches, 1);
      EXPECT_EQ(stats.guesses, 0);
    }
  }
}

TYPED_TEST(GpuTopKTest, RaggedSegmentsMixPaths) {
  using T = TypeParam;
  const std::vector<size_t> lengths = {0, 1, 4096, 5000, 0, 70000, 3, 1024, 4097};
  Shape shape;
  shape.offsets.push_back(0);
  for (size_t l : lengths) shape.offsets.push_back(shape.offsets.back() + l);
  const auto keys = Random<T>(shape.offsets.back(), 77);
  for (uint64_t k : {uint64_t{5}, uint64_t{100}, uint64_t{3000}}) {
    SCOPED_TRACE("k " + std::to_string(k));
    TopKStats stats;
    CheckTopK(keys, k, false, shape, 4, &stats);
    EXPECT_EQ(stats.row_launches, 1);
    if (k <= kTopKGuessMaxK) EXPECT_EQ(stats.guesses, 3);
    if (k > kTopKGuessMaxK) EXPECT_EQ(stats.sorted_segments, 3);
  }
}

// Few distinct keys: the bucket at rank k is too full for the guess's
// buffer, so the exact select runs; all-equal keys reach its tie pass.
TYPED_TEST(GpuTopKTest, HeavyTiesTakeTheExactSelect) {
  using T = TypeParam;
  const size_t n = size_t{1} << 21;
  for (uint64_t bits : {uint64_t{0}, uint64_t{1}, uint64_t{3}}) {
    const auto keys = Random<T>(n, bits + 5, bits);
    for (uint64_t k : {uint64_t{1}, uint64_t{100}, uint64_t{2048}}) {
      for (bool descending : {false, true}) {
        SCOPED_TRACE("bits " + std::to_string(bits) + " k " + std::to_string(k));
        TopKStats stats;
        CheckTopK(keys, k, descending, Shape{}, 8, &stats);
        EXPECT_EQ(stats.guesses, 1);
        EXPECT_EQ(stats.guesses_failed, 1);
      }
    }
  }
}

TYPED_TEST(GpuTopKTest, SortedReversedAndSpecials) {
  using T = TypeParam;
  const size_t n = 300000;
  auto sorted = Random<T>(n, 3);
  std::sort(sorted.begin(), sorted.end(), [](T a, T b) { return Less(a, b); });
  auto reversed = sorted;
  std::reverse(reversed.begin(), reversed.end());
  for (const auto* keys : {&sorted, &reversed}) {
    for (bool descending : {false, true}) CheckTopK(*keys, 100, descending, Shape{}, 0);
  }
  if constexpr (std::is_floating_point_v<T>) {
    const auto specials = FloatSpecials<T>(n, 9);
    for (bool descending : {false, true}) {
      CheckTopK(specials, 100, descending, Shape{}, 4);
      CheckTopK(specials, 50, descending, Shape{1000, {}}, 0);
    }
  }
}

// The smallest keys lie between the sample's positions, and the sampled
// keys are the next smallest: fewer than k lie at or below the guess's
// threshold, and the exact select answers.
TYPED_TEST(GpuTopKTest, KeysHiddenFromTheSample) {
  using T = TypeParam;
  const size_t n = size_t{1} << 22;
  const size_t samples = std::min<size_t>(n, (size_t{128} << 10) / sizeof(T));
  std::vector<bool> sampled(n);
  for (size_t i = 0; i < samples; ++i) sampled[i * n / samples] = true;
  std::vector<T> keys(n);
  std::mt19937_64 rng(11);
  size_t next_sample = 0, planted = 0;
  for (size_t i = 0; i < n; ++i) {
    if (sampled[i]) {
      keys[i] = static_cast<T>(1000 + next_sample++);
    } else if (i % 997 == 1 && planted < 300) {
      keys[i] = static_cast<T>(rng() % 7);
      ++planted;
    } else {
      keys[i] = static_cast<T>(1000000 + rng() % 1000);
    }
  }
  ASSERT_EQ(planted, 300u);
  TopKStats stats;
  CheckTopK(keys, 400, false, Shape{}, 4, &stats);
  EXPECT_EQ(stats.guesses_failed, 1);
}

TEST(GpuTopKProblemTest, RefusesWhatItCannotTake) {
  TopKProblem p;
  p.key_type = RadixKeyType::kUint32;
  p.num_items = 10;
  p.d_keys = reinterpret_cast<void*>(256);
  p.d_positions = reinterpret_cast<uint32_t*>(256);
  size_t bytes = 0;
  p.k = 0;
  EXPECT_EQ(TopKTempBytes(p, &bytes), cudaErrorInvalidValue);
  p.k = 3;
  p.row_length = 3;  // 10 keys are not whole rows of 3
  EXPECT_EQ(TopKTempBytes(p, &bytes), cudaErrorInvalidValue);
  p.row_length = 0;
  const uint64_t offsets[] = {0, 4, 9};  // do not reach 10
  p.num_segments = 2;
  p.h_offsets = offsets;
  EXPECT_EQ(TopKTempBytes(p, &bytes), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace sortd::cuda
