// The CUDA side of sortd_shm_bench (bench/shm_bench.cc), behind a plain C++
// interface so that the gRPC client code compiles without nvcc: device
// memory to export by CUDA IPC, and the in-process baseline (what a CuPy or
// PyTorch user does on their own: copy to the GPU, sort with CUB, copy back).
#ifndef SORTD_BENCH_SHM_BENCH_CUDA_H_
#define SORTD_BENCH_SHM_BENCH_CUDA_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace sortd::bench {

bool CudaAvailable();
void* DeviceAlloc(size_t bytes);
void DeviceFree(void* memory);
// The 64-byte cudaIpcMemHandle_t of an allocation; false on an error.
bool DeviceIpcHandle(void* memory, char handle[64]);
bool CopyToDevice(void* dst, const void* src, size_t bytes);
bool CopyToHost(void* dst, const void* src, size_t bytes);
void* PinnedAlloc(size_t bytes);
void PinnedFree(void* memory);

// One process, no service: copies `n` u32 keys (and u32 values when given)
// from host memory to the GPU, sorts them with CUB's radix sort and copies
// them back into the same host arrays; returns the seconds of that, device
// buffers and CUB's temp allocated beforehand (as a caching allocator
// would). Negative on a CUDA error (`error` says which).
class LocalCubSort {
 public:
  LocalCubSort(size_t n, bool with_values);
  ~LocalCubSort();
  double Run(uint32_t* keys, uint32_t* values, std::string* error);

 private:
  size_t n_;
  bool with_values_;
  void* d_keys_[2] = {nullptr, nullptr};
  void* d_values_[2] = {nullptr, nullptr};
  void* temp_ = nullptr;
  size_t temp_bytes_ = 0;
};

}  // namespace sortd::bench

#endif  // SORTD_BENCH_SHM_BENCH_CUDA_H_
