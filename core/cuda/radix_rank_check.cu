// The device check behind count-order ranks (RankMatch::kCountOrder in
// radix_tuning.cuh; RadixRanksFor in radix_sort.cuh): warps add 1 to
// per-warp rows of 256 shared counters, kCheckItems keys a lane in a row
// with no barrier between them, as the count-order kernel does, and every
// returned value is compared with the stable rank that a count taken key
// by key, lanes in order, gives. Digit patterns vary from one digit a warp
// to 256, with a hot digit in some rounds and trailing lanes inactive in
// others (a tile's padding).
#include <cstdint>

#include "core/cuda/radix_sort.cuh"

namespace sortd::cuda {
namespace {

constexpr int kCheckThreads = 384;  // the profiles' block size
constexpr int kCheckWarps = kCheckThreads / 32;
constexpr int kCheckItems = 32;  // the most keys a lane of any profile ranks
constexpr int kCheckBins = 256;

__device__ __forceinline__ uint32_t Mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// result[0]: lanes checked, result[1]: lanes whose count was not their
// stable rank. reverse_lanes (tests of the check): the lanes add one at a
// time from lane 31 down, as hardware returning counts in reverse lane
// order would.
__global__ void __launch_bounds__(kCheckThreads, 2)
CountOrderCheckKernel(int rounds, uint32_t seed, bool reverse_lanes, unsigned long long* result) {
  __shared__ unsigned int counts[kCheckWarps][kCheckBins];
  __shared__ unsigned int shadow[kCheckWarps][kCheckBins];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int b = lane; b < kCheckBins; b += 32) counts[warp][b] = shadow[warp][b] = 0;
  __syncwarp();
  unsigned long long checked = 0, wrong = 0;
  for (int r = 0; r < rounds; ++r) {
    const uint32_t h = Mix(seed ^ (blockIdx.x * 7919u + r * 104729u + warp * 131u));
    const int bits = h % 9;  // 1 to 256 digits
    const bool hot = (h >> 8) % 4 == 0;
    // Some rounds end like a last tile: lanes from `tail_lane` have no keys
    // from item `tail_item` on.
    const bool tail = (h >> 12) % 4 == 0;
    const int tail_item = (h >> 16) % kCheckItems, tail_lane = (h >> 21) % 32;
    unsigned int digit[kCheckItems], got[kCheckItems];
#pragma unroll
    for (int k = 0; k < kCheckItems; ++k) {
      const uint32_t mine = Mix(h ^ (lane * 2654435761u) ^ (k * 0x85ebca6bu));
      digit[k] = mine & ((1u << bits) - 1);
      if (hot && (mine >> 20) % 3 == 0) digit[k] = 0;
    }
    auto has_key = [&](int k) { return !tail || k < tail_item || lane < tail_lane; };
    if (!reverse_lanes) {
#pragma unroll
      for (int k = 0; k < kCheckItems; ++k) {
        if (has_key(k)) got[k] = atomicAdd(&counts[warp][digit[k]], 1u);
      }
    } else {
#pragma unroll
      for (int k = 0; k < kCheckItems; ++k) {
        for (int l = 31; l >= 0; --l) {
          if (lane == l && has_key(k)) got[k] = atomicAdd(&counts[warp][digit[k]], 1u);
          __syncwarp();
        }
      }
    }
    __syncwarp();
#pragma unroll
    for (int k = 0; k < kCheckItems; ++k) {
      const bool present = has_key(k);
      const unsigned int present_lanes = __ballot_sync(0xffffffffu, present);
      const unsigned int peers = __match_any_sync(0xffffffffu, digit[k]) & present_lanes;
      const unsigned int base = present ? shadow[warp][digit[k]] : 0;
      __syncwarp();
      if (present && lane == 31 - __clz(peers)) shadow[warp][digit[k]] = base + __popc(peers);
      __syncwarp();
      if (present) {
        ++checked;
        wrong += got[k] != base + __popc(peers & ((1u << lane) - 1));
      }
    }
  }
  checked = __reduce_add_sync(0xffffffffu, static_cast<unsigned int>(checked));
  wrong = __reduce_add_sync(0xffffffffu, static_cast<unsigned int>(wrong));
  if (lane == 0) {
    atomicAdd(&result[0], checked);
    atomicAdd(&result[1], wrong);
  }
}

}  // namespace

cudaError_t CheckCountOrderRanks(int device, int rounds, unsigned long long* lanes_checked,
                                 unsigned long long* lanes_wrong, bool reverse_lanes) {
  int previous = 0;
  if (cudaError_t err = cudaGetDevice(&previous); err != cudaSuccess) return err;
  if (cudaError_t err = cudaSetDevice(device); err != cudaSuccess) return err;
  int sms = 0;
  cudaStream_t stream = nullptr;
  unsigned long long* result = nullptr;
  unsigned long long host[2] = {0, 0};
  cudaError_t err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err == cudaSuccess) err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (err == cudaSuccess) err = cudaMalloc(&result, sizeof(host));
  if (err == cudaSuccess) err = cudaMemsetAsync(result, 0, sizeof(host), stream);
  if (err == cudaSuccess) {
    // Two blocks an SM: warps of other blocks contend for the SM's shared
    // memory meanwhile, as in a sort.
    CountOrderCheckKernel<<<2 * sms, kCheckThreads, 0, stream>>>(rounds, 0x9e3779b9u, reverse_lanes, result);
    err = cudaGetLastError();
  }
  if (err == cudaSuccess) err = cudaMemcpyAsync(host, result, sizeof(host), cudaMemcpyDeviceToHost, stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (result != nullptr) cudaFree(result);
  if (stream != nullptr) cudaStreamDestroy(stream);
  cudaSetDevice(previous);
  if (err != cudaSuccess) return err;
  *lanes_checked = host[0];
  *lanes_wrong = host[1];
  return cudaSuccess;
}

}  // namespace sortd::cuda
