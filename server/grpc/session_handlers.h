// The sort-session RPCs of SortService (docs/api.md, "Sort sessions"), all
// registered raw: parts are read from and written to gRPC's byte buffers
// directly (sortd/v1/session_part_codec.h), never parsed as protobuf.
#ifndef SORTD_SERVER_GRPC_SESSION_HANDLERS_H_
#define SORTD_SERVER_GRPC_SESSION_HANDLERS_H_

#include <grpcpp/grpcpp.h>

#include "server/grpc/service_context.h"

namespace sortd {

grpc::ServerUnaryReactor* HandleStartSortSession(ServiceContext* context,
                                                 grpc::CallbackServerContext* ctx,
                                                 const grpc::ByteBuffer* request,
                                                 grpc::ByteBuffer* response);
grpc::ServerReadReactor<grpc::ByteBuffer>* HandleUploadParts(ServiceContext* context,
                                                             grpc::CallbackServerContext* ctx,
                                                             grpc::ByteBuffer* response);
grpc::ServerUnaryReactor* HandleFinishSortSession(ServiceContext* context,
                                                  grpc::CallbackServerContext* ctx,
                                                  const grpc::ByteBuffer* request,
                                                  grpc::ByteBuffer* response);
grpc::ServerWriteReactor<grpc::ByteBuffer>* HandleDownloadParts(ServiceContext* context,
                                                                grpc::CallbackServerContext* ctx,
                                                                const grpc::ByteBuffer* request);
grpc::ServerUnaryReactor* HandleEndSortSession(ServiceContext* context,
                                               grpc::CallbackServerContext* ctx,
                                               const grpc::ByteBuffer* request,
                                               grpc::ByteBuffer* response);

}  // namespace sortd

#endif  // SORTD_SERVER_GRPC_SESSION_HANDLERS_H_
