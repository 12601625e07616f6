// sortd.v1.SortService on the gRPC callback API. Handlers validate, admit,
// and hand the work to the worker pool; they never block.
#ifndef SORTD_SERVER_GRPC_SORT_SERVICE_H_
#define SORTD_SERVER_GRPC_SORT_SERVICE_H_

#include "server/grpc/service_context.h"
#include "sortd/v1/sort.grpc.pb.h"

namespace sortd {

// Every method is registered raw (bytes in and out, server/grpc/
// raw_message.h): the handlers parse requests themselves, so a message that
// does not parse is answered INVALID_ARGUMENT instead of UNIMPLEMENTED (unary)
// or a silent end of stream.
using RawSortService = v1::SortService::WithRawCallbackMethod_Sort<
    v1::SortService::WithRawCallbackMethod_TopK<
    v1::SortService::WithRawCallbackMethod_SortTable<
    v1::SortService::WithRawCallbackMethod_SortPairs<
        v1::SortService::WithRawCallbackMethod_SortStream<
            v1::SortService::WithRawCallbackMethod_SortChunked<
                v1::SortService::WithRawCallbackMethod_StartSortSession<
                    v1::SortService::WithRawCallbackMethod_UploadParts<
                        v1::SortService::WithRawCallbackMethod_FinishSortSession<
                            v1::SortService::WithRawCallbackMethod_DownloadParts<
                                v1::SortService::WithRawCallbackMethod_EndSortSession<
                                    v1::SortService::Service>>>>>>>>>>>;

class SortServiceImpl final : public RawSortService {
 public:
  explicit SortServiceImpl(ServiceContext* context) : context_(context) {}

  grpc::ServerUnaryReactor* Sort(grpc::CallbackServerContext* ctx,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* SortPairs(grpc::CallbackServerContext* ctx,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* SortTable(grpc::CallbackServerContext* ctx,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* TopK(grpc::CallbackServerContext* ctx,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* SortStream(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* SortChunked(
      grpc::CallbackServerContext* ctx) override;

  // Sort sessions (server/grpc/session_handlers.h).
  grpc::ServerUnaryReactor* StartSortSession(grpc::CallbackServerContext* ctx,
                                             const grpc::ByteBuffer* request,
                                             grpc::ByteBuffer* response) override;
  grpc::ServerReadReactor<grpc::ByteBuffer>* UploadParts(grpc::CallbackServerContext* ctx,
                                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* FinishSortSession(grpc::CallbackServerContext* ctx,
                                              const grpc::ByteBuffer* request,
                                              grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* DownloadParts(grpc::CallbackServerContext* ctx,
                                                            const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* EndSortSession(grpc::CallbackServerContext* ctx,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;

 private:
  ServiceContext* context_;
};

}  // namespace sortd

#endif  // SORTD_SERVER_GRPC_SORT_SERVICE_H_
