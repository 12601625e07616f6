// Order-preserving key transforms on the device (the same map as
// core/key_transform.h): applied when the first pass loads keys and undone
// when the last pass stores them, so they cost no pass of their own.
#ifndef SORTD_CORE_CUDA_RADIX_TRANSFORM_CUH_
#define SORTD_CORE_CUDA_RADIX_TRANSFORM_CUH_

#include <cstdint>
#include <type_traits>

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
  // The same test as one float compare, for the histogram's per-key test
  // (H200, 2^26 f32 keys of 3 values: the histogram 74-76 us with this,
  // 79 us with IsNan's mask and integer compare).
  __device__ __forceinline__ static bool IsNanFloat(Word bits) {
    if constexpr (sizeof(Word) == 4) {
      return isnan(__uint_as_float(bits));
    } else {
      return isnan(__longlong_as_double(static_cast<long long>(bits)));
    }
  }
};

// Original bits <-> ordered bits (descending: complemented), branch-free:
// XOR masks chosen on the host per key class. float_mask selects the
// sign-dependent part of the float map. With canonical_nan every NaN
// becomes the largest ordered word (the histogram, and passes when NaNs
// are present); NaNs are never decoded: in NaN mode the originals travel
// as values.
template <typename Word>
struct KeyMasks {
  Word sign = 0;        // XORed always (signed and float classes)
  Word float_mask = 0;  // all ones for floats: negatives are complemented
  Word flip = 0;        // all ones when descending
  bool canonical_nan = false;

  static KeyMasks For(KeyClass c, Word flip_bits, bool nans_present) {
    KeyMasks m;
    m.sign = c == KeyClass::kUnsigned ? Word{0} : KeyCodec<Word>::kSign;
    m.float_mask = c == KeyClass::kFloat ? ~Word{0} : Word{0};
    m.flip = flip_bits;
    m.canonical_nan = c == KeyClass::kFloat && nans_present;
    return m;
  }

  __device__ __forceinline__ Word Encode(Word bits) const {
    using Signed = std::make_signed_t<Word>;
    const Word negative = static_cast<Word>(static_cast<Signed>(bits) >> (sizeof(Word) * 8 - 1));
    const Word x = bits ^ (sign | (float_mask & negative)) ^ flip;
    // A select, not a branch (bitwise &: no short circuit), so that callers'
    // loads are not split into one basic block per key.
    const bool to_nan = canonical_nan & KeyCodec<Word>::IsNan(bits);
    return to_nan ? Word(~Word{0} ^ flip) : x;
  }
  // Encode for float keys known not to be NaN: no select.
  __device__ __forceinline__ Word EncodeFloatNotNan(Word bits) const {
    using Signed = std::make_signed_t<Word>;
    const Word negative = static_cast<Word>(static_cast<Signed>(bits) >> (sizeof(Word) * 8 - 1));
    return bits ^ ((negative | KeyCodec<Word>::kSign) ^ flip);
  }
  __device__ __forceinline__ Word Decode(Word ordered) const {
    using Signed = std::make_signed_t<Word>;
    const Word x = ordered ^ flip;
    const Word top = static_cast<Word>(static_cast<Signed>(x) >> (sizeof(Word) * 8 - 1));
    return x ^ (sign | (float_mask & ~top));
  }
};

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_RADIX_TRANSFORM_CUH_
