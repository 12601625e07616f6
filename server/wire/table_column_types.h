// A fixed-width table column's v1::ElementType (and time unit) in
// packed-key terms (core/table_keys.h): shared by table sessions'
// columns (StartSortSessionRequest.columns) and SortTable's columns in
// regions (TableColumn.values_region), so both refuse a type the same way.
#ifndef SORTD_SERVER_WIRE_TABLE_COLUMN_TYPES_H_
#define SORTD_SERVER_WIRE_TABLE_COLUMN_TYPES_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/sortable_keys.h"
#include "core/table_keys.h"
#include "core/types.h"

namespace sortd {

struct TableColumnType {
  TableKey::Kind kind = TableKey::Kind::kNumeric;
  DataType type = DataType::kUint32;       // kNumeric (kTime: kInt64)
  NarrowType narrow = NarrowType::kUint8;  // kNarrow
  size_t width = 4;                        // bytes an element
};

// INVALID_ARGUMENT naming `type_field` for an unset or unknown type, or
// `unit_field` for a datetime64 / timedelta64 without a known unit.
absl::StatusOr<TableColumnType> TableColumnTypeOf(int type, int unit, absl::string_view type_field,
                                                  absl::string_view unit_field);

}  // namespace sortd

#endif  // SORTD_SERVER_WIRE_TABLE_COLUMN_TYPES_H_
