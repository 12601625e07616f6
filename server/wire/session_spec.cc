#include "server/wire/session_spec.h"

#include "server/wire/request_checks.h"

namespace sortd {

absl::StatusOr<SessionSpec> SessionSpecFromProto(const v1::StartSortSessionRequest& request) {
  absl::Status id_ok = ValidateRequestId(request.request_id());
  if (!id_ok.ok()) return id_ok;
  absl::Status order_ok = ValidateOrder(request.order());
  if (!order_ok.ok()) return order_ok;
  absl::StatusOr<std::optional<DataType>> key_type =
      ValidateElementType(request.key_type(), "key_type", /*optional=*/false);
  if (!key_type.ok()) return key_type.status();
  absl::StatusOr<std::optional<DataType>> value_type =
      ValidateElementType(request.value_type(), "value_type", /*optional=*/true);
  if (!value_type.ok()) return value_type.status();
  SessionSpec spec;
  spec.request_id = request.request_id();
  spec.key_type = **key_type;
  spec.value_type = *value_type;
  spec.order = ToCoreOrder(request.order());
  spec.return_indices = request.return_indices();
  spec.transfer_only = request.transfer_only();
  spec.total_keys = request.total_keys();
  return spec;
}

}  // namespace sortd
