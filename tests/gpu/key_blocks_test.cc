// The device encoder of sorted keys (core/cuda/key_blocks.cuh) against the
// format's own CPU encoder (proto/sortd/v1/sorted_blocks.h): the same bytes
// for every width, kind and order, sorted input (coded blocks), unsorted
// input (raw blocks) and a mix, partial last blocks; and a sort session's
// path, GpuWorker::SortArriving with key_blocks, whose body decodes to the
// sorted keys (and is not written where it would not fit). Links the proto
// library, so it is built where the server is. Skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "core/cuda/gpu_worker.h"
#include "core/cuda/key_blocks.cuh"
#include "tests/gpu/radix_reference.h"
#include "sortd/v1/sorted_blocks.h"

namespace sortd::cuda {
namespace {

namespace blocks = v1::blocks;
using testing::HaveGpu;
using Kind = blocks::KeyCoding::Kind;

enum class Shape { kSorted, kRandom, kHalfSorted };

// `n` keys of width W bits as words of `kind`, sorted in `descending` order
// by their typed value for kSorted (floats without NaN).
template <typename W>
std::vector<W> Keys(size_t n, Kind kind, bool descending, Shape shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<W> w(n);
  for (W& x : w) {
    x = static_cast<W>(rng());
    if (kind == Kind::kFloat) {
      // Finite values of a few binades, both signs.
      if constexpr (sizeof(W) == 4) {
        const float f = static_cast<float>(static_cast<int32_t>(rng() >> 40)) / 1024.0f;
        std::memcpy(&x, &f, 4);
      } else {
        const double f = static_cast<double>(static_cast<int64_t>(rng() >> 20)) / 1e6;
        std::memcpy(&x, &f, 8);
      }
    }
  }
  const size_t sorted_to = shape == Shape::kSorted ? n : shape == Shape::kHalfSorted ? n / 2 : 0;
  auto by_value = [&](W a, W b) {
    using S = std::make_signed_t<W>;
    using F = std::conditional_t<sizeof(W) == 4, float, double>;
    bool less;
    if (kind == Kind::kSigned) {
      less = static_cast<S>(a) < static_cast<S>(b);
    } else if (kind == Kind::kFloat) {
      F fa, fb;
      std::memcpy(&fa, &a, sizeof(W));
      std::memcpy(&fb, &b, sizeof(W));
      less = fa < fb;
    } else {
      less = a < b;
    }
    return less;
  };
  std::sort(w.begin(), w.begin() + sorted_to, [&](W a, W b) {
    return descending ? by_value(b, a) : by_value(a, b);
  });
  return w;
}

// The device body of `keys`, or a failed expectation.
template <typename W>
std::vector<uint8_t> EncodeOnDevice(const std::vector<W>& keys, Kind kind, bool descending) {
  const size_t n = keys.size();
  void* d_keys = nullptr;
  uint64_t* d_offsets = nullptr;
  uint8_t* d_body = nullptr;
  EXPECT_EQ(cudaMalloc(&d_keys, std::max<size_t>(1, n * sizeof(W))), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&d_offsets, KeyBlockOffsetsBytes(n)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d_keys, keys.data(), n * sizeof(W), cudaMemcpyHostToDevice), cudaSuccess);
  KeyBlocksProblem p;
  p.d_keys = d_keys;
  p.num_items = n;
  p.width = sizeof(W);
  p.kind = static_cast<KeyBlocksProblem::Kind>(kind);
  p.descending = descending;
  EXPECT_EQ(SizeKeyBlocks(p, d_offsets, nullptr), cudaSuccess);
  uint64_t total = 0;
  EXPECT_EQ(cudaMemcpy(&total, d_offsets + KeyBlockCount(n), 8, cudaMemcpyDeviceToHost), cudaSuccess);
  std::vector<uint8_t> body(total);
  EXPECT_EQ(cudaMalloc(&d_body, std::max<uint64_t>(1, total)), cudaSuccess);
  EXPECT_EQ(WriteKeyBlocks(p, d_offsets, d_body, nullptr), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(body.data(), d_body, total, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaFree(d_keys);
  cudaFree(d_offsets);
  cudaFree(d_body);
  return body;
}

template <typename W>
std::vector<uint8_t> EncodeOnHost(const std::vector<W>& keys, Kind kind, bool descending) {
  const blocks::KeyCoding c{static_cast<int>(sizeof(W)), kind, descending};
  std::vector<uint8_t> body(blocks::MaxEncodedBytes(keys.size(), sizeof(W)));
  body.resize(blocks::EncodeBlocks(keys.data(), keys.size(), c, body.data()));
  return body;
}

template <typename W>
void SameBytesAsTheHost() {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  for (Kind kind : {Kind::kUnsigned, Kind::kSigned, Kind::kFloat}) {
    for (bool descending : {false, true}) {
      for (Shape shape : {Shape::kSorted, Shape::kRandom, Shape::kHalfSorted}) {
        for (size_t n : {size_t{1}, size_t{3}, size_t{5}, size_t{1023}, size_t{65535},
                         size_t{65536}, size_t{65537}, size_t{3 * 65536 + 17}, size_t{1} << 21}) {
          SCOPED_TRACE(::testing::Message() << "width " << sizeof(W) << " kind "
                                            << static_cast<int>(kind) << " desc " << descending
                                            << " shape " << static_cast<int>(shape) << " n " << n);
          const std::vector<W> keys = Keys<W>(n, kind, descending, shape, n * 31 + sizeof(W));
          const std::vector<uint8_t> device = EncodeOnDevice(keys, kind, descending);
          const std::vector<uint8_t> host = EncodeOnHost(keys, kind, descending);
          ASSERT_EQ(device.size(), host.size());
          ASSERT_EQ(device, host);
          std::vector<W> back(n);
          ASSERT_TRUE(blocks::DecodeBlocks(device.data(), device.size(),
                                           {static_cast<int>(sizeof(W)), kind, descending}, 0, n,
                                           back.data())
                          .ok());
          ASSERT_EQ(back, keys);
          if (shape == Shape::kSorted && n >= 65536 && kind != Kind::kFloat) {
            // Sorted random words of a full block shrink (gaps of 2^(W-16)).
            EXPECT_LT(device.size(), n * sizeof(W));
          }
        }
      }
    }
  }
}

TEST(KeyBlocksTest, DeviceWritesTheHostEncodersBytes32) { SameBytesAsTheHost<uint32_t>(); }
TEST(KeyBlocksTest, DeviceWritesTheHostEncodersBytes64) { SameBytesAsTheHost<uint64_t>(); }

TEST(KeyBlocksTest, NoKeysNoBlocks) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  EXPECT_TRUE(EncodeOnDevice(std::vector<uint32_t>{}, Kind::kUnsigned, false).empty());
}

// Every range at once, then complete.
class WholeInput final : public ArrivingInput {
 public:
  explicit WholeInput(std::vector<ArrivedRange> ranges) : ranges_(std::move(ranges)) {}
  Next Wait(ArrivedRange* range) override {
    if (next_ == ranges_.size()) return Next::kComplete;
    *range = ranges_[next_++];
    return Next::kRange;
  }

 private:
  std::vector<ArrivedRange> ranges_;
  size_t next_ = 0;
};

std::unique_ptr<GpuWorker> MakeWorker() {
  GpuWorkerOptions o;
  o.arriving_slots = 1;
  std::string error;
  auto w = GpuWorker::Create(o, &error);
  EXPECT_NE(w, nullptr) << error;
  return w;
}

TEST(KeyBlocksTest, ArrivingSortCodesTheSortedKeysOverTheKeys) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  auto worker = MakeWorker();
  ASSERT_NE(worker, nullptr);
  for (bool descending : {false, true}) {
    const size_t n = (size_t{1} << 20) + 12345;
    std::vector<int32_t> keys(n);
    std::mt19937 rng(descending ? 7 : 8);
    for (int32_t& k : keys) k = static_cast<int32_t>(rng());
    std::vector<int32_t> expected = keys;
    std::stable_sort(expected.begin(), expected.end(),
                     [&](int32_t a, int32_t b) { return descending ? b < a : a < b; });
    int32_t* host = nullptr;
    ASSERT_EQ(cudaMallocHost(&host, n * 4), cudaSuccess);
    std::memcpy(host, keys.data(), n * 4);
    SortedKeyBlocks coded;
    coded.kind = SortedKeyBlocks::kSigned;
    coded.body = reinterpret_cast<uint8_t*>(host);
    coded.capacity = n * 4;
    WholeInput input({{ArrivedRange::kKeys, 0, n / 3}, {ArrivedRange::kKeys, n / 3, n}});
    GpuArrivingJob job;
    job.key_type = RadixKeyType::kInt32;
    job.descending = descending;
    job.num_items = n;
    job.keys = host;
    job.input = &input;
    job.key_blocks = &coded;
    const GpuSortReport report = worker->SortArriving(job);
    ASSERT_EQ(report.outcome, GpuSortOutcome::kOk) << report.message;
    ASSERT_TRUE(coded.written);
    ASSERT_EQ(coded.offsets.size(), KeyBlockCount(n) + 1);
    const uint64_t bytes = coded.offsets.back();
    // 2^20 uniform keys: gaps of ~2^12, 2 data bytes and a quarter of a
    // control byte a key (0.55 of the keys; measured on the H200: 0.547).
    EXPECT_LT(bytes, n * 4 * 6 / 10);
    std::vector<int32_t> back(n);
    const absl::Status decoded = blocks::DecodeBlocks(
        coded.body, bytes, {4, Kind::kSigned, descending}, 0, n, back.data());
    ASSERT_TRUE(decoded.ok()) << decoded;
    EXPECT_EQ(back, expected);
    // Each block decodes alone from its offset (how downloads slice them).
    const size_t b = 7;
    std::vector<int32_t> one(blocks::kBlockKeys);
    ASSERT_TRUE(blocks::DecodeBlocks(coded.body + coded.offsets[b],
                                     coded.offsets[b + 1] - coded.offsets[b],
                                     {4, Kind::kSigned, descending}, b, blocks::kBlockKeys,
                                     one.data())
                    .ok());
    EXPECT_TRUE(std::equal(one.begin(), one.end(), expected.begin() + b * blocks::kBlockKeys));
    cudaFreeHost(host);
  }
}

TEST(KeyBlocksTest, ArrivingSortDownloadsRawKeysWhenTheBodyWouldNotFit) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  auto worker = MakeWorker();
  ASSERT_NE(worker, nullptr);
  const size_t n = 3 * 65536 + 5;
  std::vector<uint32_t> keys(n);
  std::mt19937 rng(11);
  for (uint32_t& k : keys) k = rng();
  std::vector<uint32_t> expected = keys;
  std::sort(expected.begin(), expected.end());
  std::vector<uint8_t> small(64);  // far too small for any body
  SortedKeyBlocks coded;
  coded.body = small.data();
  coded.capacity = small.size();
  WholeInput input({{ArrivedRange::kKeys, 0, n}});
  GpuArrivingJob job;
  job.num_items = n;
  job.keys = keys.data();
  job.input = &input;
  job.key_blocks = &coded;
  const GpuSortReport report = worker->SortArriving(job);
  ASSERT_EQ(report.outcome, GpuSortOutcome::kOk) << report.message;
  EXPECT_FALSE(coded.written);
  EXPECT_EQ(keys, expected);  // the keys came back as they are
}

}  // namespace
}  // namespace sortd::cuda
