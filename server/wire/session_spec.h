// StartSortSessionRequest -> SessionSpec: the session's fields checked and
// translated here, so the session store takes core terms only.
#ifndef SORTD_SERVER_WIRE_SESSION_SPEC_H_
#define SORTD_SERVER_WIRE_SESSION_SPEC_H_

#include "absl/status/statusor.h"
#include "server/sessions/sort_session.h"
#include "sortd/v1/sort.pb.h"

namespace sortd {

// INVALID_ARGUMENT naming the field: request_id too long, unknown order,
// key_type unset or unknown, value_type unknown; for a table session
// (columns set): a column type or unit, a key, its order or nulls.
absl::StatusOr<SessionSpec> SessionSpecFromProto(const v1::StartSortSessionRequest& request);

}  // namespace sortd

#endif  // SORTD_SERVER_WIRE_SESSION_SPEC_H_
