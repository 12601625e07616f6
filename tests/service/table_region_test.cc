// SortTable over columns in same-host regions (TableColumn.values_region,
// validity_region, indices_region): every answer equals the same table's
// answer in one message (whose order table_sort_test checks against a
// reference), the region columns reordered where they lie; bad references
// are refused naming the field, the region's bytes untouched.
#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "client/shared_region.h"
#include "client/sortd_client.h"
#include "tests/service/test_server.h"

namespace sortd::testing {
namespace {

using client::SharedRegion;

constexpr int64_t kNaT = std::numeric_limits<int64_t>::min();

// A column's raw bytes, its type, and its bitmap (empty: no nulls), as
// they lie in a region and as a message carries them.
struct RawColumn {
  std::string name;
  v1::ElementType type;
  std::string bytes;
  std::string validity;
  bool validity_in_region = false;
};

template <typename T>
std::string BytesOf(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// A table of int32 (nulls, bitmap in the region), float32 (specials),
// int16, datetime64 (NaT, and nulls with the bitmap in the message) and
// bool, few distinct values so that later keys decide.
std::vector<RawColumn> MakeTable(size_t rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> i32(rows);
  std::vector<float> f32(rows);
  std::vector<int16_t> i16(rows);
  std::vector<int64_t> ts(rows);
  std::vector<uint8_t> flags(rows);
  std::string i32_bits((rows + 7) / 8, '\0'), ts_bits((rows + 7) / 8, '\0');
  const float specials[] = {0.0f, -0.0f, NAN, 1.5f, -2.0f};
  for (size_t i = 0; i < rows; ++i) {
    i32[i] = int32_t(rng() % 9) - 4;
    f32[i] = specials[rng() % 5];
    i16[i] = int16_t(int(rng() % 7) - 3);
    ts[i] = rng() % 7 == 0 ? kNaT : int64_t(rng() % 5);
    flags[i] = uint8_t(rng() % 2);
    if (rng() % 4 != 0) i32_bits[i / 8] = char(i32_bits[i / 8] | (1 << (i % 8)));
    if (rng() % 6 != 0) ts_bits[i / 8] = char(ts_bits[i / 8] | (1 << (i % 8)));
  }
  return {{"i32", v1::ELEMENT_TYPE_INT32, BytesOf(i32), i32_bits, true},
          {"f32", v1::ELEMENT_TYPE_FLOAT32, BytesOf(f32), "", false},
          {"i16", v1::ELEMENT_TYPE_INT16, BytesOf(i16), "", false},
          {"ts", v1::ELEMENT_TYPE_DATETIME64, BytesOf(ts), ts_bits, false},
          {"flag", v1::ELEMENT_TYPE_BOOL, BytesOf(flags), "", false}};
}

// The column as a message carries it.
void SetInline(const RawColumn& raw, size_t rows, v1::TableColumn* column) {
  column->set_name(raw.name);
  column->set_validity(raw.validity);
  v1::TypedArray* values = column->mutable_values();
  switch (raw.type) {
    case v1::ELEMENT_TYPE_INT32:
      values->mutable_int32()->mutable_values()->Resize(int(rows), 0);
      std::memcpy(values->mutable_int32()->mutable_values()->mutable_data(), raw.bytes.data(), raw.bytes.size());
      break;
    case v1::ELEMENT_TYPE_FLOAT32:
      values->mutable_float32()->mutable_values()->Resize(int(rows), 0);
      std::memcpy(values->mutable_float32()->mutable_values()->mutable_data(), raw.bytes.data(), raw.bytes.size());
      break;
    case v1::ELEMENT_TYPE_INT16: values->mutable_int16()->set_values(raw.bytes); break;
    case v1::ELEMENT_TYPE_BOOL: values->mutable_boolean()->set_values(raw.bytes); break;
    case v1::ELEMENT_TYPE_DATETIME64:
      values->mutable_datetime64()->set_unit(v1::TIME_UNIT_SECOND);
      values->mutable_datetime64()->mutable_values()->Resize(int(rows), 0);
      std::memcpy(values->mutable_datetime64()->mutable_values()->mutable_data(), raw.bytes.data(), raw.bytes.size());
      break;
    default: FAIL() << "no such column type in this test";
  }
}

// The bytes of a response's column values, as a region would hold them.
std::string RawBytes(const v1::TypedArray& values) {
  if (values.has_int32()) {
    return std::string(reinterpret_cast<const char*>(values.int32().values().data()), 4 * values.int32().values_size());
  }
  if (values.has_float32()) {
    return std::string(reinterpret_cast<const char*>(values.float32().values().data()), 4 * values.float32().values_size());
  }
  if (values.has_int16()) return values.int16().values();
  if (values.has_boolean()) return values.boolean().values();
  if (values.has_datetime64()) {
    return std::string(reinterpret_cast<const char*>(values.datetime64().values().data()),
                       8 * values.datetime64().values_size());
  }
  return "";
}

void AddKeys(v1::SortTableRequest* request) {
  for (auto [column, descending, first] : {std::tuple{4, true, false}, std::tuple{0, false, true},
                                           std::tuple{3, true, true}, std::tuple{1, false, false},
                                           std::tuple{2, true, false}}) {
    v1::SortKey* key = request->add_by();
    key->set_column(uint32_t(column));
    key->set_order(descending ? v1::SORT_ORDER_DESCENDING : v1::SORT_ORDER_ASCENDING);
    key->set_nulls(first ? v1::NULL_PLACEMENT_FIRST : v1::NULL_PLACEMENT_LAST);
  }
}

size_t AlignUp8(size_t n) { return (n + 7) / 8 * 8; }

// Where each column (and bitmap, and the permutation) lies in the region.
struct Layout {
  std::vector<size_t> values, validity;
  size_t indices = 0;
  size_t bytes = 0;
};

Layout LayOut(const std::vector<RawColumn>& table, size_t rows) {
  Layout layout;
  size_t at = 0;
  for (const RawColumn& raw : table) {
    layout.values.push_back(at);
    at = AlignUp8(at + raw.bytes.size());
    layout.validity.push_back(at);
    if (raw.validity_in_region) at = AlignUp8(at + raw.validity.size());
  }
  layout.indices = at;
  layout.bytes = at + 8 * rows + 8;
  return layout;
}

v1::RegionSlice SliceAt(const std::string& region, size_t offset, size_t count, v1::ElementType type) {
  v1::RegionSlice slice;
  slice.set_region(region);
  slice.set_offset(offset);
  slice.set_count(count);
  slice.set_type(type);
  return slice;
}

// Copies the table into the region and builds the request naming it.
v1::SortTableRequest RegionRequest(const std::vector<RawColumn>& table, size_t rows, const Layout& layout,
                                   SharedRegion& region, bool indices_in_region) {
  v1::SortTableRequest request;
  request.set_return_columns(true);
  for (size_t c = 0; c < table.size(); ++c) {
    const RawColumn& raw = table[c];
    std::memcpy(region.data() + layout.values[c], raw.bytes.data(), raw.bytes.size());
    v1::TableColumn* column = request.add_columns();
    column->set_name(raw.name);
    *column->mutable_values_region() = SliceAt(region.name(), layout.values[c], rows, raw.type);
    if (raw.type == v1::ELEMENT_TYPE_DATETIME64) column->set_unit(v1::TIME_UNIT_SECOND);
    if (raw.validity_in_region) {
      std::memcpy(region.data() + layout.validity[c], raw.validity.data(), raw.validity.size());
      *column->mutable_validity_region() =
          SliceAt(region.name(), layout.validity[c], raw.validity.size(), v1::ELEMENT_TYPE_UINT8);
    } else {
      column->set_validity(raw.validity);
    }
  }
  if (indices_in_region) {
    *request.mutable_indices_region() = SliceAt(region.name(), layout.indices, rows, v1::ELEMENT_TYPE_UINT64);
  }
  AddKeys(&request);
  return request;
}

class TableRegionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.regions.allow_system = true;
    server_ = StartServer(options);
    ASSERT_NE(server_, nullptr);
    client_ = Connect(*server_);
    ASSERT_NE(client_, nullptr);
  }
  std::unique_ptr<SortdServer> server_;
  std::unique_ptr<client::SortClient> client_;
};

TEST_F(TableRegionTest, RegionColumnsAnswerAsOneMessageReorderedInPlace) {
  for (size_t rows : {size_t{1}, size_t{77}, size_t{3001}, size_t{70000}}) {
    for (bool indices_in_region : {false, true}) {
      SCOPED_TRACE("rows=" + std::to_string(rows) + " indices_in_region=" + std::to_string(indices_in_region));
      const std::vector<RawColumn> table = MakeTable(rows, rows + indices_in_region);
      v1::SortTableRequest message;
      message.set_return_columns(true);
      for (const RawColumn& raw : table) SetInline(raw, rows, message.add_columns());
      AddKeys(&message);
      absl::StatusOr<v1::SortTableResponse> expected = client_->SortTable(message);
      ASSERT_TRUE(expected.ok()) << expected.status();

      const Layout layout = LayOut(table, rows);
      auto region = SharedRegion::Create(*client_, "table", layout.bytes);
      ASSERT_TRUE(region.ok()) << region.status();
      const v1::SortTableRequest request = RegionRequest(table, rows, layout, **region, indices_in_region);
      absl::StatusOr<v1::SortTableResponse> got = client_->SortTable(request);
      ASSERT_TRUE(got.ok()) << got.status();

      const std::vector<uint64_t> want(expected->indices().begin(), expected->indices().end());
      if (indices_in_region) {
        EXPECT_EQ(got->indices_size(), 0);
        auto slots = (*region)->span<uint64_t>(rows, layout.indices);
        EXPECT_EQ(std::vector<uint64_t>(slots.begin(), slots.end()), want);
      } else {
        EXPECT_EQ(std::vector<uint64_t>(got->indices().begin(), got->indices().end()), want);
      }
      ASSERT_EQ(got->columns_size(), int(table.size()));
      for (size_t c = 0; c < table.size(); ++c) {
        const RawColumn& raw = table[c];
        const v1::TableColumn& reference = expected->columns(int(c));
        EXPECT_EQ(got->columns(int(c)).name(), raw.name);
        EXPECT_FALSE(got->columns(int(c)).has_values()) << raw.name << ": lay in a region, came back inline";
        const std::string in_region(reinterpret_cast<const char*>((*region)->data() + layout.values[c]),
                                    raw.bytes.size());
        EXPECT_EQ(in_region, RawBytes(reference.values())) << raw.name;
        if (raw.validity_in_region) {
          const std::string bits(reinterpret_cast<const char*>((*region)->data() + layout.validity[c]),
                                 raw.validity.size());
          EXPECT_EQ(bits, reference.validity()) << raw.name;
          EXPECT_TRUE(got->columns(int(c)).validity().empty());
        } else {
          EXPECT_EQ(got->columns(int(c)).validity(), reference.validity()) << raw.name;
        }
      }
    }
  }
}

TEST_F(TableRegionTest, WithoutReturnColumnsTheRegionIsOnlyRead) {
  const size_t rows = 5000;
  const std::vector<RawColumn> table = MakeTable(rows, 9);
  v1::SortTableRequest message;
  for (const RawColumn& raw : table) SetInline(raw, rows, message.add_columns());
  AddKeys(&message);
  absl::StatusOr<v1::SortTableResponse> expected = client_->SortTable(message);
  ASSERT_TRUE(expected.ok()) << expected.status();
  const Layout layout = LayOut(table, rows);
  auto region = SharedRegion::Create(*client_, "read-only", layout.bytes);
  ASSERT_TRUE(region.ok()) << region.status();
  v1::SortTableRequest request = RegionRequest(table, rows, layout, **region, /*indices_in_region=*/false);
  request.set_return_columns(false);
  const std::string before(reinterpret_cast<const char*>((*region)->data()), layout.bytes);
  absl::StatusOr<v1::SortTableResponse> got = client_->SortTable(request);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(std::vector<uint64_t>(got->indices().begin(), got->indices().end()),
            std::vector<uint64_t>(expected->indices().begin(), expected->indices().end()));
  EXPECT_EQ(got->columns_size(), 0);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*region)->data()), layout.bytes), before);
}

TEST_F(TableRegionTest, BadReferencesAreRefusedNamingTheFieldAndTouchNothing) {
  const size_t rows = 300;
  const std::vector<RawColumn> table = MakeTable(rows, 3);
  const Layout layout = LayOut(table, rows);
  auto region = SharedRegion::Create(*client_, "bad", layout.bytes);
  ASSERT_TRUE(region.ok()) << region.status();
  const v1::SortTableRequest good = RegionRequest(table, rows, layout, **region, /*indices_in_region=*/true);
  const std::string before(reinterpret_cast<const char*>((*region)->data()), layout.bytes);
  using Edit = std::function<void(v1::SortTableRequest&)>;
  const std::vector<std::tuple<std::string, Edit, absl::StatusCode, std::string>> cases = {
      {"values and values_region", [](auto& r) { r.mutable_columns(1)->mutable_values()->mutable_float32()->add_values(1); },
       absl::StatusCode::kInvalidArgument, "columns[1] (\"f32\").values: leave unset when values_region is set"},
      {"a column's count", [](auto& r) { r.mutable_columns(2)->mutable_values_region()->set_count(rows - 1); },
       absl::StatusCode::kInvalidArgument, "columns[2] (\"i16\").values_region.count: 299 rows, but the table has 300"},
      {"a unit missing", [](auto& r) { r.mutable_columns(3)->clear_unit(); },
       absl::StatusCode::kInvalidArgument, "columns[3] (\"ts\").unit: required for ELEMENT_TYPE_DATETIME64"},
      {"a type unset", [](auto& r) { r.mutable_columns(1)->mutable_values_region()->clear_type(); },
       absl::StatusCode::kInvalidArgument, "columns[1] (\"f32\").values_region.type: must be set"},
      {"a bitmap of the wrong type", [](auto& r) { r.mutable_columns(0)->mutable_validity_region()->set_type(v1::ELEMENT_TYPE_UINT32); },
       absl::StatusCode::kInvalidArgument, "columns[0] (\"i32\").validity_region.type: ELEMENT_TYPE_UINT32, expected ELEMENT_TYPE_UINT8"},
      {"a bitmap too short", [](auto& r) { r.mutable_columns(0)->mutable_validity_region()->set_count(37); },
       absl::StatusCode::kInvalidArgument, "columns[0] (\"i32\").validity_region.count: 37 bytes for 300 rows (needs 38"},
      {"a bitmap region without values_region",
       [&](auto& r) {
         r.mutable_columns(1)->clear_values_region();
         SetInline(table[1], rows, r.mutable_columns(1));
         *r.mutable_columns(1)->mutable_validity_region() = r.columns(0).validity_region();
       },
       absl::StatusCode::kInvalidArgument, "columns[1] (\"f32\").validity_region: only with values_region"},
      {"indices of the wrong type", [](auto& r) { r.mutable_indices_region()->set_type(v1::ELEMENT_TYPE_INT64); },
       absl::StatusCode::kInvalidArgument, "indices_region.type: ELEMENT_TYPE_INT64, expected ELEMENT_TYPE_UINT64"},
      {"indices of the wrong count", [](auto& r) { r.mutable_indices_region()->set_count(rows + 1); },
       absl::StatusCode::kInvalidArgument, "indices_region.count: 301, but the table has 300 rows"},
      {"an unknown region", [](auto& r) { r.mutable_columns(4)->mutable_values_region()->set_region("nope"); },
       absl::StatusCode::kNotFound, "columns[4].values_region.region"},
      {"a column past its region", [&](auto& r) { r.mutable_columns(3)->mutable_values_region()->set_offset(layout.bytes - 8); },
       absl::StatusCode::kInvalidArgument, "columns[3].values_region: 300 elements of 8 bytes"},
      {"a misaligned column", [](auto& r) { r.mutable_columns(0)->mutable_values_region()->set_offset(2); },
       absl::StatusCode::kInvalidArgument, "columns[0].values_region.offset: 2 is not a multiple of the element width 4"},
      {"indices over a column", [&](auto& r) { r.mutable_indices_region()->set_offset(layout.values[3]); },
       absl::StatusCode::kInvalidArgument, "overlaps"},
      {"two columns reordered over each other",
       [&](auto& r) { *r.mutable_columns(2)->mutable_values_region() = SliceAt("bad", layout.values[1], rows, v1::ELEMENT_TYPE_INT16); },
       absl::StatusCode::kInvalidArgument, "columns[2].values_region: overlaps columns[1].values_region"},
  };
  // A bool byte of 2 in the region: refused, nothing written.
  {
    const size_t flag_at = layout.values[4] + 7;
    (*region)->data()[flag_at] = 2;
    const std::string with_two(reinterpret_cast<const char*>((*region)->data()), layout.bytes);
    absl::StatusOr<v1::SortTableResponse> got = client_->SortTable(good);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << got.status();
    EXPECT_NE(got.status().message().find("columns[4].values_region: bool byte 2 at row 7"),
              absl::string_view::npos)
        << got.status();
    EXPECT_EQ(std::string(reinterpret_cast<const char*>((*region)->data()), layout.bytes), with_two);
    (*region)->data()[flag_at] = table[4].bytes[7];
  }
  for (const auto& [what, edit, code, message] : cases) {
    SCOPED_TRACE(what);
    v1::SortTableRequest request = good;
    edit(request);
    absl::StatusOr<v1::SortTableResponse> got = client_->SortTable(request);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), code) << got.status();
    EXPECT_NE(got.status().message().find(message), absl::string_view::npos) << got.status();
    EXPECT_EQ(std::string(reinterpret_cast<const char*>((*region)->data()), layout.bytes), before)
        << "a refused request touched the region";
  }
  // The same request, unedited, sorts.
  EXPECT_TRUE(client_->SortTable(good).ok());
}

TEST(TableRegionOffTest, RegionsOffRefuseTableRegions) {
  auto server = StartServer();
  auto c = Connect(*server);
  v1::SortTableRequest request;
  v1::TableColumn* column = request.add_columns();
  *column->mutable_values_region() = SliceAt("anything", 0, 4, v1::ELEMENT_TYPE_UINT32);
  request.add_by()->set_column(0);
  absl::StatusOr<v1::SortTableResponse> got = c->SortTable(request);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition) << got.status();
  EXPECT_NE(got.status().message().find("shared-memory regions are off"), absl::string_view::npos);
}

}  // namespace
}  // namespace sortd::testing
