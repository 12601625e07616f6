// GPU merge sort against host references: numeric keys of every type and
// order with 4-/8-byte values or an argsort permutation at the tile edges
// and beyond (stability: values are input positions), float specials,
// byte-string argsort (lengths 0..200, shared prefixes, duplicates, bytes
// >= 0x80), and merges of sorted runs. Skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/cuda/merge_sort.cuh"
#include "tests/gpu/radix_reference.h"

namespace sortd::cuda {
namespace {

using namespace sortd::cuda::testing;  // NOLINT: test helpers

// Checks device output against the stable reference order: keys bit for
// bit, the permutation (argsort) or values (input positions).
template <typename T>
void ExpectSortedLike(const std::vector<T>& keys, const std::vector<uint64_t>& order,
                      const std::vector<T>& out, int value_bytes, const std::vector<uint32_t>& pos,
                      const std::vector<uint32_t>& v32, const std::vector<uint64_t>& v64) {
  size_t bad = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    bool ok = std::memcmp(&out[i], &keys[order[i]], sizeof(T)) == 0;
    if (!pos.empty()) ok = ok && pos[i] == order[i];
    if (value_bytes == 4) ok = ok && v32[i] == order[i];
    if (value_bytes == 8) ok = ok && v64[i] == PositionValue(order[i], 8);
    if (!ok && ++bad <= 3) ADD_FAILURE() << "position " << i << " differs from the reference";
  }
  EXPECT_EQ(bad, 0u);
}

// value_bytes: 0 keys only, 4/8 values, -1 argsort.
template <typename T>
void CheckMergeSort(const std::vector<T>& keys, bool descending, int value_bytes) {
  const size_t n = keys.size();
  DeviceBuffer d_in(n * sizeof(T)), d_out(n * sizeof(T)), d_vin(n * 8), d_vout(n * 8);
  ASSERT_EQ(cudaMemcpy(d_in.ptr, keys.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  UploadPositionValues(d_vin.ptr, n, value_bytes);
  MergeSortProblem p;
  p.key_type = TypeOf<T>();
  p.num_items = n;
  p.descending = descending;
  p.d_keys_in = d_in.ptr;
  p.d_keys_out = d_out.ptr;
  if (value_bytes > 0) {
    p.value_bytes = value_bytes;
    p.d_values_in = d_vin.ptr;
    p.d_values_out = d_vout.ptr;
  } else if (value_bytes < 0) {
    p.d_indices_out = static_cast<uint32_t*>(d_vout.ptr);
  }
  size_t temp_bytes = 0;
  ASSERT_EQ(MergeSort(nullptr, temp_bytes, p, nullptr), cudaSuccess);
  DeviceBuffer temp(temp_bytes);
  ASSERT_EQ(MergeSort(temp.ptr, temp_bytes, p, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  std::vector<T> out(n);
  std::vector<uint32_t> pos, v32(n);
  std::vector<uint64_t> v64(n);
  ASSERT_EQ(cudaMemcpy(out.data(), d_out.ptr, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  if (value_bytes < 0) {
    pos.resize(n);
    cudaMemcpy(pos.data(), d_vout.ptr, n * 4, cudaMemcpyDeviceToHost);
  }
  if (value_bytes == 4) cudaMemcpy(v32.data(), d_vout.ptr, n * 4, cudaMemcpyDeviceToHost);
  if (value_bytes == 8) cudaMemcpy(v64.data(), d_vout.ptr, n * 8, cudaMemcpyDeviceToHost);
  ExpectSortedLike(keys, ReferenceOrder(keys, descending), out, value_bytes, pos, v32, v64);
}

template <typename T>
class MergeSortTyped : public ::testing::Test {};
using KeyTypes = ::testing::Types<uint32_t, int32_t, float, uint64_t, int64_t, double>;
TYPED_TEST_SUITE(MergeSortTyped, KeyTypes);

TYPED_TEST(MergeSortTyped, TileEdgesBothOrdersKeysValuesArgsort) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const size_t tile = MergeSortTileItems(sizeof(T));
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, tile - 1, tile, tile + 1, 2 * tile + 1,
                   5 * tile + 3, 64 * tile + 1}) {
    const auto keys = Random<T>(n, n + 3, /*range_bits=*/10);  // many equal keys
    for (bool descending : {false, true}) {
      for (int value_bytes : {0, 4, 8, -1}) {
        SCOPED_TRACE(::testing::Message() << "n=" << n << " descending=" << descending
                                          << " values=" << value_bytes);
        CheckMergeSort(keys, descending, value_bytes);
      }
    }
  }
}

TYPED_TEST(MergeSortTyped, MillionUniformKeys) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const auto keys = Random<T>((size_t{1} << 20) + 7, 99);
  CheckMergeSort(keys, false, -1);
  CheckMergeSort(keys, true, 8);
}

TEST(MergeSort, FloatSpecialsKeepNaNPayloadsAndInputOrder) {
  SKIP_WITHOUT_GPU();
  for (bool descending : {false, true}) {
    CheckMergeSort(FloatSpecials<float>(50001, 7), descending, -1);
    CheckMergeSort(FloatSpecials<double>(50001, 8), descending, 8);
  }
}

TEST(MergeSort, SortedReversedAndAllEqual) {
  SKIP_WITHOUT_GPU();
  std::vector<uint32_t> sorted(100000);
  std::iota(sorted.begin(), sorted.end(), 0u);
  std::vector<uint32_t> reversed(sorted.rbegin(), sorted.rend());
  const std::vector<uint32_t> equal(100000, 0xffffffffu);  // equal to the padding word
  for (bool descending : {false, true}) {
    CheckMergeSort(sorted, descending, 4);
    CheckMergeSort(reversed, descending, 4);
    CheckMergeSort(equal, descending, -1);
  }
}

// Passes of up to kMergeFusedSplitsMaxTiles tiles find their splits in the
// merge kernel, larger ones in a partition kernel: both sides of the limit
// (every merge pass of a sort of `tiles` tiles has that many), keys with
// many ties (stability), values and argsort.
TEST(MergeSort, FusedAndSeparateSplitSearchesEitherSideOfTheLimit) {
  SKIP_WITHOUT_GPU();
  const size_t tile = MergeSortTileItems(4);
  for (size_t tiles : {size_t{kMergeFusedSplitsMaxTiles}, size_t{kMergeFusedSplitsMaxTiles} + 1}) {
    const auto keys = Random<uint32_t>(tiles * tile - 5, tiles, /*range_bits=*/12);
    SCOPED_TRACE(::testing::Message() << tiles << " tiles");
    CheckMergeSort(keys, false, 4);
    CheckMergeSort(keys, true, -1);
  }
}

TEST(MergeSort, SixteenMillionKeys) {
  SKIP_WITHOUT_GPU();
  CheckMergeSort(Random<uint32_t>(size_t{1} << 24, 4), false, -1);
}

TEST(MergeSort, RejectsArgsortWithValues) {
  MergeSortProblem p;
  p.num_items = 10;
  p.value_bytes = 4;
  uint32_t dummy = 0;
  p.d_indices_out = &dummy;
  size_t bytes = 0;
  EXPECT_EQ(MergeSort(nullptr, bytes, p, nullptr), cudaErrorInvalidValue);
  p.d_indices_out = nullptr;
  p.value_bytes = 3;
  EXPECT_EQ(MergeSort(nullptr, bytes, p, nullptr), cudaErrorInvalidValue);
}

// ---- byte strings ----

struct Strings {
  std::vector<std::string> values;
  std::vector<uint8_t> bytes;
  std::vector<uint64_t> offsets;
};

Strings Pack(std::vector<std::string> values) {
  Strings s;
  s.offsets.push_back(0);
  for (const std::string& v : values) {
    s.bytes.insert(s.bytes.end(), v.begin(), v.end());
    s.offsets.push_back(s.bytes.size());
  }
  s.values = std::move(values);
  return s;
}

// Lengths 0..max_len over a small alphabet including bytes >= 0x80 and
// 0x00, many sharing long prefixes, with duplicates.
Strings RandomStrings(size_t n, size_t max_len, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::string alphabet("\x00\x01" "ab\x7f\x80\xff", 7);
  std::vector<std::string> prefixes;
  for (int i = 0; i < 16; ++i) {
    std::string p;
    const size_t len = rng() % (max_len + 1);
    for (size_t j = 0; j < len; ++j) p.push_back(alphabet[rng() % alphabet.size()]);
    prefixes.push_back(p);
  }
  std::vector<std::string> values(n);
  for (size_t i = 0; i < n; ++i) {
    const int kind = rng() % 4;
    if (kind == 0 && i > 0) {
      values[i] = values[rng() % i];  // duplicate
      continue;
    }
    std::string v = kind == 1 ? prefixes[rng() % prefixes.size()] : std::string();
    const size_t len = rng() % (max_len + 1);
    while (v.size() < len) v.push_back(alphabet[rng() % alphabet.size()]);
    v.resize(std::min(v.size(), max_len));
    values[i] = std::move(v);
  }
  return Pack(std::move(values));
}

std::vector<uint32_t> GpuArgsort(const Strings& s, bool descending) {
  const size_t n = s.values.size();
  DeviceBuffer d_bytes(s.bytes.size()), d_off(s.offsets.size() * 8), d_idx(n * 4);
  EXPECT_EQ(cudaMemcpy(d_bytes.ptr, s.bytes.data(), s.bytes.size(), cudaMemcpyHostToDevice),
            cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d_off.ptr, s.offsets.data(), s.offsets.size() * 8, cudaMemcpyHostToDevice),
            cudaSuccess);
  BytesArgsortProblem p;
  p.num_items = n;
  p.descending = descending;
  p.d_bytes = static_cast<const uint8_t*>(d_bytes.ptr);
  p.d_offsets = static_cast<const uint64_t*>(d_off.ptr);
  p.d_indices_out = static_cast<uint32_t*>(d_idx.ptr);
  size_t temp_bytes = 0;
  EXPECT_EQ(ArgsortBytes(nullptr, temp_bytes, p, nullptr), cudaSuccess);
  DeviceBuffer temp(temp_bytes);
  EXPECT_EQ(ArgsortBytes(temp.ptr, temp_bytes, p, nullptr), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint32_t> idx(n);
  EXPECT_EQ(cudaMemcpy(idx.data(), d_idx.ptr, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  return idx;
}

// std::string compares as unsigned char (char_traits<char>::compare is
// memcmp order), a proper prefix first: the contract's order.
void CheckArgsort(const Strings& s, bool descending) {
  std::vector<uint64_t> expected(s.values.size());
  std::iota(expected.begin(), expected.end(), 0);
  std::stable_sort(expected.begin(), expected.end(), [&](uint64_t a, uint64_t b) {
    return descending ? s.values[b] < s.values[a] : s.values[a] < s.values[b];
  });
  const std::vector<uint32_t> got = GpuArgsort(s, descending);
  size_t bad = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (got[i] != expected[i] && ++bad <= 3) {
      ADD_FAILURE() << "position " << i << ": got index " << got[i] << ", expected "
                    << expected[i];
    }
  }
  EXPECT_EQ(bad, 0u);
}

TEST(ArgsortBytes, TileEdgesBothOrders) {
  SKIP_WITHOUT_GPU();
  const size_t tile = MergeSortTileItems(16);
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, tile - 1, tile, tile + 1, 9 * tile + 5}) {
    const Strings s = RandomStrings(n, 200, n + 1);
    for (bool descending : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " descending=" << descending);
      CheckArgsort(s, descending);
    }
  }
}

TEST(ArgsortBytes, PrefixesZeroBytesAndHighBytes) {
  SKIP_WITHOUT_GPU();
  // Every pair here differs only past 8 bytes, or by a trailing 0x00, or
  // by a byte >= 0x80 (signed-char order would get those wrong).
  const Strings s = Pack({"", std::string(1, '\0'), std::string(2, '\0'), "a", "a\x80", "a\x7f",
                          "abcdefgh", "abcdefgh", "abcdefghi", "abcdefgh\xff", "abcdefgh\x01",
                          std::string("abcdefgh\0", 9), "\xff", "\xff\xff\xff\xff\xff\xff\xff\xff\xff",
                          "abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyY", ""});
  CheckArgsort(s, false);
  CheckArgsort(s, true);
}

TEST(ArgsortBytes, MillionStrings) {
  SKIP_WITHOUT_GPU();
  const Strings s = RandomStrings((size_t{1} << 20) + 7, 200, 3);
  CheckArgsort(s, false);
  CheckArgsort(s, true);
}

TEST(ArgsortBytes, SixteenMillionShortStrings) {
  SKIP_WITHOUT_GPU();
  CheckArgsort(RandomStrings(size_t{1} << 24, 12, 4), false);
}

// ---- merging sorted runs ----

// Splits `keys` into runs of the given lengths, sorts each on the host
// (stable), merges them on the GPU, and compares with the stable sort of
// the whole array (the merge keeps run order for equal keys). Values are
// input positions.
template <typename T>
void CheckMergeRuns(const std::vector<T>& keys, const std::vector<size_t>& lengths,
                    bool descending, int value_bytes, size_t kway_min_items = 0) {
  const size_t n = keys.size();
  std::vector<size_t> offsets(1, 0);
  for (size_t len : lengths) offsets.push_back(offsets.back() + len);
  ASSERT_EQ(offsets.back(), n);
  std::vector<T> runs(n);
  std::vector<uint64_t> run_values(n);
  for (size_t r = 0; r < lengths.size(); ++r) {
    const std::vector<T> run(keys.begin() + offsets[r], keys.begin() + offsets[r + 1]);
    const std::vector<uint64_t> order = ReferenceOrder(run, descending);
    for (size_t i = 0; i < order.size(); ++i) {
      runs[offsets[r] + i] = run[order[i]];
      run_values[offsets[r] + i] = offsets[r] + order[i];
    }
  }
  DeviceBuffer d_in(n * sizeof(T)), d_out(n * sizeof(T)), d_vin(n * 8), d_vout(n * 8);
  ASSERT_EQ(cudaMemcpy(d_in.ptr, runs.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  if (value_bytes == 8) {
    std::vector<uint64_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = PositionValue(run_values[i], 8);
    ASSERT_EQ(cudaMemcpy(d_vin.ptr, v.data(), n * 8, cudaMemcpyHostToDevice), cudaSuccess);
  } else if (value_bytes == 4) {
    std::vector<uint32_t> v(run_values.begin(), run_values.end());
    ASSERT_EQ(cudaMemcpy(d_vin.ptr, v.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  }
  MergeRunsProblem p;
  p.key_type = TypeOf<T>();
  p.descending = descending;
  p.num_runs = static_cast<int>(lengths.size());
  p.h_run_offsets = offsets.data();
  p.d_keys_in = d_in.ptr;
  p.d_keys_out = d_out.ptr;
  p.value_bytes = value_bytes;
  p.d_values_in = value_bytes ? d_vin.ptr : nullptr;
  p.d_values_out = value_bytes ? d_vout.ptr : nullptr;
  p.kway_min_items = kway_min_items;
  size_t temp_bytes = 0;
  ASSERT_EQ(MergeSortedRuns(nullptr, temp_bytes, p, nullptr), cudaSuccess);
  // The bound the radix sort sizes by holds for this merge too.
  EXPECT_LE(temp_bytes, MergeSortedRunsTempBound(p.key_type, n, value_bytes, p.num_runs));
  DeviceBuffer temp(temp_bytes);
  ASSERT_EQ(MergeSortedRuns(temp.ptr, temp_bytes, p, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<T> out(n);
  std::vector<uint32_t> v32(n);
  std::vector<uint64_t> v64(n);
  ASSERT_EQ(cudaMemcpy(out.data(), d_out.ptr, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  if (value_bytes == 4) cudaMemcpy(v32.data(), d_vout.ptr, n * 4, cudaMemcpyDeviceToHost);
  if (value_bytes == 8) cudaMemcpy(v64.data(), d_vout.ptr, n * 8, cudaMemcpyDeviceToHost);
  ExpectSortedLike(keys, ReferenceOrder(keys, descending), out, value_bytes, {}, v32, v64);
}

TYPED_TEST(MergeSortTyped, MergeRunsOfMixedLengths) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  std::mt19937 rng(17);
  const size_t tile = MergeSortTileItems(sizeof(T));
  const std::vector<std::vector<size_t>> cases = {
      {0},
      {1000},
      {3, 5},
      {tile, tile + 1, 0, 7},
      {1, 0, 0, 5 * tile + 9, 2, tile - 1, 300},
  };
  for (const auto& lengths : cases) {
    const size_t n = std::accumulate(lengths.begin(), lengths.end(), size_t{0});
    const auto keys = Random<T>(n, n + 1, /*range_bits=*/8);
    for (bool descending : {false, true}) {
      for (int value_bytes : {0, 4, 8}) {
        SCOPED_TRACE(::testing::Message() << "runs=" << lengths.size() << " n=" << n
                                          << " descending=" << descending
                                          << " values=" << value_bytes);
        CheckMergeRuns(keys, lengths, descending, value_bytes);
      }
    }
  }
  std::vector<size_t> many(64);  // 64 runs: 6 passes
  for (size_t& len : many) len = rng() % (3 * tile);
  const size_t n = std::accumulate(many.begin(), many.end(), size_t{0});
  CheckMergeRuns(Random<T>(n, 5, 12), many, false, 8);
}

TEST(MergeSort, MergeRunsFloatSpecials) {
  SKIP_WITHOUT_GPU();
  const auto keys = FloatSpecials<double>(40000, 21);
  CheckMergeRuns(keys, {10000, 15000, 1, 14999}, false, 8);
  CheckMergeRuns(keys, {10000, 15000, 1, 14999}, true, 8);
}

// Merges of 5..8 non-empty runs (keys only, or 4-byte keys with 4-byte
// values) take one k-way round (merge_kway_kernels.cuh) from
// MergeRunsProblem::kway_min_items keys, lowered here to 1 so that ~10^5
// keys reach it: mixed lengths with empty and one-key runs, keys from 16
// values (with values: input positions, so ties show run order) and from
// the full range, both orders. The round's sample stride and splitter
// spacing depend on the number of runs and the widths, not on the keys'
// number. 8-byte values (and 4-byte ones with 8-byte keys) take two-way
// rounds: checked alike.
constexpr size_t kAnyKWay = 1;

TYPED_TEST(MergeSortTyped, MergeRunsKWayRound) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  const size_t m = 100003;
  const std::vector<std::vector<size_t>> cases = {
      {m / 5, m / 5, m / 5, m / 5, m / 5 + 3},                       // 5 runs
      {m / 2, 0, 1, m / 4, 3 * m / 16, 0, m / 16 + 5, 999, 17},     // 7 non-empty
      {m / 8, m / 8, m / 8, m / 8, m / 8, m / 8, m / 8, m / 8 + 7},  // 8
  };
  uint64_t seed = 31;
  for (const auto& lengths : cases) {
    const size_t n = std::accumulate(lengths.begin(), lengths.end(), size_t{0});
    for (uint64_t range_bits : {uint64_t{4}, uint64_t{64}}) {
      const auto keys = Random<T>(n, ++seed, range_bits);
      for (bool descending : {false, true}) {
        for (int value_bytes : {0, 4, 8}) {
          if (range_bits == 64 && value_bytes != 0) continue;  // stability needs ties
          SCOPED_TRACE(::testing::Message() << "runs=" << lengths.size() << " n=" << n << " bits=" << range_bits
                                            << " descending=" << descending << " values=" << value_bytes);
          CheckMergeRuns(keys, lengths, descending, value_bytes, kAnyKWay);
        }
      }
    }
  }
}

// Slices that are empty in most runs: every key equal (the splitters tie
// and are told apart by run and position alone), and runs whose key
// ranges do not overlap (each block's keys come from one or two runs).
// With 4-byte values (k-way for 4-byte keys, two-way for 8-byte ones).
TEST(MergeSort, MergeRunsKWayAllEqualAndDisjointRuns) {
  SKIP_WITHOUT_GPU();
  const size_t n = 200011;
  std::vector<size_t> lengths = {n / 8, n / 4, n / 8, n / 16, n / 16, n / 8, n / 8};
  lengths.push_back(n - std::accumulate(lengths.begin(), lengths.end(), size_t{0}));
  std::vector<uint32_t> disjoint(n);
  for (size_t i = 0; i < n; ++i) disjoint[i] = static_cast<uint32_t>(n - i);  // run r above run r + 1
  for (int value_bytes : {0, 4}) {
    CheckMergeRuns(std::vector<uint32_t>(n, 7u), lengths, false, value_bytes, kAnyKWay);
    CheckMergeRuns(std::vector<int64_t>(n, -3), lengths, true, value_bytes, kAnyKWay);
    CheckMergeRuns(disjoint, lengths, false, value_bytes, kAnyKWay);
    CheckMergeRuns(disjoint, lengths, true, value_bytes, kAnyKWay);
  }
}

// Floats: NaNs compare equal, so their payloads (and the values) show
// whether equal keys kept run order.
TEST(MergeSort, MergeRunsKWayFloatSpecials) {
  SKIP_WITHOUT_GPU();
  const size_t n = 150001;
  const std::vector<size_t> lengths = {n / 6, n / 6, 1, n / 6, n / 6, n - 4 * (n / 6) - 1};
  CheckMergeRuns(FloatSpecials<float>(n, 23), lengths, false, 0, kAnyKWay);
  CheckMergeRuns(FloatSpecials<float>(n, 25), lengths, true, 0, kAnyKWay);
  CheckMergeRuns(FloatSpecials<double>(n, 24), lengths, true, 0, kAnyKWay);
  CheckMergeRuns(FloatSpecials<float>(n, 26), lengths, true, 4, kAnyKWay);
}

// Small sizes for compute-sanitizer (memcheck, racecheck).
TEST(MergeSortSanitizer, SmallSortsStringsAndRuns) {
  SKIP_WITHOUT_GPU();
  const size_t tile = MergeSortTileItems(4);
  CheckMergeSort(Random<uint32_t>(2 * tile + 5, 1, 6), false, -1);
  CheckMergeSort(Random<double>(MergeSortTileItems(8) + 3, 2), true, 8);
  CheckArgsort(RandomStrings(2 * MergeSortTileItems(16) + 1, 40, 3), false);
  CheckMergeRuns(Random<int64_t>(3000, 4, 5), {1000, 0, 1500, 500}, true, 4);
  // One k-way round each: 4-byte keys with 4-byte values, 8-byte keys.
  CheckMergeRuns(Random<uint32_t>(40005, 6, 10), {20000, 10000, 5, 5000, 5000}, false, 4, kAnyKWay);
  CheckMergeRuns(Random<double>(30000, 7), {5000, 0, 10000, 5000, 5000, 1, 4999}, true, 0, kAnyKWay);
}

}  // namespace
}  // namespace sortd::cuda
