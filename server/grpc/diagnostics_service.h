// DiagnosticsService (--diagnostics): Echo and EchoStream return the
// request's keys unchanged, the gRPC baseline that service benchmarks
// compare Sort against. They run on gRPC's threads (no admission, no worker
// pool): they measure transport, not sortd's scheduling. They refuse work
// while the server drains, and EchoStream holds a bounded number of bytes.
#ifndef SORTD_SERVER_GRPC_DIAGNOSTICS_SERVICE_H_
#define SORTD_SERVER_GRPC_DIAGNOSTICS_SERVICE_H_

#include <atomic>

#include "sortd/v1/sort.grpc.pb.h"

namespace sortd {

class DiagnosticsServiceImpl final : public v1::DiagnosticsService::CallbackService {
 public:
  // `draining` is the server's drain flag (ServiceContext::draining).
  explicit DiagnosticsServiceImpl(const std::atomic<bool>* draining) : draining_(draining) {}

  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* ctx, const v1::SortRequest* request,
                                 v1::SortResponse* response) override;
  grpc::ServerBidiReactor<v1::SortRequest, v1::SortResponse>* EchoStream(
      grpc::CallbackServerContext* ctx) override;

 private:
  const std::atomic<bool>* draining_;
};

}  // namespace sortd

#endif  // SORTD_SERVER_GRPC_DIAGNOSTICS_SERVICE_H_
