// Order-preserving key transforms on the device (the same map as
// core/key_transform.h): applied when the first pass loads keys and undone
// when the last pass stores them, so they cost no pass of their own.
#ifndef SORTD_CORE_CUDA_RADIX_TRANSFORM_CUH_
#define SORTD_CORE_CUDA_RADIX_TRANSFORM_CUH_

#include <cstdint>

#include "core/cuda/radix_sort.cuh"

namespace sortd::cuda {

enum class KeyClass : int { kUnsigned = 0, kSigned = 1, kFloat = 2 };

inline KeyClass ClassOf(RadixKeyType t) {
  switch (t) {
    case RadixKeyType::kInt32:
    case RadixKeyType::kInt64: return KeyClass::kSigned;
    case RadixKeyType::kFloat32:
    case RadixKeyType::kFloat64: return KeyClass::kFloat;
    default: return KeyClass::kUnsigned;
  }
}

template <typename Word>
struct KeyCodec {
  static constexpr Word kSign = Word{1} << (sizeof(Word) * 8 - 1);
  static constexpr Word kExponent = sizeof(Word) == 4 ? Word{0x7f800000u}
                                                      : Word{0x7ff0000000000000ull};

  __device__ __forceinline__ static bool IsNan(Word bits) {
    return (bits & ~kSign) > kExponent;
  }
  // Original bits -> ordered bits (descending: complemented).
  __device__ __forceinline__ static Word Encode(Word bits, KeyClass c, Word flip) {
    if (c == KeyClass::kSigned) {
      bits ^= kSign;
    } else if (c == KeyClass::kFloat) {
      bits = IsNan(bits) ? ~Word{0} : ((bits & kSign) ? ~bits : (bits | kSign));
    }
    return bits ^ flip;
  }
  // Ordered bits -> original bits (NaNs are never decoded: in NaN mode the
  // originals travel as values).
  __device__ __forceinline__ static Word Decode(Word bits, KeyClass c, Word flip) {
    bits ^= flip;
    if (c == KeyClass::kSigned) return bits ^ kSign;
    if (c == KeyClass::kFloat) return (bits & kSign) ? (bits ^ kSign) : ~bits;
    return bits;
  }
};

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_RADIX_TRANSFORM_CUH_
