#include "server/wire/table_column_types.h"

#include "absl/strings/str_cat.h"
#include "server/wire/request_checks.h"
#include "sortd/v1/sort.pb.h"

namespace sortd {

absl::StatusOr<TableColumnType> TableColumnTypeOf(int type, int unit, absl::string_view type_field,
                                                  absl::string_view unit_field) {
  TableColumnType out;
  auto narrow = [&](NarrowType narrow_type) {
    out.kind = TableKey::Kind::kNarrow;
    out.narrow = narrow_type;
    out.width = NarrowWidth(narrow_type);
  };
  switch (type) {
    case v1::ELEMENT_TYPE_INT8: narrow(NarrowType::kInt8); break;
    case v1::ELEMENT_TYPE_UINT8: narrow(NarrowType::kUint8); break;
    case v1::ELEMENT_TYPE_INT16: narrow(NarrowType::kInt16); break;
    case v1::ELEMENT_TYPE_UINT16: narrow(NarrowType::kUint16); break;
    case v1::ELEMENT_TYPE_FLOAT16: narrow(NarrowType::kFloat16); break;
    case v1::ELEMENT_TYPE_BFLOAT16: narrow(NarrowType::kBFloat16); break;
    case v1::ELEMENT_TYPE_BOOL: narrow(NarrowType::kBool); break;
    case v1::ELEMENT_TYPE_DATETIME64:
    case v1::ELEMENT_TYPE_TIMEDELTA64:
      if (unit == v1::TIME_UNIT_UNSPECIFIED || !v1::TimeUnit_IsValid(unit)) {
        return absl::InvalidArgumentError(absl::StrCat(
            unit_field, ": required for ", v1::ElementType_Name(static_cast<v1::ElementType>(type)),
            unit == v1::TIME_UNIT_UNSPECIFIED ? "" : absl::StrCat(" (got ", unit, ")")));
      }
      out.kind = TableKey::Kind::kTime;
      out.type = DataType::kInt64;
      out.width = 8;
      break;
    default: {
      absl::StatusOr<std::optional<DataType>> numeric =
          ValidateElementType(type, type_field, /*optional=*/false);
      if (!numeric.ok()) return numeric.status();
      out.kind = TableKey::Kind::kNumeric;
      out.type = **numeric;
      out.width = ElementSize(out.type);
    }
  }
  return out;
}

}  // namespace sortd
