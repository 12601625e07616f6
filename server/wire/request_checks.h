// Checks of request fields every RPC shares (request_id, order, element
// types) and the enum translations between proto and core, in one place:
// the inline, region, chunked and session paths all call these, so a field
// is refused with the same message whichever way it came.
#ifndef SORTD_SERVER_WIRE_REQUEST_CHECKS_H_
#define SORTD_SERVER_WIRE_REQUEST_CHECKS_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/sortable_keys.h"
#include "core/types.h"
#include "sortd/v1/sort.pb.h"

namespace sortd {

// The longest request_id accepted (it is echoed in every response, error
// responses included, and logged): longer ones are INVALID_ARGUMENT.
inline constexpr size_t kMaxRequestIdBytes = 4096;
absl::Status ValidateRequestId(const std::string& request_id,
                               absl::string_view field = "request_id");
// The longest prefix of `request_id` within kMaxRequestIdBytes that ends on
// a UTF-8 character boundary (proto3 strings must stay valid UTF-8, or the
// client cannot parse the response that echoes it).
std::string EchoableRequestId(const std::string& request_id);

// INVALID_ARGUMENT naming `field` for a value outside SortOrder.
absl::Status ValidateOrder(int order, absl::string_view field = "order");
SortOrder ToCoreOrder(v1::SortOrder order);

// INVALID_ARGUMENT naming `field` for a value outside NullPlacement.
absl::Status ValidateNulls(int nulls, absl::string_view field = "nulls");
NullPlacement ToCoreNulls(v1::NullPlacement nulls);

// The core type of a v1::ElementType (session arrays, region slices);
// INVALID_ARGUMENT naming `field` for an unknown value, or for UNSPECIFIED
// unless `optional` (then: no type).
absl::StatusOr<std::optional<DataType>> ValidateElementType(int type, absl::string_view field,
                                                            bool optional);

// The engine a response reports, if any.
std::optional<EngineKind> FromProtoEngine(v1::Engine engine);

}  // namespace sortd

#endif  // SORTD_SERVER_WIRE_REQUEST_CHECKS_H_
