// Fuzzer of the delta-coded download blocks (proto/sortd/v1/sorted_blocks.h),
// what a client decodes from a server it may not trust.
//
// Byte 0 picks the coding: bit 0 width (4 or 8 bytes), bits 1-2 the kind
// (mod 3: unsigned, signed, float), bit 3 descending. Byte 1: bit 0 the mode.
//   Mode 0, hostile bodies: bytes 2-4 are the key count (mod 3 blocks + 1),
//     the rest a body. Decoding must return an error or the count of keys,
//     never read or write out of bounds (ASan).
//   Mode 1, damaged encodings: the rest are keys (whole elements), sorted in
//     the coding's order when byte 1 bit 1 is set; they are encoded and must
//     decode bit for bit; then byte 2 picks a byte of the body to flip (by
//     byte 3): decoding that must fail or give the very same keys.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "sortd/v1/sorted_blocks.h"
#include "tests/fuzz/fuzz_oracle.h"

namespace sortd::fuzz {
namespace {

namespace blocks = v1::blocks;

template <typename W>
W OrderWord(W x, const blocks::KeyCoding& c) {
  constexpr W kSign = W{1} << (sizeof(W) * 8 - 1);
  W y = x;
  if (c.kind == blocks::KeyCoding::Kind::kSigned) y = x ^ kSign;
  if (c.kind == blocks::KeyCoding::Kind::kFloat) y = (x & kSign) ? W(~x) : W(x | kSign);
  return c.descending ? W(~y) : y;
}

template <typename W>
void RoundTrip(const uint8_t* data, size_t size, const blocks::KeyCoding& c, bool sort,
               uint8_t flip_at, uint8_t flip_with) {
  std::vector<W> keys(size / sizeof(W));
  if (keys.empty()) return;
  std::memcpy(keys.data(), data, keys.size() * sizeof(W));
  if (sort) {
    std::sort(keys.begin(), keys.end(),
              [&](W a, W b) { return OrderWord(a, c) < OrderWord(b, c); });
  }
  std::vector<uint8_t> body(blocks::MaxEncodedBytes(keys.size(), sizeof(W)));
  body.resize(blocks::EncodeBlocks(keys.data(), keys.size(), c, body.data()));
  std::vector<W> back(keys.size());
  const absl::Status decoded =
      blocks::DecodeBlocks(body.data(), body.size(), c, 0, keys.size(), back.data());
  Check(decoded.ok(), "a fresh encoding does not decode: " + decoded.ToString());
  Check(std::memcmp(back.data(), keys.data(), keys.size() * sizeof(W)) == 0,
        "the keys did not round-trip");
  if (body.empty() || flip_with == 0) return;
  body[(flip_at * body.size()) / 256] ^= flip_with;
  std::vector<W> damaged(keys.size());
  const absl::Status status =
      blocks::DecodeBlocks(body.data(), body.size(), c, 0, keys.size(), damaged.data());
  Check(!status.ok() || std::memcmp(damaged.data(), keys.data(), keys.size() * sizeof(W)) == 0,
        "a damaged body decoded to other keys");
}

}  // namespace
}  // namespace sortd::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sortd::fuzz;
  if (size < 4) return 0;
  blocks::KeyCoding c;
  c.width = (data[0] & 1) ? 8 : 4;
  c.kind = static_cast<blocks::KeyCoding::Kind>(((data[0] >> 1) & 3) % 3);
  c.descending = (data[0] & 8) != 0;
  if ((data[1] & 1) == 0) {
    const uint64_t count = (uint64_t{data[2]} | uint64_t{data[3]} << 8 |
                            static_cast<uint64_t>(size > 4 ? data[4] : 0) << 16) %
                           (3 * blocks::kBlockKeys + 1);
    const size_t skip = std::min<size_t>(size, 5);
    std::vector<uint8_t> body(data + skip, data + size);  // exactly its bytes (ASan sees over-reads)
    std::vector<uint8_t> out(count * c.width);
    const absl::Status status =
        blocks::DecodeBlocks(body.data(), body.size(), c, 0, count, out.data());
    (void)status;
    return 0;
  }
  const bool sort = (data[1] & 2) != 0;
  if (c.width == 8) {
    RoundTrip<uint64_t>(data + 4, size - 4, c, sort, data[2], data[3]);
  } else {
    RoundTrip<uint32_t>(data + 4, size - 4, c, sort, data[2], data[3]);
  }
  return 0;
}
