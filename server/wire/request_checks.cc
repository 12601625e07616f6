// The shared request checks and proto <-> core enum translations.
#include "server/wire/request_checks.h"

#include "absl/strings/str_cat.h"

namespace sortd {

absl::Status ValidateRequestId(const std::string& request_id, absl::string_view field) {
  if (request_id.size() > kMaxRequestIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", request_id.size(),
                                                   " bytes, more than the ", kMaxRequestIdBytes,
                                                   " allowed"));
  }
  return absl::OkStatus();
}

std::string EchoableRequestId(const std::string& request_id) {
  if (request_id.size() <= kMaxRequestIdBytes) return request_id;
  size_t end = kMaxRequestIdBytes;
  // Back off over continuation bytes (10xxxxxx) to the start of a character.
  while (end > 0 && (static_cast<unsigned char>(request_id[end]) & 0xC0) == 0x80) --end;
  return request_id.substr(0, end);
}

absl::Status ValidateOrder(int order, absl::string_view field) {
  if (!v1::SortOrder_IsValid(order)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": unknown value ", order,
        " (expected SORT_ORDER_ASCENDING or SORT_ORDER_DESCENDING)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateNulls(int nulls, absl::string_view field) {
  if (!v1::NullPlacement_IsValid(nulls)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": unknown value ", nulls, " (expected NULL_PLACEMENT_LAST or NULL_PLACEMENT_FIRST)"));
  }
  return absl::OkStatus();
}

NullPlacement ToCoreNulls(v1::NullPlacement nulls) {
  return nulls == v1::NULL_PLACEMENT_FIRST ? NullPlacement::kFirst : NullPlacement::kLast;
}

SortOrder ToCoreOrder(v1::SortOrder order) {
  return order == v1::SORT_ORDER_DESCENDING ? SortOrder::kDescending
                                            : SortOrder::kAscending;
}

absl::StatusOr<std::optional<DataType>> ValidateElementType(int type, absl::string_view field,
                                                            bool optional) {
  switch (type) {
    case v1::ELEMENT_TYPE_UINT32: return DataType::kUint32;
    case v1::ELEMENT_TYPE_INT32: return DataType::kInt32;
    case v1::ELEMENT_TYPE_FLOAT32: return DataType::kFloat32;
    case v1::ELEMENT_TYPE_UINT64: return DataType::kUint64;
    case v1::ELEMENT_TYPE_INT64: return DataType::kInt64;
    case v1::ELEMENT_TYPE_FLOAT64: return DataType::kFloat64;
    case v1::ELEMENT_TYPE_UNSPECIFIED:
      if (optional) return std::optional<DataType>();
      return absl::InvalidArgumentError(absl::StrCat(field, ": must be set (ELEMENT_TYPE_UINT32 ..."
                                                     " ELEMENT_TYPE_FLOAT64)"));
    default:
      if (type >= v1::ELEMENT_TYPE_INT8 && type <= v1::ELEMENT_TYPE_TIMEDELTA64) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ": ", v1::ElementType_Name(static_cast<v1::ElementType>(type)),
            " is for table columns (StartSortSessionRequest.columns, TableColumn.values_region); "
            "arrays here are ELEMENT_TYPE_UINT32 ... ELEMENT_TYPE_FLOAT64"));
      }
      return absl::InvalidArgumentError(absl::StrCat(field, ": unknown element type ", type));
  }
}

std::optional<EngineKind> FromProtoEngine(v1::Engine engine) {
  switch (engine) {
    case v1::ENGINE_CPU: return EngineKind::kCpu;
    case v1::ENGINE_GPU_RADIX: return EngineKind::kGpuRadix;
    case v1::ENGINE_GPU_MERGE: return EngineKind::kGpuMerge;
    case v1::ENGINE_GPU_SEGMENTED: return EngineKind::kGpuSegmented;
    default: return std::nullopt;
  }
}

}  // namespace sortd
