// absl and gRPC share the canonical google.rpc.Code numbering, so the code
// maps one to one; the message is carried unchanged.
#include "server/grpc/status_mapping.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "server/runtime/admission.h"

namespace sortd {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

void AddRetryHint(grpc::ServerContextBase* ctx, const absl::Status& status) {
  if (status.ok()) return;
  if (std::optional<int64_t> ms = RetryPushbackMs(status)) {
    ctx->AddTrailingMetadata(kRetryPushbackMetadata, absl::StrCat(*ms));
  } else if (status.code() == absl::StatusCode::kResourceExhausted) {
    // Other limits (sizes, --max_chunked_bytes) fail the same way again:
    // clients whose retry policy covers the code must not retry them.
    ctx->AddTrailingMetadata(kRetryPushbackMetadata, "-1");
  }
}

}  // namespace sortd
