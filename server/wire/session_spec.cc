#include "server/wire/session_spec.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/wire/request_checks.h"
#include "server/wire/table_column_types.h"
#include "server/wire/table_ops.h"

namespace sortd {
namespace {

// A table session's column: its type in packed-key terms and its width.
absl::StatusOr<SessionColumnSpec> ColumnSpecFromProto(const v1::SessionColumn& column, int c) {
  const std::string field = absl::StrCat("columns[", c, "]");
  SessionColumnSpec spec;
  spec.name = column.name();
  spec.has_validity = column.has_validity();
  absl::StatusOr<TableColumnType> type = TableColumnTypeOf(
      column.type(), column.unit(), absl::StrCat(field, ".type"), absl::StrCat(field, ".unit"));
  if (!type.ok()) return type.status();
  spec.kind = type->kind;
  spec.type = type->type;
  spec.narrow = type->narrow;
  spec.width = type->width;
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
  spec->return_indices = !request.without_permutation();
  // Routing and metrics label table sessions as uint64 (their words).
  spec->key_type = DataType::kUint64;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SessionSpec> SessionSpecFromProto(const v1::StartSortSessionRequest& request) {
  absl::Status id_ok = ValidateRequestId(request.request_id());
  if (!id_ok.ok()) return id_ok;
  if (!v1::PartEncoding_IsValid(request.key_encoding())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key_encoding: unknown value ", request.key_encoding(),
        " (PART_ENCODING_RAW or PART_ENCODING_DELTA_BLOCKS)"));
  }
  SessionSpec spec;
  spec.request_id = request.request_id();
  spec.total_keys = request.total_keys();
  if (request.columns_size() > 0) {
    // Table sessions send their arrays raw (the response says so).
    absl::Status table = TableSpecFromProto(request, &spec);
    if (!table.ok()) return table;
    return spec;
  }
  if (request.by_size() > 0 || request.return_columns() || request.without_permutation()) {
    return absl::InvalidArgumentError(
        "by, return_columns, without_permutation: a table session needs columns");
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
  spec.delta_keys = request.key_encoding() == v1::PART_ENCODING_DELTA_BLOCKS;
  return spec;
}

}  // namespace sortd
