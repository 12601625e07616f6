// Order-preserving maps from every numeric key type to unsigned bit patterns:
// ascending order of the mapped words is the sortd order of the keys
// (-inf < ... < -0.0 < +0.0 < ... < +inf < NaN, every NaN equal and last).
// Used by the CPU engine and, later, inside the first/last GPU radix pass.
#ifndef SORTD_CORE_KEY_TRANSFORM_H_
#define SORTD_CORE_KEY_TRANSFORM_H_

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace sortd {

template <typename T>
struct OrderedBits {
  using Word = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  static constexpr Word kSignBit = Word{1} << (sizeof(Word) * 8 - 1);
  static constexpr Word kAllOnes = ~Word{0};

  static Word Encode(T key) {
    Word bits;
    std::memcpy(&bits, &key, sizeof(bits));
    if constexpr (std::is_floating_point_v<T>) {
      if (key != key) return kAllOnes;  // every NaN: one key, after +inf
      return (bits & kSignBit) ? ~bits : (bits | kSignBit);
    } else if constexpr (std::is_signed_v<T>) {
      return bits ^ kSignBit;
    } else {
      return bits;
    }
  }

  // Inverse of Encode for every word Encode produces, except that the NaN
  // word decodes to one canonical NaN (callers restore payloads themselves).
  static T Decode(Word word) {
    Word bits;
    if constexpr (std::is_floating_point_v<T>) {
      bits = (word & kSignBit) ? (word ^ kSignBit) : ~word;
    } else if constexpr (std::is_signed_v<T>) {
      bits = word ^ kSignBit;
    } else {
      bits = word;
    }
    T key;
    std::memcpy(&key, &bits, sizeof(key));
    return key;
  }
};

}  // namespace sortd

#endif  // SORTD_CORE_KEY_TRANSFORM_H_
