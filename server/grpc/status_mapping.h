// The one place where absl::Status (core and server errors) becomes
// grpc::Status. Every handler finishes through it.
#ifndef SORTD_SERVER_GRPC_STATUS_MAPPING_H_
#define SORTD_SERVER_GRPC_STATUS_MAPPING_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace sortd {

grpc::Status ToGrpcStatus(const absl::Status& status);

// The trailing metadata key of gRPC's retry pushback: clients whose retry
// policy retries the code wait that long (a negative value: do not retry).
inline constexpr char kRetryPushbackMetadata[] = "grpc-retry-pushback-ms";

// Adds a refusal's retry hint (admission's kRetryPushbackPayload) to the
// call's trailing metadata, and -1 (do not retry) to any other
// RESOURCE_EXHAUSTED; call before Finish.
void AddRetryHint(grpc::ServerContextBase* ctx, const absl::Status& status);

}  // namespace sortd

#endif  // SORTD_SERVER_GRPC_STATUS_MAPPING_H_
