// Packed table keys (core/table_keys.h): the rows' order equals a stable
// sort by a comparator that looks at each key column in turn (nulls placed,
// direction applied, values compared as sortd orders them), and the layout
// takes the bits the ranges need, no more.
#include "core/table_keys.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "core/key_transform.h"

namespace sortd {
namespace {

// A column and its storage.
struct Column {
  TableKey key;
  std::vector<uint8_t> bytes;     // the elements, packed
  std::vector<uint8_t> validity;  // empty: all valid
};

std::unique_ptr<Dispatcher> MakeDispatcher() {
  DispatcherOptions options;  // auto: large sorts go to a GPU where one serves
  options.cpu.max_threads = 2;
  auto d = Dispatcher::Create(options);
  EXPECT_TRUE(d.ok()) << d.status();
  return std::move(*d);
}

bool IsNull(const Column& c, size_t row) {
  if (!c.validity.empty() && ((c.validity[row / 8] >> (row % 8)) & 1) == 0) return true;
  if (c.key.kind == TableKey::Kind::kTime) {
    int64_t v;
    std::memcpy(&v, c.bytes.data() + 8 * row, 8);
    return v == kNaT;
  }
  return false;
}

// The element's word in sortd's ascending order (key_transform and
// sortable_keys are tested on their own).
uint64_t WordOf(const Column& c, size_t row) {
  const uint8_t* p = c.bytes.data();
  switch (c.key.kind) {
    case TableKey::Kind::kNarrow: {
      uint32_t w;
      WidenNarrow(c.key.narrow, p + row * NarrowWidth(c.key.narrow), absl::MakeSpan(&w, 1));
      return w;
    }
    case TableKey::Kind::kTime: {
      int64_t v;
      std::memcpy(&v, p + 8 * row, 8);
      return OrderedBits<int64_t>::Encode(v);
    }
    case TableKey::Kind::kNumeric:
      break;
  }
  switch (c.key.type) {
    case DataType::kUint32: { uint32_t v; std::memcpy(&v, p + 4 * row, 4); return v; }
    case DataType::kInt32: { int32_t v; std::memcpy(&v, p + 4 * row, 4); return OrderedBits<int32_t>::Encode(v); }
    case DataType::kFloat32: { float v; std::memcpy(&v, p + 4 * row, 4); return OrderedBits<float>::Encode(v); }
    case DataType::kUint64: { uint64_t v; std::memcpy(&v, p + 8 * row, 8); return v; }
    case DataType::kInt64: { int64_t v; std::memcpy(&v, p + 8 * row, 8); return OrderedBits<int64_t>::Encode(v); }
    case DataType::kFloat64: { double v; std::memcpy(&v, p + 8 * row, 8); return OrderedBits<double>::Encode(v); }
    case DataType::kBytes: break;
  }
  return 0;
}

// -1, 0, 1: row a before, tied with, after row b by column c.
int Compare(const Column& c, size_t a, size_t b) {
  const bool na = IsNull(c, a), nb = IsNull(c, b);
  if (na || nb) {
    if (na == nb) return 0;
    const int null_later = c.key.nulls == NullPlacement::kLast ? 1 : -1;
    return na ? null_later : -null_later;
  }
  const uint64_t wa = WordOf(c, a), wb = WordOf(c, b);
  if (wa == wb) return 0;
  const int less = wa < wb ? -1 : 1;
  return c.key.order == SortOrder::kAscending ? less : -less;
}

std::vector<uint32_t> ReferenceOrder(const std::vector<Column>& cols, size_t rows) {
  std::vector<uint32_t> order(rows);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    for (const Column& c : cols) {
      const int r = Compare(c, a, b);
      if (r != 0) return r < 0;
    }
    return false;
  });
  return order;
}

std::vector<TableKey> KeysOf(std::vector<Column>& cols) {
  std::vector<TableKey> keys;
  for (Column& c : cols) {
    c.key.data = c.bytes.data();
    c.key.validity = c.validity.empty() ? nullptr : c.validity.data();
    keys.push_back(c.key);
  }
  return keys;
}

std::vector<uint32_t> PackedOrder(std::vector<Column>& cols, size_t rows, int threads = 2) {
  std::vector<uint32_t> order(rows);
  std::iota(order.begin(), order.end(), 0);
  static std::unique_ptr<Dispatcher> dispatcher = MakeDispatcher();
  std::vector<TableKey> keys = KeysOf(cols);
  absl::StatusOr<EngineKind> ran =
      SortRowsByPackedKeys(*dispatcher, keys, absl::MakeSpan(order), threads);
  EXPECT_TRUE(ran.ok()) << ran.status();
  return order;
}

template <typename T>
Column NumericColumn(const std::vector<T>& values) {
  Column c;
  c.key.kind = TableKey::Kind::kNumeric;
  c.key.type = DataTypeOf<T>::value;
  c.bytes.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(c.bytes.data(), values.data(), c.bytes.size());
  return c;
}

Column TimeColumn(const std::vector<int64_t>& values) {
  Column c = NumericColumn(values);
  c.key.kind = TableKey::Kind::kTime;
  return c;
}

// A random column of any kind; small ranges give many ties.
Column RandomColumn(std::mt19937_64& rng, size_t rows) {
  const int kind = static_cast<int>(rng() % 13);
  const bool narrow_range = rng() % 2 == 0;
  Column c;
  auto fill = [&](size_t width) {
    c.bytes.resize(rows * width);
    for (auto& b : c.bytes) b = static_cast<uint8_t>(rng());
  };
  if (kind < 6) {
    const DataType types[] = {DataType::kUint32, DataType::kInt32, DataType::kFloat32,
                              DataType::kUint64, DataType::kInt64, DataType::kFloat64};
    c.key.type = types[kind];
    fill(ElementSize(c.key.type));
    if (narrow_range || c.key.type == DataType::kFloat32 || c.key.type == DataType::kFloat64) {
      // Few distinct values (floats: with specials among them).
      for (size_t r = 0; r < rows; ++r) {
        const int pick = static_cast<int>(rng() % 9);
        if (c.key.type == DataType::kFloat32) {
          const float v[] = {-0.0f, 0.0f, 1.5f, -2.0f, std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity(), std::nanf("1"),
                             -std::nanf("7"), static_cast<float>(rng() % 1000) / 7};
          std::memcpy(c.bytes.data() + 4 * r, &v[pick], 4);
        } else if (c.key.type == DataType::kFloat64) {
          const double v[] = {-0.0, 0.0, 1.5, -2.0, std::numeric_limits<double>::infinity(),
                              -1e300, std::nan("3"), -std::nan("2"), static_cast<double>(rng() % 1000) / 7};
          std::memcpy(c.bytes.data() + 8 * r, &v[pick], 8);
        } else {
          const uint64_t v = static_cast<uint64_t>(pick) - 4;  // around zero (wraps for unsigned)
          std::memcpy(c.bytes.data() + ElementSize(c.key.type) * r, &v, ElementSize(c.key.type));
        }
      }
    }
  } else if (kind < 13 && kind != 12) {
    c.key.kind = TableKey::Kind::kNarrow;
    const NarrowType types[] = {NarrowType::kInt8, NarrowType::kUint8, NarrowType::kInt16,
                                NarrowType::kUint16, NarrowType::kFloat16, NarrowType::kBFloat16};
    c.key.narrow = types[kind - 6];
    fill(NarrowWidth(c.key.narrow));
    if (narrow_range) {
      for (auto& b : c.bytes) b &= 0x83;
    }
  } else {
    c = TimeColumn(std::vector<int64_t>(rows));
    for (size_t r = 0; r < rows; ++r) {
      const int64_t v = rng() % 10 == 0 ? kNaT
                        : narrow_range ? static_cast<int64_t>(rng() % 5) - 2
                                       : static_cast<int64_t>(rng());
      std::memcpy(c.bytes.data() + 8 * r, &v, 8);
    }
  }
  if (rng() % 2 == 0) {
    c.validity.resize((rows + 7) / 8);
    for (auto& b : c.validity) b = static_cast<uint8_t>(rng() | rng() | rng());  // ~1/8 null
  }
  c.key.order = rng() % 2 ? SortOrder::kAscending : SortOrder::kDescending;
  c.key.nulls = rng() % 2 ? NullPlacement::kLast : NullPlacement::kFirst;
  return c;
}

TEST(TableKeysTest, RandomTablesMatchAStableSortByEveryKey) {
  std::mt19937_64 rng(49);
  for (size_t rows : {size_t{0}, size_t{1}, size_t{2}, size_t{100}, size_t{5000}, size_t{150000}}) {
    const int tables = rows > 10000 ? 6 : 40;
    for (int t = 0; t < tables; ++t) {
      std::vector<Column> cols;
      const int keys = 1 + static_cast<int>(rng() % 5);
      for (int k = 0; k < keys; ++k) cols.push_back(RandomColumn(rng, rows));
      SCOPED_TRACE(testing::Message() << rows << " rows, table " << t);
      ASSERT_EQ(PackedOrder(cols, rows), ReferenceOrder(cols, rows));
    }
  }
}

TEST(TableKeysTest, TiesKeepTheOrderTheRowsCameIn) {
  // Sorting a permutation (not the identity) keeps that permutation's order
  // among tied rows: the passes over several words rely on it.
  std::vector<uint8_t> flags = {1, 0, 1, 0, 1, 0};
  Column c;
  c.key.kind = TableKey::Kind::kNarrow;
  c.key.narrow = NarrowType::kBool;
  c.bytes = flags;
  std::vector<Column> cols = {c};
  std::vector<uint32_t> order = {5, 4, 3, 2, 1, 0};
  static std::unique_ptr<Dispatcher> dispatcher = MakeDispatcher();
  std::vector<TableKey> keys = KeysOf(cols);
  ASSERT_TRUE(SortRowsByPackedKeys(*dispatcher, keys, absl::MakeSpan(order), 1).ok());
  EXPECT_EQ(order, (std::vector<uint32_t>{5, 3, 1, 4, 2, 0}));
}

TEST(TableKeysTest, FloatSpecialsFollowTheFloatRules) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {nan, 0.0f, -0.0f, -inf, -nan, 1.0f, inf};
  std::vector<Column> cols = {NumericColumn(v)};
  // Ascending: -inf, -0.0, +0.0, 1, inf, then both NaNs (equal: input order).
  EXPECT_EQ(PackedOrder(cols, v.size()), (std::vector<uint32_t>{3, 2, 1, 5, 6, 0, 4}));
  cols[0].key.order = SortOrder::kDescending;
  EXPECT_EQ(PackedOrder(cols, v.size()), (std::vector<uint32_t>{0, 4, 6, 5, 1, 2, 3}));
}

TEST(TableKeysTest, NaTAndBitmapNullsAreOneNullPlacedEitherWay) {
  std::vector<int64_t> t = {5, kNaT, -3, 7, 0};
  std::vector<Column> cols = {TimeColumn(t)};
  cols[0].validity = {0b11110};  // row 0 null by the bitmap, row 1 NaT
  EXPECT_EQ(PackedOrder(cols, t.size()), (std::vector<uint32_t>{2, 4, 3, 0, 1}));
  cols[0].key.nulls = NullPlacement::kFirst;
  cols[0].key.order = SortOrder::kDescending;
  EXPECT_EQ(PackedOrder(cols, t.size()), (std::vector<uint32_t>{0, 1, 3, 4, 2}));
}

TEST(TableKeysTest, FieldsTakeTheBitsTheirRangesNeed) {
  const size_t rows = 1000;
  std::mt19937_64 rng(7);
  std::vector<int32_t> ints(rows);
  std::vector<float> unit(rows);
  for (size_t r = 0; r < rows; ++r) {
    ints[r] = static_cast<int32_t>(rng());
    unit[r] = static_cast<float>(r) / rows;
  }
  ints[0] = std::numeric_limits<int32_t>::min();
  ints[1] = std::numeric_limits<int32_t>::max();
  std::vector<Column> cols = {NumericColumn(ints), NumericColumn(unit)};
  for (Column& c : cols) c.validity.assign((rows + 7) / 8, 0xEF);  // nulls in both
  cols[1].key.order = SortOrder::kDescending;
  std::vector<TableKey> keys = KeysOf(cols);
  // 1 + 32 + 1 + 30 bits ([0, 1) spans 30 bits of float32 words): one word.
  TableKeyPacking packing = TableKeyPacking::Plan(keys, rows, 2);
  ASSERT_EQ(packing.words(), 1);
  EXPECT_EQ(packing.bits(0), 64);
  EXPECT_EQ(PackedOrder(cols, rows), ReferenceOrder(cols, rows));

  // An int64 of full range with nulls needs 65 bits: the null bit, then a
  // word of its own.
  std::vector<int64_t> wide(rows);
  for (auto& w : wide) w = static_cast<int64_t>(rng());
  wide[0] = std::numeric_limits<int64_t>::min();
  wide[1] = std::numeric_limits<int64_t>::max();
  std::vector<Column> wide_cols = {NumericColumn(wide)};
  wide_cols[0].validity.assign((rows + 7) / 8, 0x7F);
  keys = KeysOf(wide_cols);
  packing = TableKeyPacking::Plan(keys, rows, 2);
  ASSERT_EQ(packing.words(), 2);
  EXPECT_EQ(packing.bits(0), 1);
  EXPECT_EQ(packing.bits(1), 64);
  EXPECT_EQ(PackedOrder(wide_cols, rows), ReferenceOrder(wide_cols, rows));

  // Ten flags: ten bits, a uint32 word.
  std::vector<Column> flags;
  for (int f = 0; f < 10; ++f) {
    Column c;
    c.key.kind = TableKey::Kind::kNarrow;
    c.key.narrow = NarrowType::kBool;
    for (size_t r = 0; r < rows; ++r) c.bytes.push_back(static_cast<uint8_t>(rng() & 1));
    flags.push_back(c);
  }
  keys = KeysOf(flags);
  packing = TableKeyPacking::Plan(keys, rows, 2);
  ASSERT_EQ(packing.words(), 1);
  EXPECT_EQ(packing.bits(0), 10);
  EXPECT_EQ(PackedOrder(flags, rows), ReferenceOrder(flags, rows));
}

TEST(TableKeysTest, ConstantKeysTakeNoBitsAndKeepTheInputOrder) {
  std::vector<Column> cols = {NumericColumn(std::vector<double>(50, 2.5)),
                              NumericColumn(std::vector<uint32_t>(50, 9))};
  cols[1].validity.assign(7, 0);  // every row null
  std::vector<TableKey> keys = KeysOf(cols);
  EXPECT_EQ(TableKeyPacking::Plan(keys, 50, 1).words(), 0);
  std::vector<uint32_t> identity(50);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(PackedOrder(cols, 50), identity);
}

TEST(TableKeysTest, ThreadsChangeNothing) {
  std::mt19937_64 rng(3);
  const size_t rows = 200000;
  std::vector<Column> cols = {RandomColumn(rng, rows), RandomColumn(rng, rows), RandomColumn(rng, rows)};
  const std::vector<uint32_t> one = PackedOrder(cols, rows, 1);
  EXPECT_EQ(PackedOrder(cols, rows, 7), one);
  EXPECT_EQ(one, ReferenceOrder(cols, rows));
}

}  // namespace
}  // namespace sortd

namespace sortd {
namespace {

// Where a GPU serves: tables in input order that the dispatcher routes to
// it are scanned, packed and sorted on the device (GpuEngine::
// SortTableRows), and answer as the reference does: every key kind, nulls,
// both orders, several words.
TEST(TableKeysGpuTest, LargeTablesSortOnTheGpuAsTheReferenceDoes) {
  static std::unique_ptr<Dispatcher> dispatcher = MakeDispatcher();
  if (!dispatcher->has_gpu()) GTEST_SKIP() << "no GPU engine here";
  std::mt19937_64 rng(52);
  const size_t rows = size_t{1} << 20;
  for (int t = 0; t < 8; ++t) {
    std::vector<Column> cols;
    const int keys = 1 + static_cast<int>(rng() % 5);
    for (int k = 0; k < keys; ++k) cols.push_back(RandomColumn(rng, rows));
    SCOPED_TRACE(testing::Message() << "table " << t << ", " << keys << " keys");
    std::vector<uint32_t> order(rows);
    std::iota(order.begin(), order.end(), 0);
    std::vector<TableKey> table = KeysOf(cols);
    absl::StatusOr<EngineKind> ran = SortRowsByPackedKeys(*dispatcher, table, absl::MakeSpan(order), 4);
    ASSERT_TRUE(ran.ok()) << ran.status();
    EXPECT_EQ(*ran, EngineKind::kGpuRadix) << "not sorted on the GPU";
    ASSERT_EQ(order, ReferenceOrder(cols, rows));
  }
  // Three full-range int64 keys with nulls: a null bit and 64 value bits
  // each, which never share a word: six words, six passes.
  std::vector<Column> wide;
  for (int k = 0; k < 3; ++k) {
    std::vector<int64_t> v(rows);
    for (int64_t& x : v) x = static_cast<int64_t>(rng());
    v[0] = std::numeric_limits<int64_t>::min();
    v[1] = std::numeric_limits<int64_t>::max();
    Column c = NumericColumn(v);
    c.validity.assign((rows + 7) / 8, 0xF7);
    c.key.order = k == 1 ? SortOrder::kDescending : SortOrder::kAscending;
    c.key.nulls = k == 2 ? NullPlacement::kFirst : NullPlacement::kLast;
    wide.push_back(c);
  }
  std::vector<TableKey> table = KeysOf(wide);
  EXPECT_EQ(TableKeyPacking::Plan(table, rows, 4).words(), 6);
  std::vector<uint32_t> order(rows);
  std::iota(order.begin(), order.end(), 0);
  absl::StatusOr<EngineKind> ran = SortRowsByPackedKeys(*dispatcher, table, absl::MakeSpan(order), 4);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ(*ran, EngineKind::kGpuRadix);
  ASSERT_EQ(order, ReferenceOrder(wide, rows));
}

}  // namespace
}  // namespace sortd
