// CUDA helpers of sortd_shm_bench (bench/shm_bench_cuda.h).
#include "bench/shm_bench_cuda.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cstring>
#include <cub/device/device_radix_sort.cuh>

namespace sortd::bench {

bool CudaAvailable() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

void* DeviceAlloc(size_t bytes) {
  void* memory = nullptr;
  return cudaMalloc(&memory, bytes) == cudaSuccess ? memory : nullptr;
}

void DeviceFree(void* memory) { cudaFree(memory); }

bool DeviceIpcHandle(void* memory, char handle[64]) {
  cudaIpcMemHandle_t ipc{};
  if (cudaIpcGetMemHandle(&ipc, memory) != cudaSuccess) return false;
  static_assert(sizeof(ipc) == 64, "cudaIpcMemHandle_t is 64 bytes");
  std::memcpy(handle, &ipc, 64);
  return true;
}

bool CopyToDevice(void* dst, const void* src, size_t bytes) {
  return cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
}

bool CopyToHost(void* dst, const void* src, size_t bytes) {
  return cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
}

void* PinnedAlloc(size_t bytes) {
  void* memory = nullptr;
  return cudaMallocHost(&memory, bytes) == cudaSuccess ? memory : nullptr;
}

void PinnedFree(void* memory) { cudaFreeHost(memory); }

LocalCubSort::LocalCubSort(size_t n, bool with_values) : n_(n), with_values_(with_values) {
  for (int i = 0; i < 2; ++i) {
    cudaMalloc(&d_keys_[i], n * 4);
    if (with_values) cudaMalloc(&d_values_[i], n * 4);
  }
  cub::DoubleBuffer<uint32_t> keys(static_cast<uint32_t*>(d_keys_[0]),
                                   static_cast<uint32_t*>(d_keys_[1]));
  cub::DoubleBuffer<uint32_t> values(static_cast<uint32_t*>(d_values_[0]),
                                     static_cast<uint32_t*>(d_values_[1]));
  if (with_values) {
    cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes_, keys, values, static_cast<int>(n));
  } else {
    cub::DeviceRadixSort::SortKeys(nullptr, temp_bytes_, keys, static_cast<int>(n));
  }
  cudaMalloc(&temp_, temp_bytes_);
}

LocalCubSort::~LocalCubSort() {
  for (int i = 0; i < 2; ++i) {
    cudaFree(d_keys_[i]);
    cudaFree(d_values_[i]);
  }
  cudaFree(temp_);
}

double LocalCubSort::Run(uint32_t* keys, uint32_t* values, std::string* error) {
  const auto start = std::chrono::steady_clock::now();
  cub::DoubleBuffer<uint32_t> k(static_cast<uint32_t*>(d_keys_[0]),
                                static_cast<uint32_t*>(d_keys_[1]));
  cub::DoubleBuffer<uint32_t> v(static_cast<uint32_t*>(d_values_[0]),
                                static_cast<uint32_t*>(d_values_[1]));
  cudaError_t err = cudaMemcpy(k.Current(), keys, n_ * 4, cudaMemcpyHostToDevice);
  if (err == cudaSuccess && with_values_) {
    err = cudaMemcpy(v.Current(), values, n_ * 4, cudaMemcpyHostToDevice);
  }
  size_t temp_bytes = temp_bytes_;
  if (err == cudaSuccess) {
    err = with_values_
              ? cub::DeviceRadixSort::SortPairs(temp_, temp_bytes, k, v, static_cast<int>(n_))
              : cub::DeviceRadixSort::SortKeys(temp_, temp_bytes, k, static_cast<int>(n_));
  }
  if (err == cudaSuccess) err = cudaMemcpy(keys, k.Current(), n_ * 4, cudaMemcpyDeviceToHost);
  if (err == cudaSuccess && with_values_) {
    err = cudaMemcpy(values, v.Current(), n_ * 4, cudaMemcpyDeviceToHost);
  }
  if (err != cudaSuccess) {
    if (error != nullptr) *error = cudaGetErrorString(err);
    return -1;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace sortd::bench
