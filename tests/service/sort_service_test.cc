// Unary Sort/SortPairs through a real in-process server: every key type and
// order, indices, pairs with every value type, and every malformed request.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <string>

#include "tests/service/test_server.h"

namespace sortd::testing {
namespace {

using v1::SORT_ORDER_ASCENDING;
using v1::SORT_ORDER_DESCENDING;

class SortServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServer();
    ASSERT_NE(server_, nullptr);
    client_ = Connect(*server_);
  }
  void ExpectHealthy() {
    auto health = client_->Health();
    ASSERT_TRUE(health.ok()) << health.status();
    EXPECT_EQ(*health, "SERVING");
    std::vector<uint32_t> keys = {3, 1, 2};
    auto sorted = client_->Sort<uint32_t>(keys);
    ASSERT_TRUE(sorted.ok()) << sorted.status();
    EXPECT_EQ(sorted->keys, (std::vector<uint32_t>{1, 2, 3}));
  }
  v1::SortService::Stub& stub() { return client_->stub(); }

  std::unique_ptr<SortdServer> server_;
  std::unique_ptr<client::SortClient> client_;
};

template <typename T>
std::vector<T> RandomKeys(size_t n, uint64_t seed, uint64_t distinct) {
  std::mt19937_64 rng(seed);
  std::vector<T> keys(n);
  for (T& k : keys) k = static_cast<T>(static_cast<int64_t>(rng() % distinct) - distinct / 2);
  return keys;
}

// Checks a stable sort result: keys[i] == input[indices[i]], non-decreasing
// (or non-increasing) keys, and ascending indices among equal keys.
template <typename T>
void ExpectStableSorted(const std::vector<T>& input, const client::SortResult<T>& r,
                        bool descending) {
  ASSERT_EQ(r.keys.size(), input.size());
  ASSERT_EQ(r.indices.size(), input.size());
  std::vector<bool> seen(input.size());
  for (size_t i = 0; i < r.keys.size(); ++i) {
    ASSERT_LT(r.indices[i], input.size());
    EXPECT_FALSE(seen[r.indices[i]]);
    seen[r.indices[i]] = true;
    EXPECT_EQ(r.keys[i], input[r.indices[i]]);
    if (i == 0) continue;
    const T& a = r.keys[i - 1];
    const T& b = r.keys[i];
    EXPECT_FALSE(descending ? (a < b) : (b < a)) << "position " << i;
    if (a == b) EXPECT_LT(r.indices[i - 1], r.indices[i]) << "unstable at " << i;
  }
}

template <typename T>
class TypedSortTest : public SortServiceTest {};
using KeyTypes = ::testing::Types<uint32_t, int32_t, float, uint64_t, int64_t, double>;
TYPED_TEST_SUITE(TypedSortTest, KeyTypes);

TYPED_TEST(TypedSortTest, SortsBothOrdersWithIndices) {
  for (size_t n : {0, 1, 2, 3, 1001, 100003}) {
    std::vector<TypeParam> keys = RandomKeys<TypeParam>(n, n, 50);
    for (auto order : {SORT_ORDER_ASCENDING, SORT_ORDER_DESCENDING}) {
      auto r = this->client_->template Sort<TypeParam>(keys, order, true);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->engine, v1::ENGINE_CPU);
      ExpectStableSorted(keys, *r, order == SORT_ORDER_DESCENDING);
      auto keys_only = this->client_->template Sort<TypeParam>(keys, order, false);
      ASSERT_TRUE(keys_only.ok());
      EXPECT_EQ(keys_only->keys, r->keys);
      EXPECT_TRUE(keys_only->indices.empty());
    }
  }
}

TEST_F(SortServiceTest, FloatSpecialsFollowTheDocumentedOrder) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> keys = {nan, 1.0f, -0.0f, -inf, 0.0f, -nan, inf, -2.0f, 1e-45f};
  auto r = client_->Sort<float>(keys, SORT_ORDER_ASCENDING, true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->indices, (std::vector<uint64_t>{3, 7, 2, 4, 8, 1, 6, 0, 5}));
  EXPECT_TRUE(std::signbit(r->keys[2]));
  EXPECT_FALSE(std::signbit(r->keys[3]));
  auto d = client_->Sort<float>(keys, SORT_ORDER_DESCENDING, true);
  ASSERT_TRUE(d.ok());
  // Exact reverse of the distinct-key order; NaNs (equal) keep input order.
  EXPECT_EQ(d->indices, (std::vector<uint64_t>{0, 5, 6, 1, 8, 4, 2, 7, 3}));
}

TEST_F(SortServiceTest, BytesKeysSortUnsignedLexicographic) {
  std::vector<std::string> keys = {"b", "", "ab", std::string("\xff", 1), "a", "ab", "a\x80"};
  auto r = client_->Sort<std::string>(keys, SORT_ORDER_ASCENDING, true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->keys, (std::vector<std::string>{"", "a", "ab", "ab", "a\x80", "b", "\xff"}));
  EXPECT_EQ(r->indices, (std::vector<uint64_t>{1, 4, 2, 5, 6, 0, 3}));
  auto d = client_->Sort<std::string>(keys, SORT_ORDER_DESCENDING, true);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->indices, (std::vector<uint64_t>{3, 0, 6, 2, 5, 4, 1}));
}

TEST_F(SortServiceTest, PairsCarryValuesOfEveryType) {
  std::vector<int32_t> keys = {5, -1, 5, 0};
  auto as_u64 = client_->SortPairs<int32_t, uint64_t>(keys, std::vector<uint64_t>{10, 11, 12, 13});
  ASSERT_TRUE(as_u64.ok()) << as_u64.status();
  EXPECT_EQ(as_u64->keys, (std::vector<int32_t>{-1, 0, 5, 5}));
  EXPECT_EQ(as_u64->values, (std::vector<uint64_t>{11, 13, 10, 12}));
  std::vector<std::string> names = {"five", "minus one", "five again", "zero"};
  auto as_bytes = client_->SortPairs<int32_t, std::string>(keys, names, SORT_ORDER_DESCENDING);
  ASSERT_TRUE(as_bytes.ok());
  EXPECT_EQ(as_bytes->values, (std::vector<std::string>{"five", "five again", "zero", "minus one"}));
  auto as_float = client_->SortPairs<std::string, float>(
      std::vector<std::string>{"b", "a"}, std::vector<float>{2.5f, 1.5f});
  ASSERT_TRUE(as_float.ok());
  EXPECT_EQ(as_float->values, (std::vector<float>{1.5f, 2.5f}));
}

void ExpectInvalid(const grpc::Status& status, const std::string& field) {
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_EQ(status.error_message().rfind(field + ":", 0), 0u)
      << "message should start with the field name: " << status.error_message();
}

TEST_F(SortServiceTest, EmptyRequestIsRefusedNamingKeys) {
  grpc::ClientContext ctx;
  v1::SortResponse response;
  ExpectInvalid(stub().Sort(&ctx, v1::SortRequest(), &response), "keys");
  ExpectHealthy();
}

TEST_F(SortServiceTest, KeysWrapperWithoutArrayIsRefused) {
  v1::SortRequest request;
  request.mutable_keys();  // TypedArray present, oneof unset
  grpc::ClientContext ctx;
  v1::SortResponse response;
  ExpectInvalid(stub().Sort(&ctx, request, &response), "keys");
  ExpectHealthy();
}

TEST_F(SortServiceTest, UnknownOrderIsRefused) {
  v1::SortRequest request;
  request.mutable_keys()->mutable_uint32()->add_values(1);
  request.set_order(static_cast<v1::SortOrder>(7));
  grpc::ClientContext ctx;
  v1::SortResponse response;
  grpc::Status status = stub().Sort(&ctx, request, &response);
  ExpectInvalid(status, "order");
  EXPECT_NE(status.error_message().find("7"), std::string::npos);
  ExpectHealthy();
}

TEST_F(SortServiceTest, PairsLengthMismatchAndMissingValuesAreRefused) {
  v1::SortPairsRequest request;
  request.mutable_keys()->mutable_uint32()->add_values(1);
  request.mutable_keys()->mutable_uint32()->add_values(2);
  {
    grpc::ClientContext ctx;
    v1::SortPairsResponse response;
    ExpectInvalid(stub().SortPairs(&ctx, request, &response), "values");
  }
  request.mutable_values()->mutable_float64()->add_values(1.0);
  {
    grpc::ClientContext ctx;
    v1::SortPairsResponse response;
    grpc::Status status = stub().SortPairs(&ctx, request, &response);
    ExpectInvalid(status, "values");
    EXPECT_NE(status.error_message().find("length 1"), std::string::npos) << status.error_message();
  }
  {
    grpc::ClientContext ctx;
    v1::SortPairsResponse response;
    ExpectInvalid(stub().SortPairs(&ctx, v1::SortPairsRequest(), &response), "keys");
  }
  ExpectHealthy();
}

TEST(SortDeadlineTest, ExpiredDeadlineIsNotRun) {
  // A deadline already past when the call is made: the client fails it
  // DEADLINE_EXCEEDED without sending it (gRPC's own check), so the server
  // must neither sort it nor count it. Shutdown returns only once every
  // call that reached the server has been handled and counted, so what the
  // counters say after it is final. (A deadline that passes while the call
  // waits on the server: GatedDeadlineTest, BatchingTest.ExpiredRequest...)
  std::mutex mu;
  std::map<std::string, int> reached;
  ServerOptions options;
  options.test_site_hook = [&](absl::string_view at) {
    std::lock_guard<std::mutex> lock(mu);
    ++reached[std::string(at)];
    return false;
  };
  options.batching_mode = BatchingMode::kOff;  // a sort would pass "unary.run"
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  auto client = Connect(*server);
  ASSERT_EQ(client->Health().value_or(""), "SERVING");
  for (int i = 0; i < 10; ++i) {
    v1::SortRequest request;
    for (uint32_t k : {3, 1, 2}) request.mutable_keys()->mutable_uint32()->add_values(k);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() - std::chrono::seconds(1));
    v1::SortResponse response;
    EXPECT_EQ(client->stub().Sort(&ctx, request, &response).error_code(),
              grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  // A call with time to run, on the same channel, is sorted.
  auto sorted = client->Sort<int64_t>(std::vector<int64_t>{5, -1, 4, 0});
  ASSERT_TRUE(sorted.ok()) << sorted.status();
  EXPECT_EQ(sorted->keys, (std::vector<int64_t>{-1, 0, 4, 5}));
  server->Shutdown();

  const std::string text = Scrape(*server);
  EXPECT_EQ(Sample(text, R"(sortd_keys_sorted_total{engine="cpu"})"), 4) << text;
  EXPECT_EQ(Sample(text, R"(sortd_requests_total{code="OK",key_type="int64",method="Sort"})"), 1);
  // No uint32 Sort was counted, whatever its code.
  EXPECT_EQ(text.find(R"(key_type="uint32",method="Sort")"), std::string::npos) << text;
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(reached["unary.run"], 1);  // the int64 call only
}

TEST_F(SortServiceTest, RequestIdIsEchoed) {
  v1::SortRequest request;
  request.mutable_keys()->mutable_int64()->add_values(-5);
  request.set_request_id("abc-123");
  grpc::ClientContext ctx;
  v1::SortResponse response;
  ASSERT_TRUE(stub().Sort(&ctx, request, &response).ok());
  EXPECT_EQ(response.request_id(), "abc-123");
  EXPECT_EQ(response.engine(), v1::ENGINE_CPU);
}

}  // namespace
}  // namespace sortd::testing
