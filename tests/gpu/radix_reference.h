// Shared by the GPU radix core and GPU worker tests: the host reference
// (the sortd order written from the contract: NaNs last and equal, -0.0
// before +0.0), a stable reference permutation, input generators, and the
// skip-without-GPU check.
#ifndef SORTD_TESTS_GPU_RADIX_REFERENCE_H_
#define SORTD_TESTS_GPU_RADIX_REFERENCE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "core/cuda/radix_sort.cuh"

namespace sortd::cuda::testing {

inline bool HaveGpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// A device allocation freed at scope exit.
struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) {
    EXPECT_EQ(cudaMalloc(&ptr, std::max<size_t>(bytes, 1)), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Values for stability checks: the input position i (4-byte values), or i
// tagged in the high bits (8-byte values, so all 8 bytes must travel).
inline uint64_t PositionValue(size_t i, int value_bytes) {
  return value_bytes == 8 ? (i | (uint64_t{0xabcd} << 48)) : i;
}

// Uploads PositionValue(i) for i < n as value_bytes-wide values (nothing
// for 0).
inline void UploadPositionValues(void* dev, size_t n, int value_bytes) {
  if (value_bytes == 4) {
    std::vector<uint32_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint32_t>(PositionValue(i, 4));
    EXPECT_EQ(cudaMemcpy(dev, v.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  } else if (value_bytes == 8) {
    std::vector<uint64_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = PositionValue(i, 8);
    EXPECT_EQ(cudaMemcpy(dev, v.data(), n * 8, cudaMemcpyHostToDevice), cudaSuccess);
  }
}

#define SKIP_WITHOUT_GPU() \
  if (!::sortd::cuda::testing::HaveGpu()) GTEST_SKIP() << "no GPU visible"

template <typename T> constexpr RadixKeyType TypeOf();
template <> constexpr RadixKeyType TypeOf<uint32_t>() { return RadixKeyType::kUint32; }
template <> constexpr RadixKeyType TypeOf<int32_t>() { return RadixKeyType::kInt32; }
template <> constexpr RadixKeyType TypeOf<float>() { return RadixKeyType::kFloat32; }
template <> constexpr RadixKeyType TypeOf<uint64_t>() { return RadixKeyType::kUint64; }
template <> constexpr RadixKeyType TypeOf<int64_t>() { return RadixKeyType::kInt64; }
template <> constexpr RadixKeyType TypeOf<double>() { return RadixKeyType::kFloat64; }

// The sortd order, written from the contract: NaNs after everything (and
// equal to each other), -0.0 before +0.0.
template <typename T>
bool Less(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return !std::isnan(a) && std::isnan(b);
    if (a == b) return std::signbit(a) && !std::signbit(b);
  }
  return a < b;
}

template <typename T>
std::vector<uint64_t> ReferenceOrder(const std::vector<T>& keys, bool descending) {
  std::vector<uint64_t> idx(keys.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](uint64_t a, uint64_t b) {
    return descending ? Less(keys[b], keys[a]) : Less(keys[a], keys[b]);
  });
  return idx;
}

template <typename T>
std::vector<T> Random(size_t n, uint64_t seed, uint64_t range_bits = 64) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  for (T& x : v) {
    uint64_t bits = rng();
    if (range_bits < 64) bits &= (uint64_t{1} << range_bits) - 1;
    if constexpr (std::is_floating_point_v<T>) {
      x = range_bits < 64 ? static_cast<T>(bits) : static_cast<T>(static_cast<int64_t>(bits) * 1e-9);
    } else {
      x = static_cast<T>(bits);
    }
  }
  return v;
}

template <typename T>
std::vector<T> FloatSpecials(size_t n, uint64_t seed) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  auto v = Random<T>(n, seed);
  std::mt19937_64 rng(seed);
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T specials[] = {nan, -nan, std::numeric_limits<T>::infinity(),
                        -std::numeric_limits<T>::infinity(), T(0), -T(0),
                        std::numeric_limits<T>::denorm_min(), -std::numeric_limits<T>::denorm_min()};
  for (size_t i = 0; i < n; i += 3) {
    T x = specials[rng() % 8];
    if (std::isnan(x) && rng() % 2) {  // a NaN with another payload
      Bits b;
      std::memcpy(&b, &x, sizeof(b));
      b |= 1 + rng() % 1000;
      std::memcpy(&x, &b, sizeof(b));
    }
    v[i] = x;
  }
  return v;
}

}  // namespace sortd::cuda::testing

#endif  // SORTD_TESTS_GPU_RADIX_REFERENCE_H_
