// Builds without CUDA: no GPU engine.
#include "core/gpu_engine.h"

namespace sortd {

bool GpuEngineBuilt() { return false; }

// The same names as the CUDA build takes, so that flags validate alike.
bool ValidRadixTuning(const std::string& name) { return name == "auto" || name == "h100" || name == "h200"; }

absl::StatusOr<std::unique_ptr<GpuEngine>> GpuEngine::Create(const GpuEngineOptions&) {
  return absl::FailedPreconditionError("this build has no CUDA engine (nvcc was not found)");
}

}  // namespace sortd
