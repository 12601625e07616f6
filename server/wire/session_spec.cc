#include "server/wire/session_spec.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/wire/request_checks.h"
#include "server/wire/table_ops.h"

namespace sortd {
namespace {

// A table session's column: its type in packed-key terms and its width.
absl::StatusOr<SessionColumnSpec> ColumnSpecFromProto(const v1::SessionColumn& column, int c) {
  const std::string field = absl::StrCat("columns[", c, "]");
  SessionColumnSpec spec;
  spec.name = column.name();
  spec.has_validity = column.has_validity();
  auto narrow = [&](NarrowType type) {
    spec.kind = TableKey::Kind::kNarrow;
    spec.narrow = type;
    spec.width = NarrowWidth(type);
  };
  switch (column.type()) {
    case v1::ELEMENT_TYPE_INT8: narrow(NarrowType::kInt8); break;
    case v1::ELEMENT_TYPE_UINT8: narrow(NarrowType::kUint8); break;
    case v1::ELEMENT_TYPE_INT16: narrow(NarrowType::kInt16); break;
    case v1::ELEMENT_TYPE_UINT16: narrow(NarrowType::kUint16); break;
    case v1::ELEMENT_TYPE_FLOAT16: narrow(NarrowType::kFloat16); break;
    case v1::ELEMENT_TYPE_BFLOAT16: narrow(NarrowType::kBFloat16); break;
    case v1::ELEMENT_TYPE_BOOL: narrow(NarrowType::kBool); break;
    case v1::ELEMENT_TYPE_DATETIME64:
    case v1::ELEMENT_TYPE_TIMEDELTA64:
      if (column.unit() == v1::TIME_UNIT_UNSPECIFIED || !v1::TimeUnit_IsValid(column.unit())) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ".unit: required for ", v1::ElementType_Name(column.type()),
            column.unit() == v1::TIME_UNIT_UNSPECIFIED ? "" : absl::StrCat(" (got ", column.unit(), ")")));
      }
      spec.kind = TableKey::Kind::kTime;
      spec.type = DataType::kInt64;
      spec.width = 8;
      break;
    default: {
      absl::StatusOr<std::optional<DataType>> type =
          ValidateElementType(column.type(), absl::StrCat(field, ".type"), /*optional=*/false);
      if (!type.ok()) return type.status();
      spec.kind = TableKey::Kind::kNumeric;
      spec.type = **type;
      spec.width = ElementSize(spec.type);
    }
  }
  return spec;
}

absl::Status TableSpecFromProto(const v1::StartSortSessionRequest& request, SessionSpec* spec) {
  if (request.key_type() != v1::ELEMENT_TYPE_UNSPECIFIED ||
      request.value_type() != v1::ELEMENT_TYPE_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        "key_type, value_type: leave them unset in a table session (the columns have the types)");
  }
  if (request.transfer_only()) {
    return absl::InvalidArgumentError("transfer_only: not for table sessions");
  }
  absl::Status count = ValidateColumnCount(request.columns_size());
  if (!count.ok()) return count;
  // Rows are numbered in 32 bits while sorting (core/table_keys.h).
  if (request.total_keys() > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "total_keys: ", request.total_keys(), " rows; a table session sorts fewer than 2^32"));
  }
  for (int c = 0; c < request.columns_size(); ++c) {
    absl::StatusOr<SessionColumnSpec> column = ColumnSpecFromProto(request.columns(c), c);
    if (!column.ok()) return column.status();
    spec->columns.push_back(*std::move(column));
  }
  absl::Status keys = ValidateSortKeys(request.by(), request.columns_size());
  if (!keys.ok()) return keys;
  for (const v1::SortKey& key : request.by()) {
    spec->by.push_back({key.column(), ToCoreOrder(key.order()), ToCoreNulls(key.nulls())});
  }
  spec->return_columns = request.return_columns();
  spec->return_indices = true;
  // Routing and metrics label table sessions as uint64 (their words).
  spec->key_type = DataType::kUint64;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SessionSpec> SessionSpecFromProto(const v1::StartSortSessionRequest& request) {
  absl::Status id_ok = ValidateRequestId(request.request_id());
  if (!id_ok.ok()) return id_ok;
  SessionSpec spec;
  spec.request_id = request.request_id();
  spec.total_keys = request.total_keys();
  if (request.columns_size() > 0) {
    absl::Status table = TableSpecFromProto(request, &spec);
    if (!table.ok()) return table;
    return spec;
  }
  if (request.by_size() > 0 || request.return_columns()) {
    return absl::InvalidArgumentError("by, return_columns: a table session needs columns");
  }
  absl::Status order_ok = ValidateOrder(request.order());
  if (!order_ok.ok()) return order_ok;
  absl::StatusOr<std::optional<DataType>> key_type =
      ValidateElementType(request.key_type(), "key_type", /*optional=*/false);
  if (!key_type.ok()) return key_type.status();
  absl::StatusOr<std::optional<DataType>> value_type =
      ValidateElementType(request.value_type(), "value_type", /*optional=*/true);
  if (!value_type.ok()) return value_type.status();
  spec.key_type = **key_type;
  spec.value_type = *value_type;
  spec.order = ToCoreOrder(request.order());
  spec.return_indices = request.return_indices();
  spec.transfer_only = request.transfer_only();
  return spec;
}

}  // namespace sortd
