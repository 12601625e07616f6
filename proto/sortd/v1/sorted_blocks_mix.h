// The check mixers of the delta-coded key blocks (sorted_blocks.h): a
// block's check is the sum (mod 2^64) of Mix(order word, index in the
// block). Bijective and non-linear (Wellons' lowbias32, SplitMix64's
// finalizer), so damage that shifts a run of keys (a changed gap moves
// every later key) does not cancel out as it can in a plain sum. Header
// only, without abseil, and callable from CUDA: the CPU codecs and the
// device encoder (core/cuda/key_blocks.cu) share this one definition.
#ifndef SORTD_V1_SORTED_BLOCKS_MIX_H_
#define SORTD_V1_SORTED_BLOCKS_MIX_H_

#include <cstdint>

#if defined(__CUDACC__)
#define SORTD_BLOCKS_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define SORTD_BLOCKS_HOST_DEVICE inline
#endif

namespace sortd::v1::blocks {

SORTD_BLOCKS_HOST_DEVICE uint32_t Mix32(uint32_t word, uint32_t index) {
  uint32_t x = word + index * 0x9E3779B9u;
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

SORTD_BLOCKS_HOST_DEVICE uint64_t Mix64(uint64_t word, uint64_t index) {
  uint64_t z = word + index * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace sortd::v1::blocks

#endif  // SORTD_V1_SORTED_BLOCKS_MIX_H_
