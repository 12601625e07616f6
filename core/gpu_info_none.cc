// GPU discovery for builds without CUDA: there are no GPUs.
#include "core/gpu_info.h"

#include <cstring>

namespace sortd {

bool CudaBuilt() { return false; }

std::vector<GpuDevice> ListGpus(std::string* error) {
  if (error != nullptr) error->clear();
  return {};
}

void* AllocatePinnedHost(size_t) { return nullptr; }
void FreePinnedHost(void*, size_t) {}

bool PinHostRange(void*, size_t, std::string* error) {
  if (error != nullptr) *error = "this sortd was built without CUDA";
  return false;
}
void UnpinHostRange(void*) {}

void* OpenCudaIpcMemory(const void*, int, size_t*, std::string* error) {
  if (error != nullptr) *error = "this sortd was built without CUDA";
  return nullptr;
}
void CloseCudaIpcMemory(void*, int) {}

bool IsDeviceMemory(const void*) { return false; }

bool CopyAnyMemory(void* dst, const void* src, size_t bytes, std::string*) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return true;
}

}  // namespace sortd
