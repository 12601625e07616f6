#include "server/wire/table_ops.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <limits>
#include <string>
#include <vector>

#include "core/engine.h"
#include "core/gpu_info.h"
#include "core/table_keys.h"

#include "absl/strings/str_cat.h"
#include "server/wire/converted_arrays.h"
#include "server/wire/request_checks.h"
#include "server/wire/sort_ops.h"
#include "server/wire/table_column_types.h"
#include "server/wire/typed_array.h"

namespace sortd {
namespace {

// "columns[2] (\"ts\")", or "columns[2]" for an unnamed column.
std::string ColumnName(const v1::SortTableRequest& request, int c) {
  const std::string& name = request.columns(c).name();
  if (name.empty()) return absl::StrCat("columns[", c, "]");
  return absl::StrCat("columns[", c, "] (\"", name.substr(0, 64), name.size() > 64 ? "...\")" : "\")");
}

uint64_t BitmapBytes(uint64_t rows) { return (rows + 7) / 8; }

// `bits` null: every row valid.
bool IsValid(const uint8_t* bits, uint64_t row) {
  return bits == nullptr || ((bits[row / 8] >> (row % 8)) & 1) != 0;
}

const uint8_t* BitsOf(const std::string& validity) {
  return validity.empty() ? nullptr : reinterpret_cast<const uint8_t*>(validity.data());
}

// The rows' bitmap in the new order: out bit i = in bit perm[i].
std::string PermuteBitmap(const uint8_t* bits, const std::vector<uint64_t>& perm) {
  std::string out(BitmapBytes(perm.size()), '\0');
  for (size_t i = 0; i < perm.size(); ++i) {
    if (IsValid(bits, perm[i])) out[i / 8] = static_cast<char>(out[i / 8] | (1 << (i % 8)));
  }
  return out;
}

// Rows of a column, wherever its values are.
uint64_t RowsOf(const v1::TableColumn& column) {
  return column.has_values_region() ? column.values_region().count() : LengthOf(column.values());
}

// Bytes of a column's values in a region (0 inline): what reordering it in
// place, or a pass over it as a key, holds besides.
uint64_t RegionValueBytes(const v1::TableColumn& column) {
  if (!column.has_values_region()) return 0;
  return v1::ElementTypeWidth(column.values_region().type()) * column.values_region().count();
}

// Bytes of one column as it travels (values with their framing, bitmap).
uint64_t ColumnBytes(const v1::TableColumn& column) {
  // A byte string's tag and length varint: 6 bytes at most below 2^28.
  const uint64_t framing =
      TypeOf(column.values()) == DataType::kBytes ? 6 * LengthOf(column.values()) : 0;
  return PayloadBytes(column.values()) + framing + column.validity().size() + column.name().size() + 32;
}

}  // namespace

absl::Status ValidateSortTableRequest(const v1::SortTableRequest& request) {
  absl::Status id = ValidateRequestId(request.request_id());
  if (!id.ok()) return id;
  if (request.columns_size() == 0) {
    return absl::InvalidArgumentError("columns: required (at least one column)");
  }
  absl::Status count = ValidateColumnCount(request.columns_size());
  if (!count.ok()) return count;
  const uint64_t rows = RowsOf(request.columns(0));
  for (int c = 0; c < request.columns_size(); ++c) {
    const v1::TableColumn& column = request.columns(c);
    const std::string field = ColumnName(request, c);
    absl::Status regions = ValidateColumnRegions(column, rows, field);
    if (!regions.ok()) return regions;
    if (!column.has_values_region()) {
      absl::Status values = ValidateTypedArray(
          column.values(), absl::StrCat(field, ".values"),
          absl::StrCat(field, ".values: required (an array of any type, or values_region)"));
      if (!values.ok()) return values;
    }
    const uint64_t n = RowsOf(column);
    if (n != rows) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": ", n, " rows, but ",
                                                     ColumnName(request, 0), " has ", rows));
    }
    if (!column.validity().empty() && column.validity().size() < BitmapBytes(rows)) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".validity: ", column.validity().size(), " bytes for ", rows, " rows (needs ",
          BitmapBytes(rows), ", a bit a row)"));
    }
  }
  absl::Status indices = ValidateIndicesRegion(request, rows);
  if (!indices.ok()) return indices;
  return ValidateSortKeys(request.by(), request.columns_size());
}

absl::Status ValidateColumnCount(int columns) {
  if (columns > kMaxTableColumns) {
    return absl::InvalidArgumentError(
        absl::StrCat("columns: ", columns, " columns, at most ", kMaxTableColumns));
  }
  return absl::OkStatus();
}

absl::Status ValidateSortKeys(const google::protobuf::RepeatedPtrField<v1::SortKey>& by, int columns) {
  if (by.empty()) return absl::InvalidArgumentError("by: required (at least one key column)");
  if (by.size() > kMaxSortKeys) {
    return absl::InvalidArgumentError(absl::StrCat("by: ", by.size(), " keys, at most ", kMaxSortKeys));
  }
  for (int k = 0; k < by.size(); ++k) {
    const v1::SortKey& key = by.Get(k);
    if (key.column() >= static_cast<uint32_t>(columns)) {
      return absl::InvalidArgumentError(absl::StrCat("by[", k, "].column: ", key.column(),
                                                     ", but the table has ", columns, " columns"));
    }
    absl::Status order = ValidateOrder(key.order(), absl::StrCat("by[", k, "].order"));
    if (!order.ok()) return order;
    absl::Status nulls = ValidateNulls(key.nulls(), absl::StrCat("by[", k, "].nulls"));
    if (!nulls.ok()) return nulls;
  }
  return absl::OkStatus();
}

size_t KeysOf(const v1::SortTableRequest& request) {
  return request.columns_size() == 0 ? 0 : RowsOf(request.columns(0));
}

uint64_t PayloadIn(const v1::SortTableRequest& request) {
  uint64_t total = 0;
  for (const v1::TableColumn& column : request.columns()) {
    total += PayloadBytes(column.values()) + column.validity().size();
  }
  return total;
}

uint64_t PayloadOut(const v1::SortTableResponse& response) {
  uint64_t total = 8 * static_cast<uint64_t>(response.indices_size());
  for (const v1::TableColumn& column : response.columns()) {
    total += PayloadBytes(column.values()) + column.validity().size();
  }
  return total;
}

uint64_t InflightBytes(const v1::SortTableRequest& request) {
  const uint64_t rows = KeysOf(request);
  uint64_t columns = 0;
  uint64_t largest_key = 0;
  uint64_t largest_region_column = 0;
  for (const v1::TableColumn& column : request.columns()) {
    columns += ColumnBytes(column);
    largest_region_column = std::max(largest_region_column, RegionValueBytes(column));
  }
  for (const v1::SortKey& key : request.by()) {
    if (key.column() < static_cast<uint32_t>(request.columns_size())) {
      const v1::TableColumn& column = request.columns(static_cast<int>(key.column()));
      largest_key = std::max(largest_key, ColumnBytes(column) + RegionValueBytes(column));
    }
  }
  // The request, the response (its permutation, and the columns on
  // request; a column in a region is reordered through a buffer of its
  // size), and a pass's scratch: the key column gathered and sorted (twice
  // its size) and three permutations.
  const uint64_t reordered = request.return_columns() ? columns + largest_region_column : 0;
  return columns + 8 * rows + reordered + 2 * largest_key + 24 * rows;
}

std::optional<DataType> KeyTypeOf(const v1::SortTableRequest& request) {
  if (request.by_size() == 0 || request.by(0).column() >= static_cast<uint32_t>(request.columns_size())) {
    return std::nullopt;
  }
  const v1::TableColumn& column = request.columns(static_cast<int>(request.by(0).column()));
  if (column.has_values_region()) {
    absl::StatusOr<TableColumnType> type =
        TableColumnTypeOf(column.values_region().type(), column.unit(), "", "");
    if (!type.ok()) return std::nullopt;
    if (type->kind == TableKey::Kind::kNarrow) return DataType::kUint32;
    if (type->kind == TableKey::Kind::kTime) return DataType::kUint64;
    return type->type;
  }
  const v1::TypedArray& values = column.values();
  if (IsConvertedArray(values)) return ConvertedSortType(values);
  return TypeOf(values);
}

absl::Status CheckResponseFits(const v1::SortTableRequest& request, uint64_t max_response_bytes) {
  if (max_response_bytes == 0) return absl::OkStatus();
  uint64_t bytes = FieldBytes(8 * KeysOf(request)) + FieldBytes(request.request_id().size()) + 16;
  if (request.return_columns()) {
    for (const v1::TableColumn& column : request.columns()) bytes += FieldBytes(ColumnBytes(column));
  }
  if (bytes > max_response_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "response: ", bytes, " bytes (the permutation", request.return_columns() ? " and the columns" : "",
        ") exceed the message limit of ", max_response_bytes,
        " bytes (--max_message_bytes); sort fewer rows per call, or without return_columns"));
  }
  return absl::OkStatus();
}

void DescribeSuccess(const v1::SortTableRequest& request, const v1::SortTableResponse& response,
                     RequestRecord* record) {
  record->engine = FromProtoEngine(response.engine());
  record->bytes_sent = PayloadOut(response);
  record->keys_sorted = KeysOf(request);
}

namespace {

const void* NumericData(const v1::TypedArray& values, DataType type) {
  switch (type) {
    case DataType::kUint32: return NumericField<uint32_t>(values).data();
    case DataType::kInt32: return NumericField<int32_t>(values).data();
    case DataType::kFloat32: return NumericField<float>(values).data();
    case DataType::kUint64: return NumericField<uint64_t>(values).data();
    case DataType::kInt64: return NumericField<int64_t>(values).data();
    case DataType::kFloat64: return NumericField<double>(values).data();
    case DataType::kBytes: return nullptr;
  }
  return nullptr;
}

// One column of the request, wherever its bytes lie: in the message, or
// in regions (`values`, `validity`: resolved slices, else null).
struct ColumnView {
  const v1::TableColumn* proto = nullptr;
  const Slice* values = nullptr;
  const Slice* validity = nullptr;
  const uint8_t* bits = nullptr;  // the bitmap, wherever it lies; null: no nulls
};

// The key as a packed-key column (core/table_keys.h); nullopt for a
// byte-string key, which takes a pass of its own.
std::optional<TableKey> PackableKey(const ColumnView& column, const v1::SortKey& key) {
  TableKey out;
  out.order = ToCoreOrder(key.order());
  out.nulls = ToCoreNulls(key.nulls());
  out.validity = column.bits;
  if (column.values != nullptr) {
    // Validated: the type and unit are known.
    absl::StatusOr<TableColumnType> type =
        TableColumnTypeOf(column.values->element, column.proto->unit(), "", "");
    out.kind = type->kind;
    out.type = type->type;
    out.narrow = type->narrow;
    out.data = column.values->data;
    return out;
  }
  const v1::TypedArray& values = column.proto->values();
  NarrowType narrow;
  if (const std::string* bytes = NarrowBytes(values, &narrow)) {
    out.kind = TableKey::Kind::kNarrow;
    out.narrow = narrow;
    out.data = bytes->data();
    return out;
  }
  if (const auto* times = TimeValuesOf(values)) {
    out.kind = TableKey::Kind::kTime;
    out.data = times->data();
    return out;
  }
  const std::optional<DataType> type = TypeOf(values);
  if (!type.has_value() || *type == DataType::kBytes) return std::nullopt;
  out.type = *type;
  out.data = NumericData(values, *type);
  return out;
}

// One stable pass by a byte-string key (always in the message) over the
// rows in their order `perm`: the non-null rows' strings gathered and
// argsorted on the engine, the null rows kept in order, first or last.
absl::StatusOr<std::optional<EngineKind>> SortRowsByColumn(Dispatcher& dispatcher,
                                                           const ColumnView& column,
                                                           const v1::SortKey& key,
                                                           std::vector<uint64_t>& perm) {
  std::vector<uint64_t> valid_rows, null_rows;
  for (uint64_t row : perm) (IsValid(column.bits, row) ? valid_rows : null_rows).push_back(row);
  v1::TypedArray gathered, sorted;
  absl::Status status = GatherTypedArray(column.proto->values(), valid_rows, &gathered);
  if (!status.ok()) return status;
  std::vector<uint64_t> order(valid_rows.size());
  absl::StatusOr<EngineKind> ran = SortKeys(dispatcher, gathered, ToCoreOrder(key.order()),
                                            ToCoreNulls(key.nulls()), &sorted, absl::MakeSpan(order));
  if (!ran.ok()) return ran.status();
  const bool nulls_first = key.nulls() == v1::NULL_PLACEMENT_FIRST;
  size_t out = 0;
  if (nulls_first) {
    for (uint64_t row : null_rows) perm[out++] = row;
  }
  for (uint64_t i : order) perm[out++] = valid_rows[i];
  if (!nulls_first) {
    for (uint64_t row : null_rows) perm[out++] = row;
  }
  if (valid_rows.empty()) return std::optional<EngineKind>();
  return std::optional<EngineKind>(*ran);
}

// A region column reordered where it lies: its values, and its bitmap
// when that lies in a region too (else the response carries it).
absl::Status ReorderInPlace(const ColumnView& column, const std::vector<uint64_t>& perm,
                            v1::TableColumn* out) {
  const Slice& values = *column.values;
  const size_t width = values.width;
  std::vector<uint8_t> gathered(values.bytes());
  if (width == 4 || width == 8) {
    absl::Status status = GatherByIndex(values.data, width, perm, gathered.data());
    if (!status.ok()) return status;
  } else {
    for (size_t i = 0; i < perm.size(); ++i) {
      std::memcpy(gathered.data() + i * width, values.data + perm[i] * width, width);
    }
  }
  std::memcpy(values.data, gathered.data(), gathered.size());
  if (column.bits == nullptr) return absl::OkStatus();
  std::string bits = PermuteBitmap(column.bits, perm);
  if (column.validity != nullptr) {
    std::memcpy(column.validity->data, bits.data(), bits.size());
  } else {
    out->set_validity(std::move(bits));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunSortTable(Dispatcher& dispatcher, const v1::SortTableRequest& request,
                          v1::SortTableResponse* response, RegionRegistry* regions,
                          bool device_allowed) {
  response->set_request_id(request.request_id());
  const size_t rows = KeysOf(request);
  // Packed keys name rows as uint32 (one message cannot carry more: even a
  // bool column of 2^32 rows is over protobuf's 2 GiB; a region column is
  // held to the same).
  if (rows > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("columns: ", rows, " rows, fewer than 2^32 a table"));
  }
  TableSlices slices;
  if (UsesRegions(request)) {
    absl::StatusOr<TableSlices> resolved = ResolveTableSlices(regions, request);
    if (!resolved.ok()) return resolved.status();
    slices = *std::move(resolved);
    regions->CountRequest(slices.device >= 0 ? RegionKind::kCuda : RegionKind::kSystem);
    regions->AtTestSite("region.resolved");
  }
  std::vector<ColumnView> columns(request.columns_size());
  for (int c = 0; c < request.columns_size(); ++c) {
    ColumnView& view = columns[c];
    view.proto = &request.columns(c);
    if (!slices.values.empty() && slices.values[c]) view.values = &*slices.values[c];
    if (!slices.validity.empty() && slices.validity[c]) view.validity = &*slices.validity[c];
    view.bits = view.validity != nullptr ? view.validity->data : BitsOf(view.proto->validity());
    // Bools are 0 or 1, as in the message (where the field's check refuses
    // other bytes): a region's bytes are checked here, before anything is
    // sorted or written.
    if (view.values != nullptr && view.values->element == v1::ELEMENT_TYPE_BOOL &&
        !view.values->on_device()) {
      for (size_t r = 0; r < view.values->count; ++r) {
        if (view.values->data[r] > 1) {
          return absl::InvalidArgumentError(absl::StrCat(
              "columns[", c, "].values_region: bool byte ", view.values->data[r], " at row ", r,
              " (bools are 0 or 1)"));
        }
      }
    }
  }
  std::vector<uint64_t> perm(rows);
  std::iota(perm.begin(), perm.end(), 0);
  std::optional<EngineKind> engine;
  if (slices.device >= 0) {
    // Device memory: one packed run on its own GPU, never the host.
    if (!device_allowed) {
      return absl::UnavailableError(
          "a region this request names became a CUDA region after the request was routed; retry");
    }
    std::vector<TableKey> run;
    for (int k = 0; k < request.by_size(); ++k) {
      std::optional<TableKey> packed = PackableKey(columns[request.by(k).column()], request.by(k));
      if (!packed.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "by[", k, "]: a byte-string key; a table with columns in CUDA regions sorts by "
            "fixed-width keys only"));
      }
      run.push_back(*packed);
    }
    std::vector<uint32_t> rows32(rows);
    std::iota(rows32.begin(), rows32.end(), 0);
    absl::StatusOr<EngineKind> ran = rows < 2 ? absl::StatusOr<EngineKind>(EngineKind::kGpuRadix)
                                              : SortRowsOnGpu(dispatcher, run, absl::MakeSpan(rows32),
                                                              slices.device);
    if (!ran.ok()) return ran.status();
    engine = *ran;
    std::copy(rows32.begin(), rows32.end(), perm.begin());
  }
  // Stable passes from the least significant key: a run of fixed-width keys
  // packed into words (one pairs sort a word), a byte-string key alone.
  for (int k = slices.device >= 0 ? -1 : request.by_size() - 1; k >= 0;) {
    auto column_of = [&](int key) -> const ColumnView& { return columns[request.by(key).column()]; };
    std::optional<TableKey> packed = PackableKey(column_of(k), request.by(k));
    if (!packed.has_value()) {
      absl::StatusOr<std::optional<EngineKind>> ran =
          SortRowsByColumn(dispatcher, column_of(k), request.by(k), perm);
      if (!ran.ok()) return ran.status();
      if (ran->has_value()) engine = **ran;
      --k;
      continue;
    }
    std::vector<TableKey> run = {*packed};
    int first = k;
    while (first > 0) {
      std::optional<TableKey> next = PackableKey(column_of(first - 1), request.by(first - 1));
      if (!next.has_value()) break;
      run.insert(run.begin(), *next);
      --first;
    }
    std::vector<uint32_t> rows32(perm.begin(), perm.end());
    absl::StatusOr<EngineKind> ran =
        SortRowsByPackedKeys(dispatcher, run, absl::MakeSpan(rows32), DefaultPackingThreads());
    if (!ran.ok()) return ran.status();
    std::copy(rows32.begin(), rows32.end(), perm.begin());
    if (rows > 1) engine = *ran;
    k = first - 1;
  }
  if (slices.indices) {
    std::string error;
    if (!CopyAnyMemory(slices.indices->data, perm.data(), perm.size() * sizeof(uint64_t), &error)) {
      return absl::InternalError(absl::StrCat("writing indices_region: ", error));
    }
  } else {
    response->mutable_indices()->Add(perm.begin(), perm.end());
  }
  if (request.return_columns()) {
    for (const ColumnView& column : columns) {
      v1::TableColumn* out = response->add_columns();
      out->set_name(column.proto->name());
      absl::Status status =
          column.values != nullptr
              ? ReorderInPlace(column, perm, out)
              : GatherTypedArray(column.proto->values(), perm, out->mutable_values());
      if (!status.ok()) return status;
      if (column.values == nullptr && column.bits != nullptr) {
        out->set_validity(PermuteBitmap(column.bits, perm));
      }
    }
  }
  const EngineKind ran = engine.value_or(EngineKind::kCpu);
  if (UsesRegions(request)) {
    absl::Status intact = CheckStillIntact(slices.all(), ran != EngineKind::kCpu);
    if (!intact.ok()) return intact;
  }
  response->set_engine(ToProtoEngine(ran));
  return absl::OkStatus();
}

}  // namespace sortd
