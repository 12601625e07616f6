// TopK through the real service (server/wire/top_k_ops.h): for every key
// type sortd sorts, both orders, k from 1 past the length, with values and
// NaT placement, whole arrays and segments (rows, ragged lengths with empty
// segments, the multi-threaded paths), each answer compared with the first
// k of the same server's Sort of the same keys (stable, so the positions
// must match too); bad requests refused naming the field; calls counted
// under method="TopK".
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "client/shared_region.h"
#include "client/sortd_client.h"
#include "server/wire/typed_array.h"
#include "sortd/v1/sort.grpc.pb.h"
#include "tests/service/test_server.h"

namespace sortd {
namespace {

using ::sortd::testing::Sample;
using ::sortd::testing::Scrape;
using ::sortd::testing::StartServer;
using ::sortd::testing::Target;

// `n` keys of the named type with many repeats (`distinct` values), NaN
// and NaT among the floats and times.
v1::TypedArray Keys(const std::string& type, size_t n, uint64_t seed, uint64_t distinct = 50) {
  std::mt19937_64 rng(seed);
  v1::TypedArray a;
  auto pick = [&] { return rng() % distinct; };
  auto fill = [&](auto* field, auto make) {
    for (size_t i = 0; i < n; ++i) field->Add(make());
  };
  if (type == "uint32") fill(a.mutable_uint32()->mutable_values(), [&] { return uint32_t(pick() * 77777); });
  if (type == "int32") fill(a.mutable_int32()->mutable_values(), [&] { return int32_t(pick()) - 25; });
  if (type == "uint64") fill(a.mutable_uint64()->mutable_values(), [&] { return pick() << 40; });
  if (type == "int64") fill(a.mutable_int64()->mutable_values(), [&] { return int64_t(pick()) - 25; });
  if (type == "float32" || type == "float64") {
    auto value = [&]() -> double {
      const uint64_t r = pick();
      if (r == 0) return std::nan("");
      if (r == 1) return -0.0;
      return (static_cast<double>(r) - 25) / 4;
    };
    if (type == "float32") fill(a.mutable_float32()->mutable_values(), [&] { return float(value()); });
    if (type == "float64") fill(a.mutable_float64()->mutable_values(), value);
  }
  if (type == "bytes") {
    const char alphabet[] = {'a', '\xff', '\0'};
    for (size_t i = 0; i < n; ++i) {
      std::string s;
      for (uint64_t j = 0, len = rng() % 3; j < len; ++j) s.push_back(alphabet[rng() % 3]);
      a.mutable_bytes()->add_values(s);
    }
  }
  auto narrow = [&](std::string* bytes, size_t width, uint32_t mask) {
    for (size_t i = 0; i < n; ++i) {
      const uint32_t v = static_cast<uint32_t>(pick() * 0x9e37) & mask;
      bytes->append(reinterpret_cast<const char*>(&v), width);
    }
  };
  if (type == "int8") narrow(a.mutable_int8()->mutable_values(), 1, 0xFF);
  if (type == "uint8") narrow(a.mutable_uint8()->mutable_values(), 1, 0xFF);
  if (type == "int16") narrow(a.mutable_int16()->mutable_values(), 2, 0xFFFF);
  if (type == "uint16") narrow(a.mutable_uint16()->mutable_values(), 2, 0xFFFF);
  // Patterns over the whole range: NaNs (several payloads) and infinities.
  if (type == "float16") narrow(a.mutable_float16()->mutable_values(), 2, 0xFFFF);
  if (type == "bfloat16") narrow(a.mutable_bfloat16()->mutable_values(), 2, 0xFFFF);
  if (type == "bool") narrow(a.mutable_boolean()->mutable_values(), 1, 1);
  if (type == "datetime64" || type == "timedelta64") {
    auto* field = type == "datetime64" ? a.mutable_datetime64()->mutable_values()
                                       : a.mutable_timedelta64()->mutable_values();
    fill(field, [&] { return pick() == 0 ? INT64_MIN : int64_t(pick()) * 1000; });
    if (type == "datetime64") a.mutable_datetime64()->set_unit(v1::TIME_UNIT_NANOSECOND);
    if (type == "timedelta64") a.mutable_timedelta64()->set_unit(v1::TIME_UNIT_SECOND);
  }
  return a;
}

const char* const kTypes[] = {"uint32", "int32",  "float32", "uint64",   "int64",
                              "float64", "bytes", "int8",    "uint8",    "int16",
                              "uint16", "float16", "bfloat16", "bool",   "datetime64",
                              "timedelta64"};

class TopKTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServer(Options());
    ASSERT_NE(server_, nullptr);
    // The reference Sorts of large arrays answer past gRPC's 4 MiB default.
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    stub_ = v1::SortService::NewStub(
        grpc::CreateCustomChannel(Target(*server_), grpc::InsecureChannelCredentials(), args));
  }
  virtual ServerOptions Options() { return {}; }

  grpc::Status TopK(const v1::TopKRequest& request, v1::TopKResponse* response) {
    grpc::ClientContext ctx;
    return stub_->TopK(&ctx, request, response);
  }

  // The first k of the server's stable Sort of keys[begin, end): keys
  // (gathered from the input, as TopK returns them) and positions.
  void Expected(const v1::TypedArray& keys, size_t begin, size_t end, uint64_t k,
                v1::SortOrder order, v1::NullPlacement nulls, std::vector<uint64_t>* positions) {
    std::vector<uint64_t> slice(end - begin);
    for (size_t i = begin; i < end; ++i) slice[i - begin] = i;
    v1::SortRequest sort;
    ASSERT_TRUE(GatherTypedArray(keys, slice, sort.mutable_keys()).ok());
    sort.set_order(order);
    sort.set_nulls(nulls);
    sort.set_return_indices(true);
    v1::SortResponse sorted;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->Sort(&ctx, sort, &sorted).ok());
    const size_t kept = std::min<uint64_t>(k, end - begin);
    positions->assign(sorted.indices().begin(), sorted.indices().begin() + kept);
  }

  std::unique_ptr<SortdServer> server_;
  std::unique_ptr<v1::SortService::Stub> stub_;
};

TEST_F(TopKTest, EveryTypeEqualsTheFirstKOfTheStableSort) {
  for (const char* type : kTypes) {
    const v1::TypedArray keys = Keys(type, 700, 11);
    for (v1::SortOrder order : {v1::SORT_ORDER_ASCENDING, v1::SORT_ORDER_DESCENDING}) {
      for (v1::NullPlacement nulls : {v1::NULL_PLACEMENT_LAST, v1::NULL_PLACEMENT_FIRST}) {
        for (uint64_t k : {uint64_t{1}, uint64_t{9}, uint64_t{699}, uint64_t{700},
                           uint64_t{1} << 63}) {
          SCOPED_TRACE(::testing::Message() << type << " order=" << order << " nulls=" << nulls
                                            << " k=" << k);
          v1::TopKRequest request;
          *request.mutable_keys() = keys;
          request.set_k(k);
          request.set_order(order);
          request.set_nulls(nulls);
          request.set_return_indices(true);
          request.set_request_id("top");
          v1::TopKResponse response;
          grpc::Status status = TopK(request, &response);
          ASSERT_TRUE(status.ok()) << status.error_message();
          std::vector<uint64_t> want;
          Expected(keys, 0, 700, k, order, nulls, &want);
          EXPECT_EQ(std::vector<uint64_t>(response.indices().begin(), response.indices().end()),
                    want);
          v1::TypedArray want_keys;
          ASSERT_TRUE(GatherTypedArray(keys, want, &want_keys).ok());
          EXPECT_EQ(response.keys().SerializeAsString(), want_keys.SerializeAsString());
          EXPECT_EQ(response.request_id(), "top");
          EXPECT_EQ(response.engine(), v1::ENGINE_CPU);
          EXPECT_EQ(response.segment_counts_size(), 0);
        }
      }
    }
  }
}

TEST_F(TopKTest, SegmentsEachKeepTheirOwnFirstK) {
  // Ragged segments, empty ones at the start, middle and end, one shorter
  // than k; values of another type ride along.
  const std::vector<uint64_t> lengths = {0, 40, 3, 0, 100, 57, 0};
  for (const char* type : {"float32", "bytes", "int16", "datetime64"}) {
    SCOPED_TRACE(type);
    const v1::TypedArray keys = Keys(type, 200, 5);
    const v1::TypedArray values = Keys("uint64", 200, 6, 1u << 30);
    v1::TopKRequest request;
    *request.mutable_keys() = keys;
    *request.mutable_values() = values;
    request.set_k(10);
    request.set_order(v1::SORT_ORDER_DESCENDING);
    request.set_return_indices(true);
    request.mutable_segment_lengths()->Add(lengths.begin(), lengths.end());
    v1::TopKResponse response;
    grpc::Status status = TopK(request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    std::vector<uint64_t> want_local, want_global, want_counts;
    size_t begin = 0;
    for (uint64_t length : lengths) {
      std::vector<uint64_t> positions;
      Expected(keys, begin, begin + length, 10, v1::SORT_ORDER_DESCENDING,
               v1::NULL_PLACEMENT_LAST, &positions);
      want_counts.push_back(positions.size());
      for (uint64_t p : positions) {
        want_local.push_back(p);
        want_global.push_back(begin + p);
      }
      begin += length;
    }
    EXPECT_EQ(std::vector<uint64_t>(response.segment_counts().begin(),
                                    response.segment_counts().end()),
              want_counts);
    EXPECT_EQ(std::vector<uint64_t>(response.indices().begin(), response.indices().end()),
              want_local);
    v1::TypedArray want_keys, want_values;
    ASSERT_TRUE(GatherTypedArray(keys, want_global, &want_keys).ok());
    ASSERT_TRUE(GatherTypedArray(values, want_global, &want_values).ok());
    EXPECT_EQ(response.keys().SerializeAsString(), want_keys.SerializeAsString());
    EXPECT_EQ(response.values().SerializeAsString(), want_values.SerializeAsString());
  }
}

// Past kTopKParallelMinKeys: one array scanned by every thread, and rows
// spread over the threads, give the single-threaded answer (the Sort).
TEST_F(TopKTest, LargeArraysAndManyRowsMatchTheSort) {
  const size_t n = size_t{1} << 19;
  const v1::TypedArray keys = Keys("uint32", n, 3, 1u << 20);
  for (uint64_t row_length : {uint64_t{0}, uint64_t{1024}}) {
    SCOPED_TRACE(row_length);
    v1::TopKRequest request;
    *request.mutable_keys() = keys;
    request.set_k(100);
    request.set_return_indices(true);
    request.set_row_length(row_length);
    v1::TopKResponse response;
    ASSERT_TRUE(TopK(request, &response).ok());
    std::vector<uint64_t> want;
    const size_t rows = row_length == 0 ? 1 : n / row_length;
    const size_t length = row_length == 0 ? n : row_length;
    // Every row would be one Sort call: check the first, a middle and the
    // last row (the threads' shares split elsewhere).
    for (size_t r : {size_t{0}, rows / 2, rows - 1}) {
      Expected(keys, r * length, (r + 1) * length, 100, v1::SORT_ORDER_ASCENDING,
               v1::NULL_PLACEMENT_LAST, &want);
      EXPECT_EQ(std::vector<uint64_t>(response.indices().begin() + r * 100,
                                      response.indices().begin() + (r + 1) * 100),
                want)
          << "row " << r;
    }
    EXPECT_EQ(static_cast<size_t>(response.indices_size()), rows * 100);
    EXPECT_EQ(response.segment_counts_size(), 0);  // implied by row_length
  }
}

TEST_F(TopKTest, BadRequestsNameTheField) {
  auto refused = [&](const std::function<void(v1::TopKRequest*)>& edit) {
    v1::TopKRequest request;
    *request.mutable_keys() = Keys("int32", 10, 1);
    request.set_k(3);
    edit(&request);
    v1::TopKResponse response;
    grpc::Status status = TopK(request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    return status.error_message();
  };
  EXPECT_NE(refused([](v1::TopKRequest* r) { r->set_k(0); }).find("k: must be at least 1"),
            std::string::npos);
  EXPECT_NE(refused([](v1::TopKRequest* r) { r->clear_keys(); }).find("keys: required"),
            std::string::npos);
  EXPECT_NE(refused([](v1::TopKRequest* r) {
              *r->mutable_values() = Keys("int32", 9, 2);
            }).find("values: length 9 does not match keys length 10"),
            std::string::npos);
  EXPECT_NE(refused([](v1::TopKRequest* r) {
              r->set_row_length(5);
              r->add_segment_lengths(10);
            }).find("not both"),
            std::string::npos);
  EXPECT_NE(refused([](v1::TopKRequest* r) { r->set_row_length(3); })
                .find("row_length: keys' length 10 is not a whole number of rows of 3"),
            std::string::npos);
  EXPECT_NE(refused([](v1::TopKRequest* r) {
              r->add_segment_lengths(4);
              r->add_segment_lengths(5);
            }).find("segment_lengths: sum to 9 but keys has 10"),
            std::string::npos);
  EXPECT_NE(refused([](v1::TopKRequest* r) {
              r->add_segment_lengths(4);
              r->add_segment_lengths(UINT64_MAX);
            }).find("segment_lengths: segments 0..1 hold more than"),
            std::string::npos);
  EXPECT_NE(refused([](v1::TopKRequest* r) { r->set_order(static_cast<v1::SortOrder>(7)); })
                .find("order"),
            std::string::npos);
  EXPECT_NE(refused([](v1::TopKRequest* r) { r->set_nulls(static_cast<v1::NullPlacement>(9)); })
                .find("nulls"),
            std::string::npos);
  // An empty array keeps nothing (not an error).
  v1::TopKRequest empty;
  empty.mutable_keys()->mutable_float64();
  empty.set_k(5);
  v1::TopKResponse response;
  ASSERT_TRUE(TopK(empty, &response).ok());
  EXPECT_EQ(LengthOf(response.keys()), 0u);
}

TEST_F(TopKTest, CallsAreCountedAsTopK) {
  v1::TopKRequest request;
  *request.mutable_keys() = Keys("int32", 10, 1);
  request.set_k(3);
  v1::TopKResponse response;
  ASSERT_TRUE(TopK(request, &response).ok());
  request.set_k(0);
  ASSERT_FALSE(TopK(request, &response).ok());
  const std::string text = Scrape(*server_);
  EXPECT_EQ(Sample(text, R"(sortd_requests_total{code="OK",key_type="int32",method="TopK"})"), 1);
  EXPECT_EQ(
      Sample(text,
             R"(sortd_requests_total{code="INVALID_ARGUMENT",key_type="int32",method="TopK"})"),
      1);
}

class SmallMessageTopKTest : public TopKTest {
 protected:
  ServerOptions Options() override {
    ServerOptions options;
    options.max_message_bytes = 1 << 20;
    return options;
  }
};

// A response past the message limit is refused before any work for
// fixed-width keys, and once selected for byte strings; a smaller k fits.
TEST_F(SmallMessageTopKTest, AResponseOverTheLimitIsRefusedNamingK) {
  v1::TopKRequest request;
  *request.mutable_keys() = Keys("uint64", 70000, 1);  // 560 KB: fits
  request.set_k(70000);
  request.set_return_indices(true);  // 1.12 MB of keys and indices back
  v1::TopKResponse response;
  grpc::Status status = TopK(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(status.error_message().find("ask for a smaller k"), std::string::npos);
  v1::TopKRequest strings;
  // 900 KB of strings in; 1.3 MB with their indices back.
  for (int i = 0; i < 50000; ++i) {
    strings.mutable_keys()->mutable_bytes()->add_values(std::string(16, 'a' + i % 26));
  }
  strings.set_k(50000);
  strings.set_return_indices(true);
  status = TopK(strings, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  request.set_k(1000);
  EXPECT_TRUE(TopK(request, &response).ok());
}

class RegionTopKTest : public TopKTest {
 protected:
  ServerOptions Options() override {
    ServerOptions options;
    options.regions.allow_system = true;
    return options;
  }
};

// Keys and values read where they lie in a system region, rows of them,
// answered as the same request inline; the region's bytes unchanged; bad
// references refused naming the field.
TEST_F(RegionTopKTest, KeysAndValuesInARegionAnswerAsInline) {
  auto c = ::sortd::testing::Connect(*server_);
  const size_t n = 60000;
  auto region = client::SharedRegion::Create(*c, "top", n * 4 + n * 8);
  ASSERT_TRUE(region.ok()) << region.status();
  const v1::TypedArray keys = Keys("float32", n, 9, 300);
  const v1::TypedArray values = Keys("int64", n, 10, 1u << 30);
  auto key_span = (*region)->span<float>(n);
  auto value_span = (*region)->span<int64_t>(n, n * 4);
  std::copy(keys.float32().values().begin(), keys.float32().values().end(), key_span.begin());
  std::copy(values.int64().values().begin(), values.int64().values().end(), value_span.begin());
  const std::string before(reinterpret_cast<const char*>((*region)->data()), n * 12);
  v1::TopKRequest by_reference;
  client::ToProto(*(*region)->Ref(key_span.data(), n, v1::ELEMENT_TYPE_FLOAT32),
                  by_reference.mutable_keys_region());
  client::ToProto(*(*region)->Ref(value_span.data(), n, v1::ELEMENT_TYPE_INT64),
                  by_reference.mutable_values_region());
  by_reference.set_k(50);
  by_reference.set_order(v1::SORT_ORDER_DESCENDING);
  by_reference.set_return_indices(true);
  by_reference.set_row_length(1000);
  v1::TopKRequest inline_request = by_reference;
  inline_request.clear_keys_region();
  inline_request.clear_values_region();
  *inline_request.mutable_keys() = keys;
  *inline_request.mutable_values() = values;
  v1::TopKResponse from_region, from_inline;
  grpc::Status status = TopK(by_reference, &from_region);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_TRUE(TopK(inline_request, &from_inline).ok());
  EXPECT_EQ(from_region.SerializeAsString(), from_inline.SerializeAsString());
  EXPECT_EQ(from_region.indices_size(), 60 * 50);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*region)->data()), n * 12), before);

  auto refused = [&](const std::function<void(v1::TopKRequest*)>& edit) {
    v1::TopKRequest request = by_reference;
    edit(&request);
    v1::TopKResponse response;
    grpc::Status status = TopK(request, &response);
    EXPECT_FALSE(status.ok());
    return std::to_string(status.error_code()) + " " + status.error_message();
  };
  EXPECT_NE(refused([](v1::TopKRequest* r) { r->mutable_keys()->mutable_int32()->add_values(1); })
                .find("keys: leave unset when keys_region is set"),
            std::string::npos);
  EXPECT_NE(refused([](v1::TopKRequest* r) { r->mutable_values_region()->set_count(5); })
                .find("values_region: count 5 does not match keys_region's 60000"),
            std::string::npos);
  EXPECT_EQ(refused([](v1::TopKRequest* r) { r->mutable_keys_region()->set_region("nope"); })
                .substr(0, 2),
            "5 ");  // NOT_FOUND
  EXPECT_NE(refused([](v1::TopKRequest* r) { r->mutable_keys_region()->set_count(n * 3); })
                .find("keys_region"),
            std::string::npos);
  EXPECT_NE(refused([](v1::TopKRequest* r) {
              r->clear_keys_region();
              *r->mutable_keys() = Keys("float32", 60000, 1);
            }).find("values_region: needs keys_region"),
            std::string::npos);
}

// Without --shared_memory, a TopK naming a region is refused as Sort's is.
TEST_F(TopKTest, RegionsOffRefuseRegionKeys) {
  v1::TopKRequest request;
  request.mutable_keys_region()->set_region("r");
  request.mutable_keys_region()->set_count(4);
  request.mutable_keys_region()->set_type(v1::ELEMENT_TYPE_UINT32);
  request.set_k(2);
  v1::TopKResponse response;
  grpc::Status status = TopK(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("shared-memory regions are off"), std::string::npos);
}

// The C++ client's TopK: one array and rows, against the Sort.
TEST_F(TopKTest, TheCppClientAsksForKAndRows) {
  auto c = ::sortd::testing::Connect(*server_);
  std::vector<int64_t> keys(5000);
  std::mt19937_64 rng(12);
  for (int64_t& key : keys) key = static_cast<int64_t>(rng() % 100) - 50;
  auto top = c->TopK<int64_t>(keys, 10, v1::SORT_ORDER_DESCENDING, true);
  ASSERT_TRUE(top.ok()) << top.status();
  auto sorted = c->Sort<int64_t>(keys, v1::SORT_ORDER_DESCENDING, true);
  ASSERT_TRUE(sorted.ok());
  EXPECT_EQ(top->keys, std::vector<int64_t>(sorted->keys.begin(), sorted->keys.begin() + 10));
  EXPECT_EQ(top->indices,
            std::vector<uint64_t>(sorted->indices.begin(), sorted->indices.begin() + 10));
  client::TopKSegments rows;
  rows.row_length = 500;
  auto per_row = c->TopK<int64_t>(keys, 3, v1::SORT_ORDER_ASCENDING, true, rows);
  ASSERT_TRUE(per_row.ok()) << per_row.status();
  EXPECT_EQ(per_row->keys.size(), 30u);
  auto first_row = c->Sort<int64_t>(absl::MakeConstSpan(keys.data(), 500),
                                    v1::SORT_ORDER_ASCENDING, true);
  ASSERT_TRUE(first_row.ok());
  EXPECT_EQ(std::vector<uint64_t>(per_row->indices.begin(), per_row->indices.begin() + 3),
            std::vector<uint64_t>(first_row->indices.begin(), first_row->indices.begin() + 3));
  EXPECT_TRUE(absl::IsInvalidArgument(c->TopK<int64_t>(keys, 0).status()));
}

// Past kTopKPieceBytes the C++ client sends pieces (rows, segments, or
// pieces of the array merged by one more call): the same answers as the
// Sort, none over its 1 MiB message limit; an answer too large for one
// message is refused naming k.
TEST_F(TopKTest, TheCppClientSplitsLargeRequestsIntoPieces) {
  client::ClientOptions options;
  options.max_message_bytes = 1 << 20;
  auto c = ::sortd::testing::Connect(*server_, options);
  auto ref = ::sortd::testing::Connect(*server_);  // the reference Sorts' answers are larger
  std::vector<int64_t> keys(1 << 20);  // 8 MiB
  std::mt19937_64 rng(13);
  for (int64_t& key : keys) key = static_cast<int64_t>(rng() % 3000);
  auto sorted = ref->Sort<int64_t>(keys, v1::SORT_ORDER_DESCENDING, true);
  ASSERT_TRUE(sorted.ok()) << sorted.status();
  for (uint64_t k : {uint64_t{1}, uint64_t{100}, uint64_t{40000}}) {
    auto top = c->TopK<int64_t>(keys, k, v1::SORT_ORDER_DESCENDING, true);
    ASSERT_TRUE(top.ok()) << top.status();
    EXPECT_EQ(top->indices,
              std::vector<uint64_t>(sorted->indices.begin(), sorted->indices.begin() + k));
    EXPECT_EQ(top->keys, std::vector<int64_t>(sorted->keys.begin(), sorted->keys.begin() + k));
  }
  EXPECT_TRUE(absl::IsInvalidArgument(c->TopK<int64_t>(keys, 500000).status()));
  // Rows of 4096, and ragged segments with empty ones.
  client::TopKSegments rows;
  rows.row_length = 4096;
  auto per_row = c->TopK<int64_t>(keys, 3, v1::SORT_ORDER_ASCENDING, true, rows);
  ASSERT_TRUE(per_row.ok()) << per_row.status();
  ASSERT_EQ(per_row->indices.size(), 256u * 3);
  client::TopKSegments ragged;
  // Each segment fits one message (800 KB at most), the whole does not.
  ragged.lengths = {0, 100000, 3, 0};
  for (int i = 0; i < 9; ++i) ragged.lengths.push_back(100000);
  ragged.lengths.push_back((1 << 20) - 1000003);
  auto per_segment = c->TopK<int64_t>(keys, 2, v1::SORT_ORDER_ASCENDING, true, ragged);
  ASSERT_TRUE(per_segment.ok()) << per_segment.status();
  std::vector<uint64_t> want_counts = {0, 2, 2, 0};
  want_counts.resize(ragged.lengths.size(), 2);
  EXPECT_EQ(per_segment->segment_counts, want_counts);
  // A segment of 600000 keys (4.8 MB) cannot be one message.
  client::TopKSegments too_long;
  too_long.lengths = {100000, 600000, (1 << 20) - 700000};
  auto refused = c->TopK<int64_t>(keys, 2, v1::SORT_ORDER_ASCENDING, true, too_long);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  size_t begin = 0, at = 0;
  for (size_t s = 0; s < ragged.lengths.size(); ++s) {
    const size_t length = ragged.lengths[s];
    if (length > 0) {
      auto want = ref->Sort<int64_t>(absl::MakeConstSpan(keys.data() + begin, length),
                                   v1::SORT_ORDER_ASCENDING, true);
      ASSERT_TRUE(want.ok());
      EXPECT_EQ(std::vector<uint64_t>(per_segment->indices.begin() + at,
                                      per_segment->indices.begin() + at + 2),
                std::vector<uint64_t>(want->indices.begin(), want->indices.begin() + 2))
          << "segment " << s;
      at += 2;
    }
    begin += length;
  }
  for (size_t r : {size_t{0}, size_t{255}}) {
    auto want = ref->Sort<int64_t>(absl::MakeConstSpan(keys.data() + r * 4096, 4096),
                                 v1::SORT_ORDER_ASCENDING, true);
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(std::vector<uint64_t>(per_row->indices.begin() + r * 3,
                                    per_row->indices.begin() + r * 3 + 3),
              std::vector<uint64_t>(want->indices.begin(), want->indices.begin() + 3));
  }
}

}  // namespace
}  // namespace sortd
