// RegionService handlers over the server's RegionRegistry.
#include "server/grpc/region_service.h"

#include <string>

#include "server/grpc/guarded.h"
#include "server/grpc/status_mapping.h"
#include "server/regions/regions.h"
#include "server/runtime/calls_in_flight.h"
#include "server/wire/region_ops.h"

namespace sortd {
namespace {

v1::RegionKind ToProtoKind(RegionKind kind) {
  return kind == RegionKind::kSystem ? v1::REGION_KIND_SYSTEM : v1::REGION_KIND_CUDA;
}

// Checks access, then runs `work` (returning a status) on the worker pool
// and finishes the call with it.
template <typename Work>
grpc::ServerUnaryReactor* Serve(ServiceContext* context, grpc::CallbackServerContext* ctx,
                                const char* method, Work work) {
  CountCallForDrain(ctx);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::Status status = context->CheckNotDraining();
  if (status.ok()) status = CheckRegionAccess(context->regions, ctx->peer());
  if (!status.ok()) {
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }
  context->pool->Submit([reactor, method, work]() mutable {
    reactor->Finish(ToGrpcStatus(Guarded(method, work)));
  });
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* RegionServiceImpl::RegisterSystemRegion(
    grpc::CallbackServerContext* ctx, const v1::RegisterSystemRegionRequest* request,
    v1::RegisterSystemRegionResponse* response) {
  RegionRegistry* regions = context_->regions;
  return Serve(context_, ctx, "RegisterSystemRegion", [=] {
    absl::StatusOr<std::shared_ptr<const Region>> region = regions->RegisterSystem(
        request->name(), request->shm_key(), request->offset(), request->byte_size());
    if (!region.ok()) return region.status();
    response->set_pinned((*region)->pinned());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* RegionServiceImpl::RegisterCudaRegion(
    grpc::CallbackServerContext* ctx, const v1::RegisterCudaRegionRequest* request,
    v1::RegisterCudaRegionResponse*) {
  RegionRegistry* regions = context_->regions;
  return Serve(context_, ctx, "RegisterCudaRegion", [=] {
    return regions->RegisterCuda(request->name(), request->raw_handle(), request->device_id(),
                                 request->byte_size())
        .status();
  });
}

grpc::ServerUnaryReactor* RegionServiceImpl::UnregisterRegion(
    grpc::CallbackServerContext* ctx, const v1::UnregisterRegionRequest* request,
    v1::UnregisterRegionResponse*) {
  RegionRegistry* regions = context_->regions;
  return Serve(context_, ctx, "UnregisterRegion",
               [=] { return regions->Unregister(request->name()); });
}

grpc::ServerUnaryReactor* RegionServiceImpl::ListRegions(grpc::CallbackServerContext* ctx,
                                                         const v1::ListRegionsRequest*,
                                                         v1::ListRegionsResponse* response) {
  RegionRegistry* regions = context_->regions;
  return Serve(context_, ctx, "ListRegions", [=] {
    for (const std::shared_ptr<const Region>& region : regions->List()) {
      v1::RegionStatus* status = response->add_regions();
      status->set_name(region->name());
      status->set_kind(ToProtoKind(region->kind()));
      status->set_byte_size(region->byte_size());
      status->set_shm_key(region->shm_key());
      status->set_device_id(region->device());
      status->set_pinned(region->pinned());
    }
    return absl::OkStatus();
  });
}

}  // namespace sortd
