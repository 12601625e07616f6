// The one place where absl::Status (core and server errors) becomes
// grpc::Status. Every handler finishes through it.
#ifndef SORTD_SERVER_GRPC_STATUS_MAPPING_H_
#define SORTD_SERVER_GRPC_STATUS_MAPPING_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace sortd {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace sortd

#endif  // SORTD_SERVER_GRPC_STATUS_MAPPING_H_
