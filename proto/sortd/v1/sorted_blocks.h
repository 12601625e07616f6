// Delta-coded blocks of sorted keys: the body of a SessionPart downloaded
// with PART_ENCODING_DELTA_BLOCKS (docs/api.md, "Compressed downloads").
// Server and clients share this code, so the format has one definition.
//
// A body is a run of blocks. Block b of a download covers keys
// [b * kBlockKeys, ...) of the array, kBlockKeys of them except the array's
// last block. Each block is a 32-byte header, little-endian:
//
//   u8  codec         0 raw, 1 StreamVByte delta (32-bit), 2 nibble delta (64-bit)
//   u8  width         4 or 8: the key's bytes
//   u16 zero
//   u32 count         keys in the block, 1..kBlockKeys
//   u32 payload       bytes that follow this header
//   u32 zero
//   u64 first         the first key's order word
//   u64 check         sum (mod 2^64) of Mix(order word, index in the block)
//
// followed by `payload` bytes. Keys travel as order words: unsigned words
// whose ascending order is the sort's order (signed integers with the sign
// bit flipped; floats by their order-preserving bits: all bits flipped when
// negative, else the sign bit set; every word then inverted for a
// descending sort), so the gaps between neighbours are small and positive.
// Codec 1 is StreamVByte (Lemire's format: (count + 3) / 4 control bytes, 2
// bits a value, value j of a group in bits 2j; then 1-4 data bytes a value,
// little-endian) of the gaps, the first gap taken from `first` (so 0).
// Codec 2: ceil(count / 2) control bytes, a 4-bit byte length 0-8 a gap
// (value 2j in the low nibble), then each gap's low bytes. Codec 0: the
// count keys as they are (a block the others would not shrink). Decoding
// checks every length, the count, and the sum: a corrupt block is an error
// naming it, never a wrong key. Mix is non-linear (sorted_blocks.cc), so a
// changed gap, which moves every later key, does not cancel out. The check
// catches damage; it does not authenticate (TLS does).
#ifndef SORTD_V1_SORTED_BLOCKS_H_
#define SORTD_V1_SORTED_BLOCKS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace sortd::v1::blocks {

inline constexpr uint32_t kBlockKeys = 65536;
inline constexpr size_t kHeaderBytes = 32;

enum class Codec : uint8_t { kRaw = 0, kStreamVByteDelta = 1, kNibbleDelta = 2 };

// How keys map to order words.
struct KeyCoding {
  enum class Kind : uint8_t { kUnsigned, kSigned, kFloat };
  int width = 4;  // bytes: 4 or 8
  Kind kind = Kind::kUnsigned;
  bool descending = false;
};

// The most bytes EncodeBlocks writes for `count` keys of `width` bytes (each
// block at most its raw size plus its header, plus slack the encoders'
// unaligned stores may touch).
size_t MaxEncodedBytes(uint64_t count, int width);

// Encodes keys[0, count) (sorted in coding's order for the gaps to be
// small; any keys round-trip) as ceil(count / kBlockKeys) blocks into `out`
// (MaxEncodedBytes of room). Returns the bytes written.
size_t EncodeBlocks(const void* keys, uint64_t count, const KeyCoding& coding, uint8_t* out);

// Decodes a body of whole blocks holding exactly `count` keys into `out`
// (count keys of coding.width bytes). `first_block` numbers the body's first
// block in the array, for errors ("block 7: ..."). INVALID_ARGUMENT
// (DATA_LOSS for a checksum mismatch) on any inconsistency; `out` may then
// hold part of the keys.
absl::Status DecodeBlocks(const uint8_t* body, size_t bytes, const KeyCoding& coding,
                          uint64_t first_block, uint64_t count, void* out);

namespace testing_only {
// Turns the SIMD paths off (and back on), so that tests can compare them
// with the scalar codecs. Not for production use.
void UseScalarCodecs(bool scalar);
}  // namespace testing_only

}  // namespace sortd::v1::blocks

#endif  // SORTD_V1_SORTED_BLOCKS_H_
