#include "server/wire/table_ops.h"

#include <algorithm>
#include <numeric>
#include <limits>
#include <string>
#include <vector>

#include "core/table_keys.h"

#include "absl/strings/str_cat.h"
#include "server/wire/converted_arrays.h"
#include "server/wire/request_checks.h"
#include "server/wire/sort_ops.h"
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

bool IsValid(const std::string& validity, uint64_t row) {
  return validity.empty() || ((static_cast<uint8_t>(validity[row / 8]) >> (row % 8)) & 1) != 0;
}

// The rows' bitmap in the new order: out bit i = in bit perm[i].
std::string PermuteBitmap(const std::string& validity, const std::vector<uint64_t>& perm) {
  std::string out(BitmapBytes(perm.size()), '\0');
  for (size_t i = 0; i < perm.size(); ++i) {
    if (IsValid(validity, perm[i])) out[i / 8] = static_cast<char>(out[i / 8] | (1 << (i % 8)));
  }
  return out;
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
  const uint64_t rows = LengthOf(request.columns(0).values());
  for (int c = 0; c < request.columns_size(); ++c) {
    const v1::TableColumn& column = request.columns(c);
    const std::string field = ColumnName(request, c);
    absl::Status values = ValidateTypedArray(column.values(), absl::StrCat(field, ".values"),
                                             absl::StrCat(field, ".values: required (an array of any type)"));
    if (!values.ok()) return values;
    const uint64_t n = LengthOf(column.values());
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
  return request.columns_size() == 0 ? 0 : LengthOf(request.columns(0).values());
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
  for (const v1::TableColumn& column : request.columns()) columns += ColumnBytes(column);
  for (const v1::SortKey& key : request.by()) {
    if (key.column() < static_cast<uint32_t>(request.columns_size())) {
      largest_key = std::max(largest_key, ColumnBytes(request.columns(static_cast<int>(key.column()))));
    }
  }
  // The request, the response (its permutation, and the columns on
  // request), and a pass's scratch: the key column gathered and sorted
  // (twice its size) and three permutations.
  return columns + 8 * rows + (request.return_columns() ? columns : 0) + 2 * largest_key + 24 * rows;
}

std::optional<DataType> KeyTypeOf(const v1::SortTableRequest& request) {
  if (request.by_size() == 0 || request.by(0).column() >= static_cast<uint32_t>(request.columns_size())) {
    return std::nullopt;
  }
  const v1::TypedArray& values = request.columns(static_cast<int>(request.by(0).column())).values();
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

// The key as a packed-key column (core/table_keys.h); nullopt for a
// byte-string key, which takes a pass of its own.
std::optional<TableKey> PackableKey(const v1::SortTableRequest& request, const v1::SortKey& key) {
  const v1::TableColumn& column = request.columns(static_cast<int>(key.column()));
  TableKey out;
  out.order = ToCoreOrder(key.order());
  out.nulls = ToCoreNulls(key.nulls());
  if (!column.validity().empty()) {
    out.validity = reinterpret_cast<const uint8_t*>(column.validity().data());
  }
  NarrowType narrow;
  if (const std::string* bytes = NarrowBytes(column.values(), &narrow)) {
    out.kind = TableKey::Kind::kNarrow;
    out.narrow = narrow;
    out.data = bytes->data();
    return out;
  }
  if (const auto* times = TimeValuesOf(column.values())) {
    out.kind = TableKey::Kind::kTime;
    out.data = times->data();
    return out;
  }
  const std::optional<DataType> type = TypeOf(column.values());
  if (!type.has_value() || *type == DataType::kBytes) return std::nullopt;
  out.type = *type;
  out.data = NumericData(column.values(), *type);
  return out;
}

// One stable pass by a byte-string key over the rows in their order `perm`:
// the non-null rows' strings gathered and argsorted on the engine, the
// null rows kept in order, first or last.
absl::StatusOr<std::optional<EngineKind>> SortRowsByColumn(Dispatcher& dispatcher,
                                                           const v1::TableColumn& column,
                                                           const v1::SortKey& key,
                                                           std::vector<uint64_t>& perm) {
  std::vector<uint64_t> valid_rows, null_rows;
  for (uint64_t row : perm) (IsValid(column.validity(), row) ? valid_rows : null_rows).push_back(row);
  v1::TypedArray gathered, sorted;
  absl::Status status = GatherTypedArray(column.values(), valid_rows, &gathered);
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

}  // namespace

absl::Status RunSortTable(Dispatcher& dispatcher, const v1::SortTableRequest& request,
                          v1::SortTableResponse* response) {
  response->set_request_id(request.request_id());
  const size_t rows = KeysOf(request);
  std::vector<uint64_t> perm(rows);
  std::iota(perm.begin(), perm.end(), 0);
  // Packed keys name rows as uint32 (one message cannot carry more: even a
  // bool column of 2^32 rows is over protobuf's 2 GiB).
  if (rows > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("columns: ", rows, " rows, fewer than 2^32 a table"));
  }
  std::optional<EngineKind> engine;
  // Stable passes from the least significant key: a run of fixed-width keys
  // packed into words (one pairs sort a word), a byte-string key alone.
  for (int k = request.by_size() - 1; k >= 0;) {
    std::optional<TableKey> packed = PackableKey(request, request.by(k));
    if (!packed.has_value()) {
      const v1::SortKey& key = request.by(k);
      absl::StatusOr<std::optional<EngineKind>> ran =
          SortRowsByColumn(dispatcher, request.columns(static_cast<int>(key.column())), key, perm);
      if (!ran.ok()) return ran.status();
      if (ran->has_value()) engine = **ran;
      --k;
      continue;
    }
    std::vector<TableKey> run = {*packed};
    int first = k;
    while (first > 0) {
      std::optional<TableKey> next = PackableKey(request, request.by(first - 1));
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
  response->mutable_indices()->Add(perm.begin(), perm.end());
  if (request.return_columns()) {
    for (const v1::TableColumn& column : request.columns()) {
      v1::TableColumn* out = response->add_columns();
      out->set_name(column.name());
      absl::Status status = GatherTypedArray(column.values(), perm, out->mutable_values());
      if (!status.ok()) return status;
      if (!column.validity().empty()) out->set_validity(PermuteBitmap(column.validity(), perm));
    }
  }
  response->set_engine(ToProtoEngine(engine.value_or(EngineKind::kCpu)));
  return absl::OkStatus();
}

}  // namespace sortd
