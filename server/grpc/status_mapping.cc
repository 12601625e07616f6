// absl and gRPC share the canonical google.rpc.Code numbering, so the code
// maps one to one; the message is carried unchanged.
#include "server/grpc/status_mapping.h"

#include <string>

namespace sortd {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

}  // namespace sortd
