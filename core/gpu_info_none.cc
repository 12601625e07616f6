// GPU discovery for builds without CUDA: there are no GPUs.
#include "core/gpu_info.h"

namespace sortd {

bool CudaBuilt() { return false; }

std::vector<GpuDevice> ListGpus(std::string* error) {
  if (error != nullptr) error->clear();
  return {};
}

void* AllocatePinnedHost(size_t) { return nullptr; }
void FreePinnedHost(void*, size_t) {}

}  // namespace sortd
