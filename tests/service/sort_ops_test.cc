// The unary execution path (server/wire/sort_ops): a call's own request has
// its arrays moved into the response, not copied; a shared one is left as
// it was.
#include "server/wire/sort_ops.h"

#include "server/wire/chunked_upload.h"

#include <algorithm>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace sortd {
namespace {

class SortOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DispatcherOptions options;
    options.engine = EngineChoice::kCpu;
    auto dispatcher = Dispatcher::Create(options);
    ASSERT_TRUE(dispatcher.ok()) << dispatcher.status();
    dispatcher_ = std::move(*dispatcher);
  }

  static std::vector<uint32_t> RandomKeys(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint32_t> keys(n);
    for (uint32_t& k : keys) k = rng() % 1000;  // repeats: stability matters for pairs
    return keys;
  }

  std::unique_ptr<Dispatcher> dispatcher_;
};

TEST_F(SortOpsTest, OwnRequestsKeysAreMovedIntoTheResponseAndSortedThere) {
  const std::vector<uint32_t> keys = RandomKeys(50000, 1);
  v1::SortRequest request;
  request.mutable_keys()->mutable_uint32()->mutable_values()->Add(keys.begin(), keys.end());
  request.set_return_indices(true);
  const uint32_t* payload = request.keys().uint32().values().data();

  v1::SortResponse response;
  ASSERT_TRUE(RunSort(*dispatcher_, &request, &response).ok());

  // The response holds the request's own buffer: no copy pass was made.
  EXPECT_EQ(response.keys().uint32().values().data(), payload);
  EXPECT_EQ(request.keys().uint32().values_size(), 0);
  std::vector<uint32_t> expected = keys;
  std::stable_sort(expected.begin(), expected.end());
  const auto& got = response.keys().uint32().values();
  ASSERT_EQ(std::vector<uint32_t>(got.begin(), got.end()), expected);
  ASSERT_EQ(response.indices_size(), static_cast<int>(keys.size()));
  for (int i = 0; i < response.indices_size(); ++i) {
    ASSERT_EQ(keys[response.indices(i)], expected[i]) << "index " << i;
  }
}

TEST_F(SortOpsTest, SharedRequestIsLeftAsItWas) {
  const std::vector<uint32_t> keys = RandomKeys(1000, 2);
  v1::SortRequest request;
  request.mutable_keys()->mutable_uint32()->mutable_values()->Add(keys.begin(), keys.end());
  const v1::SortRequest& shared = request;

  v1::SortResponse response;
  ASSERT_TRUE(RunSort(*dispatcher_, shared, &response).ok());

  const auto& left = request.keys().uint32().values();
  EXPECT_EQ(std::vector<uint32_t>(left.begin(), left.end()), keys);
  EXPECT_NE(response.keys().uint32().values().data(), left.data());
  EXPECT_TRUE(std::is_sorted(response.keys().uint32().values().begin(),
                             response.keys().uint32().values().end()));
}

TEST_F(SortOpsTest, OwnPairsRequestsArraysAreMovedAndValuesFollowTheirKeys) {
  const std::vector<uint32_t> keys = RandomKeys(30000, 3);
  v1::SortPairsRequest request;
  request.mutable_keys()->mutable_uint32()->mutable_values()->Add(keys.begin(), keys.end());
  // Each value names its key's position: a stable sort's order is known.
  for (size_t i = 0; i < keys.size(); ++i) {
    request.mutable_values()->mutable_uint64()->add_values(i);
  }
  const uint32_t* key_payload = request.keys().uint32().values().data();
  const uint64_t* value_payload = request.values().uint64().values().data();

  v1::SortPairsResponse response;
  ASSERT_TRUE(RunSortPairs(*dispatcher_, &request, &response).ok());

  EXPECT_EQ(response.keys().uint32().values().data(), key_payload);
  EXPECT_EQ(response.values().uint64().values().data(), value_payload);
  std::vector<uint64_t> order(keys.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](uint64_t a, uint64_t b) { return keys[a] < keys[b]; });
  ASSERT_EQ(response.values().uint64().values_size(), static_cast<int>(keys.size()));
  for (size_t i = 0; i < order.size(); ++i) {
    ASSERT_EQ(response.values().uint64().values(static_cast<int>(i)), order[i]) << "row " << i;
    ASSERT_EQ(response.keys().uint32().values(static_cast<int>(i)), keys[order[i]]);
  }
}

v1::TypedArray Uint32Chunk(uint32_t first, int n) {
  v1::TypedArray chunk;
  for (int i = 0; i < n; ++i) chunk.mutable_uint32()->add_values(first + static_cast<uint32_t>(i));
  return chunk;
}

TEST(HostColumnTest, PooledColumnHoldsItsChunksAndMovesToTheHeapPastTheReservation) {
  HostMemoryPool pool(/*pin=*/false, /*min_pinned_bytes=*/0, /*keep_bytes=*/size_t{1} << 30);
  HostColumn column;
  column.Reserve(DataType::kUint32, 6, &pool);
  ASSERT_TRUE(column.Append(Uint32Chunk(10, 4), "keys").ok());
  ASSERT_TRUE(column.Append(Uint32Chunk(20, 2), "keys").ok());
  // Past the 6 reserved: the first 6 must survive the move.
  ASSERT_TRUE(column.Append(Uint32Chunk(30, 3), "keys").ok());
  ASSERT_EQ(column.size(), 9u);
  v1::TypedArray all;
  column.CopySlice(0, 9, &all);
  const std::vector<uint32_t> expected = {10, 11, 12, 13, 20, 21, 30, 31, 32};
  EXPECT_EQ(std::vector<uint32_t>(all.uint32().values().begin(), all.uint32().values().end()),
            expected);
  ASSERT_TRUE(column.Permute(std::vector<uint64_t>{8, 0, 1, 2, 3, 4, 5, 6, 7}).ok());
  column.CopySlice(0, 2, &all);
  EXPECT_EQ(all.uint32().values(0), 32u);
  EXPECT_EQ(all.uint32().values(1), 10u);
}

}  // namespace
}  // namespace sortd
