// SortTable through the real service: tables of several key columns of
// different types (numeric, byte strings, converted), each key with its own
// order and null placement, nulls from validity bitmaps and NaT; every
// answer compared with a stable lexicographic sort in the test; bad tables
// refused naming the column or key, nothing sorted.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "client/sortd_client.h"
#include "sortd/v1/sort.grpc.pb.h"
#include "server/wire/session_spec.h"
#include "tests/service/test_server.h"

namespace sortd {
namespace {

using ::sortd::testing::Scrape;
using ::sortd::testing::ScrapeUntil;
using ::sortd::testing::StartServer;
using ::sortd::testing::Target;

constexpr int64_t kNaT = std::numeric_limits<int64_t>::min();

// One cell as the reference compares it: a null flag, then a value.
struct Cell {
  bool null = false;
  double number = 0;   // numeric columns (exact for the values used here)
  std::string bytes;   // byte-string columns
};

// -1 / 0 / 1 in sortd's order of values (floats: NaN last and equal,
// -0.0 before +0.0).
int CompareValues(const Cell& a, const Cell& b, bool is_bytes) {
  if (is_bytes) return a.bytes < b.bytes ? -1 : (b.bytes < a.bytes ? 1 : 0);
  const bool an = std::isnan(a.number), bn = std::isnan(b.number);
  if (an || bn) return an == bn ? 0 : (an ? 1 : -1);
  if (a.number == 0 && b.number == 0) return int(std::signbit(b.number)) - int(std::signbit(a.number));
  return a.number < b.number ? -1 : (a.number > b.number ? 1 : 0);
}

struct RefColumn {
  std::vector<Cell> cells;
  bool is_bytes = false;
};

struct RefKey {
  int column;
  bool descending;
  bool nulls_first;
};

std::vector<uint64_t> ReferenceOrder(const std::vector<RefColumn>& columns, const std::vector<RefKey>& by) {
  std::vector<uint64_t> perm(columns[0].cells.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](uint64_t x, uint64_t y) {
    for (const RefKey& key : by) {
      const RefColumn& c = columns[key.column];
      const Cell &a = c.cells[x], &b = c.cells[y];
      if (a.null != b.null) return key.nulls_first ? a.null : b.null;
      if (a.null) continue;
      const int cmp = CompareValues(a, b, c.is_bytes);
      if (cmp != 0) return key.descending ? cmp > 0 : cmp < 0;
    }
    return false;
  });
  return perm;
}

std::string Bitmap(const std::vector<Cell>& cells) {
  std::string bits((cells.size() + 7) / 8, '\0');
  for (size_t i = 0; i < cells.size(); ++i) {
    if (!cells[i].null) bits[i / 8] = char(bits[i / 8] | (1 << (i % 8)));
  }
  return bits;
}

// Sort sessions the server counted OK (sortd_requests_total, every key type).
double SessionsOk(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  double total = 0;
  while (std::getline(in, line)) {
    if (line.rfind("sortd_requests_total{", 0) == 0 && line.find("method=\"SortSession\"") != std::string::npos &&
        line.find("code=\"OK\"") != std::string::npos) {
      total += std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return total;
}

class TableSortTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServer();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::SortService::NewStub(grpc::CreateChannel(Target(*server_), grpc::InsecureChannelCredentials()));
  }
  grpc::Status SortTable(const v1::SortTableRequest& request, v1::SortTableResponse* response) {
    grpc::ClientContext ctx;
    return stub_->SortTable(&ctx, request, response);
  }
  std::unique_ptr<SortdServer> server_;
  std::unique_ptr<v1::SortService::Stub> stub_;
};

// A table of int32 (with nulls), float32 (NaN, +-0, nulls), bytes, int16
// (converted), datetime64 (NaT and nulls) and uint64 columns, few distinct
// values so that later keys decide; several key lists, orders and null
// placements; sizes around the inline, batch and GPU-routing limits.
TEST_F(TableSortTest, RowsFollowEveryKeyInTurnStablyWithNullsPlaced) {
  std::mt19937_64 rng(21);
  for (size_t rows : {size_t{0}, size_t{1}, size_t{9}, size_t{1500}, size_t{40000}}) {
    std::vector<RefColumn> ref(6);
    ref[2].is_bytes = true;
    v1::SortTableRequest request;
    request.set_return_columns(true);
    auto* c0 = request.add_columns();
    c0->set_name("i32");
    auto* c1 = request.add_columns();
    c1->set_name("f32");
    auto* c2 = request.add_columns();
    c2->set_name("name");
    auto* c3 = request.add_columns();
    auto* c4 = request.add_columns();
    c4->set_name("ts");
    auto* c5 = request.add_columns();
    c5->set_name("u64");
    std::string int16_bytes;
    c4->mutable_values()->mutable_datetime64()->set_unit(v1::TIME_UNIT_NANOSECOND);
    const float specials[] = {0.0f, -0.0f, NAN, -NAN, INFINITY, -1.5f, 2.5f};
    for (size_t i = 0; i < rows; ++i) {
      Cell a;
      a.null = rng() % 5 == 0;
      const int32_t v0 = int32_t(rng() % 7) - 3;
      a.number = v0;
      c0->mutable_values()->mutable_int32()->add_values(a.null ? 12345 : v0);  // a null's value is ignored
      ref[0].cells.push_back(a);
      Cell b;
      b.null = rng() % 6 == 0;
      const float f = specials[rng() % 7];
      b.number = f;
      c1->mutable_values()->mutable_float32()->add_values(f);
      ref[1].cells.push_back(b);
      Cell s;
      s.bytes = std::string(1 + rng() % 2, char('a' + rng() % 3));
      c2->mutable_values()->mutable_bytes()->add_values(s.bytes);
      ref[2].cells.push_back(s);
      Cell h;
      const int16_t v3 = int16_t(int(rng() % 5) - 2);
      h.number = v3;
      int16_bytes.push_back(char(uint16_t(v3) & 0xFF));
      int16_bytes.push_back(char(uint16_t(v3) >> 8));
      ref[3].cells.push_back(h);
      Cell t;
      const int pick = int(rng() % 8);
      const int64_t tv = pick == 0 ? kNaT : int64_t(rng() % 4) * 1000;
      t.null = pick == 0 || rng() % 9 == 0;  // NaT, or a bitmap null
      t.number = double(tv);
      c4->mutable_values()->mutable_datetime64()->add_values(tv);
      ref[4].cells.push_back(t);
      Cell u;
      const uint64_t uv = (rng() % 3) << 60;
      u.number = double(uv);
      c5->mutable_values()->mutable_uint64()->add_values(uv);
      ref[5].cells.push_back(u);
    }
    *c3->mutable_values()->mutable_int16()->mutable_values() = int16_bytes;
    c0->set_validity(Bitmap(ref[0].cells));
    c1->set_validity(Bitmap(ref[1].cells));
    // NaT is a null by itself; the bitmap marks the others.
    std::vector<Cell> ts_bitmap = ref[4].cells;
    for (size_t i = 0; i < rows; ++i) ts_bitmap[i].null = ref[4].cells[i].null && c4->values().datetime64().values(int(i)) != kNaT;
    c4->set_validity(Bitmap(ts_bitmap));
    if (rows == 0) {
      // Every column set, even empty.
      c1->mutable_values()->mutable_float32();
      c2->mutable_values()->mutable_bytes();
      c5->mutable_values()->mutable_uint64();
      c0->mutable_values()->mutable_int32();
    }
    const std::vector<std::vector<RefKey>> key_lists = {
        {{0, false, false}},
        {{0, true, true}, {1, false, false}},
        {{2, false, false}, {1, true, true}, {0, false, true}},
        {{3, true, false}, {4, false, true}, {5, true, false}, {2, true, false}},
        {{4, true, false}, {0, false, false}, {1, false, true}, {3, false, false}, {2, false, false}},
    };
    for (const auto& by : key_lists) {
      SCOPED_TRACE("rows=" + std::to_string(rows) + " keys=" + std::to_string(by.size()));
      request.clear_by();
      for (const RefKey& k : by) {
        v1::SortKey* key = request.add_by();
        key->set_column(uint32_t(k.column));
        key->set_order(k.descending ? v1::SORT_ORDER_DESCENDING : v1::SORT_ORDER_ASCENDING);
        key->set_nulls(k.nulls_first ? v1::NULL_PLACEMENT_FIRST : v1::NULL_PLACEMENT_LAST);
      }
      v1::SortTableResponse response;
      grpc::Status status = SortTable(request, &response);
      ASSERT_TRUE(status.ok()) << status.error_message();
      const std::vector<uint64_t> expected = ReferenceOrder(ref, by);
      ASSERT_EQ(std::vector<uint64_t>(response.indices().begin(), response.indices().end()), expected);
      // The columns come back reordered, bitmaps too.
      ASSERT_EQ(response.columns_size(), 6);
      EXPECT_EQ(response.columns(0).name(), "i32");
      for (size_t i = 0; i < rows; ++i) {
        ASSERT_EQ(response.columns(2).values().bytes().values(int(i)), ref[2].cells[expected[i]].bytes);
        ASSERT_EQ(response.columns(5).values().uint64().values(int(i)),
                  request.columns(5).values().uint64().values(int(expected[i])));
        const bool valid = (uint8_t(response.columns(0).validity()[i / 8]) >> (i % 8)) & 1;
        ASSERT_EQ(valid, !ref[0].cells[expected[i]].null);
      }
      EXPECT_EQ(response.columns(3).values().int16().values().size(), rows * 2);
      EXPECT_EQ(response.columns(4).values().datetime64().unit(), v1::TIME_UNIT_NANOSECOND);
    }
  }
}

// The C++ client's table sessions (session_min_bytes 1: every fixed-width
// table; parts of 512 bytes over 3 connections, bitmaps split too) answer
// as one SortTable message does: the permutation, and every column and
// bitmap reordered, byte for byte.
TEST_F(TableSortTest, TheClientsTableSessionsAnswerAsOneMessage) {
  std::mt19937_64 rng(5);
  client::ClientOptions options;
  options.session_min_bytes = 1;
  options.connections = 3;
  options.part_bytes = 512;
  auto c = client::SortClient::Connect(Target(*server_), options);
  ASSERT_TRUE(c.ok()) << c.status();
  for (size_t rows : {size_t{1}, size_t{77}, size_t{3001}}) {
    v1::SortTableRequest request;
    request.set_return_columns(true);
    request.set_request_id("table-session-" + std::to_string(rows));
    auto* i32 = request.add_columns();
    i32->set_name("i32");
    auto* f32 = request.add_columns();
    auto* i16 = request.add_columns();
    auto* ts = request.add_columns();
    ts->mutable_values()->mutable_datetime64()->set_unit(v1::TIME_UNIT_SECOND);
    auto* flag = request.add_columns();
    std::string i16_bytes, flags;
    std::vector<Cell> nulls(rows), ts_nulls(rows);
    for (size_t i = 0; i < rows; ++i) {
      i32->mutable_values()->mutable_int32()->add_values(int32_t(rng() % 9) - 4);
      const float specials[] = {0.0f, -0.0f, NAN, 1.5f, -2.0f};
      f32->mutable_values()->mutable_float32()->add_values(specials[rng() % 5]);
      const uint16_t h = uint16_t(rng() % 4);
      i16_bytes.push_back(char(h & 0xFF));
      i16_bytes.push_back(char(h >> 8));
      ts->mutable_values()->mutable_datetime64()->add_values(rng() % 7 == 0 ? kNaT : int64_t(rng() % 5));
      flags.push_back(char(rng() % 2));
      nulls[i].null = rng() % 4 == 0;
      ts_nulls[i].null = rng() % 6 == 0;
    }
    *i16->mutable_values()->mutable_int16()->mutable_values() = i16_bytes;
    *flag->mutable_values()->mutable_boolean()->mutable_values() = flags;
    i32->set_validity(Bitmap(nulls));
    ts->set_validity(Bitmap(ts_nulls));
    for (auto [column, descending, first] : {std::tuple{4, true, false}, std::tuple{0, false, true},
                                             std::tuple{3, true, true}, std::tuple{1, false, false},
                                             std::tuple{2, true, false}}) {
      v1::SortKey* key = request.add_by();
      key->set_column(uint32_t(column));
      key->set_order(descending ? v1::SORT_ORDER_DESCENDING : v1::SORT_ORDER_ASCENDING);
      key->set_nulls(first ? v1::NULL_PLACEMENT_FIRST : v1::NULL_PLACEMENT_LAST);
    }
    SCOPED_TRACE("rows=" + std::to_string(rows));
    v1::SortTableResponse one;
    grpc::Status status = SortTable(request, &one);
    ASSERT_TRUE(status.ok()) << status.error_message();
    const double sessions_before = SessionsOk(Scrape(*server_));
    absl::StatusOr<v1::SortTableResponse> session = (*c)->SortTable(request);
    ASSERT_TRUE(session.ok()) << session.status();
    // Counted when the session ends (the client ends it before returning).
    EXPECT_EQ(SessionsOk(ScrapeUntil(*server_, [&](const std::string& text) {
                return SessionsOk(text) == sessions_before + 1;
              })),
              sessions_before + 1);
    EXPECT_EQ(session->request_id(), request.request_id());
    ASSERT_EQ(std::vector<uint64_t>(session->indices().begin(), session->indices().end()),
              std::vector<uint64_t>(one.indices().begin(), one.indices().end()));
    ASSERT_EQ(session->columns_size(), one.columns_size());
    for (int k = 0; k < one.columns_size(); ++k) {
      EXPECT_EQ(session->columns(k).SerializeAsString(), one.columns(k).SerializeAsString()) << "column " << k;
    }
  }
}

TEST_F(TableSortTest, MalformedTablesAreRefusedNamingTheColumnOrKey) {
  auto table = [] {
    v1::SortTableRequest r;
    auto* a = r.add_columns();
    a->set_name("a");
    a->mutable_values()->mutable_int32()->add_values(1);
    a->mutable_values()->mutable_int32()->add_values(2);
    auto* b = r.add_columns();
    b->set_name("b");
    b->mutable_values()->mutable_float64()->add_values(1);
    b->mutable_values()->mutable_float64()->add_values(2);
    r.add_by()->set_column(0);
    return r;
  };
  struct Bad {
    std::function<void(v1::SortTableRequest*)> change;
    const char* message;
  };
  const std::vector<Bad> cases = {
      {[](v1::SortTableRequest* r) { r->clear_columns(); }, "columns: required"},
      {[](v1::SortTableRequest* r) { r->mutable_columns(1)->mutable_values()->mutable_float64()->add_values(3); },
       "columns[1] (\"b\"): 3 rows, but columns[0] (\"a\") has 2"},
      {[](v1::SortTableRequest* r) { r->mutable_columns(1)->clear_values(); }, "columns[1] (\"b\").values: required"},
      {[](v1::SortTableRequest* r) {
         r->mutable_columns(0)->mutable_values()->mutable_int16()->set_values("abc");
       },
       "columns[0] (\"a\").values.int16: 3 bytes"},
      {[](v1::SortTableRequest* r) {
         for (int i = 0; i < 20; ++i) r->mutable_columns(0)->mutable_values()->mutable_int32()->add_values(i);
         for (int i = 0; i < 20; ++i) r->mutable_columns(1)->mutable_values()->mutable_float64()->add_values(i);
         r->mutable_columns(1)->set_validity(std::string(2, '\xff'));
       },
       "columns[1] (\"b\").validity: 2 bytes for 22 rows (needs 3"},
      {[](v1::SortTableRequest* r) { r->clear_by(); }, "by: required"},
      {[](v1::SortTableRequest* r) {
         for (int i = 0; i < 32; ++i) r->add_by()->set_column(1);
       },
       "by: 33 keys, at most 32"},
      {[](v1::SortTableRequest* r) { r->mutable_by(0)->set_column(2); }, "by[0].column: 2, but the table has 2 columns"},
      {[](v1::SortTableRequest* r) { r->add_by()->set_order(static_cast<v1::SortOrder>(4)); }, "by[1].order: unknown value 4"},
      {[](v1::SortTableRequest* r) { r->add_by()->set_nulls(static_cast<v1::NullPlacement>(3)); }, "by[1].nulls: unknown value 3"},
      {[](v1::SortTableRequest* r) {
         r->mutable_columns(0)->mutable_values()->clear_int32();
         r->mutable_columns(0)->mutable_values()->mutable_datetime64()->add_values(1);
         r->mutable_columns(0)->mutable_values()->mutable_datetime64()->add_values(2);
       },
       "columns[0] (\"a\").values.datetime64.unit: required"},
  };
  const double sorted_before = testing::CpuKeysSorted(*server_);
  for (const Bad& bad : cases) {
    v1::SortTableRequest request = table();
    bad.change(&request);
    v1::SortTableResponse response;
    grpc::Status status = SortTable(request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad.message;
    EXPECT_NE(status.error_message().find(bad.message), std::string::npos)
        << "got: " << status.error_message() << "; want: " << bad.message;
  }
  EXPECT_EQ(testing::CpuKeysSorted(*server_), sorted_before);
  // The well-formed table sorts, and is counted as SortTable.
  v1::SortTableResponse response;
  ASSERT_TRUE(SortTable(table(), &response).ok());
  EXPECT_EQ(response.indices_size(), 2);
  const std::string text = testing::ScrapeUntil(*server_, [](const std::string& t) {
    return testing::Sample(t, R"(sortd_requests_total{code="OK",key_type="int32",method="SortTable"})") >= 1;
  });
  EXPECT_EQ(testing::Sample(text, R"(sortd_requests_total{code="OK",key_type="int32",method="SortTable"})"), 1);
}

// The C++ client's SortTable: the request as built, the permutation back;
// a server refusal comes back as the status the server sent.
TEST_F(TableSortTest, CppClientSortsATable) {
  auto client = testing::Connect(*server_);
  v1::SortTableRequest request;
  auto* name = request.add_columns();
  name->set_name("name");
  for (const char* s : {"b", "a", "b", "a"}) name->mutable_values()->mutable_bytes()->add_values(s);
  auto* score = request.add_columns();
  score->set_name("score");
  for (int32_t v : {1, 5, 3, 5}) score->mutable_values()->mutable_int32()->add_values(v);
  auto* key = request.add_by();
  key->set_column(0);
  key = request.add_by();
  key->set_column(1);
  key->set_order(v1::SORT_ORDER_DESCENDING);
  absl::StatusOr<v1::SortTableResponse> response = client->SortTable(request);
  ASSERT_TRUE(response.ok()) << response.status();
  // a/5 (row 1), a/5 (row 3), b/3 (row 2), b/1 (row 0).
  EXPECT_EQ(std::vector<uint64_t>(response->indices().begin(), response->indices().end()),
            (std::vector<uint64_t>{1, 3, 2, 0}));
  request.mutable_by(0)->set_column(7);
  response = client->SortTable(request);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(response.status().message().find("by[0].column: 7"), std::string::npos) << response.status();
}

}  // namespace
}  // namespace sortd

namespace sortd {
namespace {

// Which table sessions sort their column as keys alone: one column, its one
// key, no bitmap, no permutation kept, reordered, and not a 16-bit float.
TEST(TableSessionSpecTest, OnlyOneBareKeyColumnWithoutPermutationSortsAsKeys) {
  auto spec = [](v1::ElementType type, auto edit) {
    v1::StartSortSessionRequest start;
    start.set_total_keys(10);
    start.set_return_columns(true);
    start.set_without_permutation(true);
    v1::SessionColumn* column = start.add_columns();
    column->set_type(type);
    column->set_unit(v1::TIME_UNIT_SECOND);
    start.add_by()->set_column(0);
    edit(start);
    absl::StatusOr<SessionSpec> out = SessionSpecFromProto(start);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() && out->sorts_column_as_keys();
  };
  auto same = [](v1::StartSortSessionRequest&) {};
  for (v1::ElementType type : {v1::ELEMENT_TYPE_INT8, v1::ELEMENT_TYPE_UINT16, v1::ELEMENT_TYPE_BOOL,
                               v1::ELEMENT_TYPE_DATETIME64, v1::ELEMENT_TYPE_TIMEDELTA64,
                               v1::ELEMENT_TYPE_UINT32, v1::ELEMENT_TYPE_FLOAT64}) {
    EXPECT_TRUE(spec(type, same)) << v1::ElementType_Name(type);
  }
  EXPECT_FALSE(spec(v1::ELEMENT_TYPE_FLOAT16, same));
  EXPECT_FALSE(spec(v1::ELEMENT_TYPE_BFLOAT16, same));
  EXPECT_FALSE(spec(v1::ELEMENT_TYPE_INT16, [](auto& s) { s.set_without_permutation(false); }));
  EXPECT_FALSE(spec(v1::ELEMENT_TYPE_INT16, [](auto& s) { s.set_return_columns(false); }));
  EXPECT_FALSE(spec(v1::ELEMENT_TYPE_INT16, [](auto& s) { s.mutable_columns(0)->set_has_validity(true); }));
  EXPECT_FALSE(spec(v1::ELEMENT_TYPE_INT16, [](auto& s) { s.add_columns()->set_type(v1::ELEMENT_TYPE_INT8); }));
  EXPECT_FALSE(spec(v1::ELEMENT_TYPE_INT16, [](auto& s) { s.add_by()->set_column(0); }));
  // And a plain session refuses the field.
  v1::StartSortSessionRequest plain;
  plain.set_key_type(v1::ELEMENT_TYPE_UINT32);
  plain.set_without_permutation(true);
  EXPECT_FALSE(SessionSpecFromProto(plain).ok());
}

}  // namespace
}  // namespace sortd
