// Builds without CUDA: no GPU engine.
#include "core/gpu_engine.h"

namespace sortd {

bool GpuEngineBuilt() { return false; }

GpuDispatchProfile GpuDispatchProfileOfDevice(int) { return GpuDispatchProfileFor("h100"); }

absl::StatusOr<std::unique_ptr<GpuEngine>> GpuEngine::Create(const GpuEngineOptions&) {
  return absl::FailedPreconditionError("this build has no CUDA engine (nvcc was not found)");
}

}  // namespace sortd
