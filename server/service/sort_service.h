// sortd.v1.SortService on the gRPC callback API. Handlers validate, admit,
// and hand the work to the worker pool; they never block.
#ifndef SORTD_SERVER_SERVICE_SORT_SERVICE_H_
#define SORTD_SERVER_SERVICE_SORT_SERVICE_H_

#include "server/service/service_context.h"
#include "sortd/v1/sort.grpc.pb.h"

namespace sortd {

class SortServiceImpl final : public v1::SortService::CallbackService {
 public:
  explicit SortServiceImpl(ServiceContext* context) : context_(context) {}

  grpc::ServerUnaryReactor* Sort(grpc::CallbackServerContext* ctx,
                                 const v1::SortRequest* request,
                                 v1::SortResponse* response) override;
  grpc::ServerUnaryReactor* SortPairs(grpc::CallbackServerContext* ctx,
                                      const v1::SortPairsRequest* request,
                                      v1::SortPairsResponse* response) override;
  grpc::ServerBidiReactor<v1::SortRequest, v1::SortResponse>* SortStream(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerBidiReactor<v1::SortChunkedRequest, v1::SortChunkedResponse>*
  SortChunked(grpc::CallbackServerContext* ctx) override;

 private:
  ServiceContext* context_;
};

}  // namespace sortd

#endif  // SORTD_SERVER_SERVICE_SORT_SERVICE_H_
