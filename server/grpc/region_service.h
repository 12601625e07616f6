// RegionService: register, unregister and list same-host regions
// (server/regions/regions.h). Each call checks that regions are on and that
// the caller is on this host (a Unix socket or loopback) before anything
// else. Registering maps and pins memory (about 50 ms per GiB to pin), so
// it runs on the worker pool, not on gRPC's threads.
#ifndef SORTD_SERVER_GRPC_REGION_SERVICE_H_
#define SORTD_SERVER_GRPC_REGION_SERVICE_H_

#include "server/grpc/service_context.h"
#include "sortd/v1/sort.grpc.pb.h"

namespace sortd {

class RegionServiceImpl final : public v1::RegionService::CallbackService {
 public:
  explicit RegionServiceImpl(ServiceContext* context) : context_(context) {}

  grpc::ServerUnaryReactor* RegisterSystemRegion(grpc::CallbackServerContext* ctx,
                                                 const v1::RegisterSystemRegionRequest* request,
                                                 v1::RegisterSystemRegionResponse* response) override;
  grpc::ServerUnaryReactor* RegisterCudaRegion(grpc::CallbackServerContext* ctx,
                                               const v1::RegisterCudaRegionRequest* request,
                                               v1::RegisterCudaRegionResponse* response) override;
  grpc::ServerUnaryReactor* UnregisterRegion(grpc::CallbackServerContext* ctx,
                                             const v1::UnregisterRegionRequest* request,
                                             v1::UnregisterRegionResponse* response) override;
  grpc::ServerUnaryReactor* ListRegions(grpc::CallbackServerContext* ctx,
                                        const v1::ListRegionsRequest* request,
                                        v1::ListRegionsResponse* response) override;

 private:
  ServiceContext* const context_;
};

}  // namespace sortd

#endif  // SORTD_SERVER_GRPC_REGION_SERVICE_H_
