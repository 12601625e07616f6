// The delta-coded download blocks (proto/sortd/v1/sorted_blocks.h): every
// key type and order round-trips bit for bit (NaN payloads, signed zeros,
// unsorted input too), sorted keys shrink, the StreamVByte payloads are the
// ones Lemire's library writes and reads, the SIMD codecs write and read
// what the scalar ones do, and damage is an error naming the block, never
// different keys.
#include "sortd/v1/sorted_blocks.h"

#include <streamvbyte.h>
#include <streamvbytedelta.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace sortd::v1::blocks {
namespace {

using Kind = KeyCoding::Kind;

template <typename W>
std::vector<uint8_t> Encode(const std::vector<W>& keys, const KeyCoding& c) {
  std::vector<uint8_t> out(MaxEncodedBytes(keys.size(), sizeof(W)));
  out.resize(EncodeBlocks(keys.data(), keys.size(), c, out.data()));
  return out;
}

template <typename W>
absl::Status Decode(const std::vector<uint8_t>& body, const KeyCoding& c, size_t count,
                    std::vector<W>* out, uint64_t first_block = 0) {
  out->assign(count, 0);
  return DecodeBlocks(body.data(), body.size(), c, first_block, count, out->data());
}

// Random words of a kind, some sorted in the coding's order.
template <typename W>
std::vector<W> Words(size_t n, Kind kind, bool sorted, bool descending, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<W> w(n);
  for (W& x : w) x = static_cast<W>(rng() >> (rng() % 40));  // many magnitudes
  if (kind == Kind::kFloat && n > 8) {
    // NaNs with payloads of both signs, signed zeros, infinities.
    const W sign = W{1} << (sizeof(W) * 8 - 1);
    const W exp_all = sizeof(W) == 4 ? W(0x7F800000u) : W(0x7FF0000000000000ull);
    w[0] = exp_all | 1;
    w[1] = sign | exp_all | 7;
    w[2] = 0;
    w[3] = sign;
    w[4] = exp_all;
    w[5] = sign | exp_all;
  }
  if (sorted) {
    KeyCoding c{static_cast<int>(sizeof(W)), kind, descending};
    // Sorted by order word: what a sort hands the encoder.
    std::vector<std::pair<W, W>> by(n);
    for (size_t i = 0; i < n; ++i) {
      W y = w[i];
      const W sign = W{1} << (sizeof(W) * 8 - 1);
      if (kind == Kind::kSigned) y ^= sign;
      if (kind == Kind::kFloat) y = (y & sign) ? W(~y) : W(y | sign);
      if (descending) y = W(~y);
      by[i] = {y, w[i]};
    }
    std::sort(by.begin(), by.end());
    for (size_t i = 0; i < n; ++i) w[i] = by[i].second;
    (void)c;
  }
  return w;
}

template <typename W>
void RoundTrips() {
  for (Kind kind : {Kind::kUnsigned, Kind::kSigned, Kind::kFloat}) {
    for (bool descending : {false, true}) {
      for (bool sorted : {true, false}) {
        for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{4}, size_t{5}, size_t{65535},
                         size_t{65536}, size_t{65537}, size_t{3 * 65536 + 17}}) {
          SCOPED_TRACE(::testing::Message() << "width " << sizeof(W) << " kind "
                                          << static_cast<int>(kind) << " desc " << descending
                                          << " sorted " << sorted << " n " << n);
          const std::vector<W> keys = Words<W>(n, kind, sorted, descending, n * 7 + sorted);
          const KeyCoding c{static_cast<int>(sizeof(W)), kind, descending};
          const std::vector<uint8_t> body = Encode(keys, c);
          EXPECT_LE(body.size(), MaxEncodedBytes(n, sizeof(W)));
          std::vector<W> back;
          ASSERT_TRUE(Decode(body, c, n, &back).ok()) << Decode(body, c, n, &back);
          ASSERT_EQ(back, keys);
          // Never larger than the keys and their headers (blocks that do not
          // shrink travel raw).
          const size_t blocks = (n + kBlockKeys - 1) / kBlockKeys;
          EXPECT_LE(body.size(), n * sizeof(W) + blocks * kHeaderBytes);
        }
      }
    }
  }
}

TEST(SortedBlocksTest, EveryKindAndOrderRoundTripsBitForBit32) { RoundTrips<uint32_t>(); }
TEST(SortedBlocksTest, EveryKindAndOrderRoundTripsBitForBit64) { RoundTrips<uint64_t>(); }

// The SIMD codecs (SSE4.1, where the CPU has it) against the scalar ones:
// the same body bytes, and each decodes the other's.
TEST(SortedBlocksTest, SimdCodecsMatchTheScalarOnes) {
  for (Kind kind : {Kind::kUnsigned, Kind::kSigned, Kind::kFloat}) {
    for (bool descending : {false, true}) {
      for (bool sorted : {true, false}) {
        for (size_t n : {size_t{3}, size_t{4}, size_t{7}, size_t{64}, size_t{65537},
                         size_t{2 * 65536 + 4097}}) {
          SCOPED_TRACE(::testing::Message() << "kind " << static_cast<int>(kind) << " desc "
                                          << descending << " sorted " << sorted << " n " << n);
          const std::vector<uint32_t> keys = Words<uint32_t>(n, kind, sorted, descending, n + 5);
          const KeyCoding c{4, kind, descending};
          const std::vector<uint8_t> simd = Encode(keys, c);
          testing_only::UseScalarCodecs(true);
          const std::vector<uint8_t> scalar = Encode(keys, c);
          std::vector<uint32_t> by_scalar;
          const absl::Status scalar_decoded = Decode(simd, c, n, &by_scalar);
          testing_only::UseScalarCodecs(false);
          ASSERT_EQ(simd, scalar);
          ASSERT_TRUE(scalar_decoded.ok()) << scalar_decoded;
          EXPECT_EQ(by_scalar, keys);
          std::vector<uint32_t> by_simd;
          ASSERT_TRUE(Decode(scalar, c, n, &by_simd).ok());
          EXPECT_EQ(by_simd, keys);
        }
      }
    }
  }
}

TEST(SortedBlocksTest, SortedUniformKeysShrink) {
  // 2^20 uniform u32 keys sorted: a mean gap of 4096, about 2 bytes a key.
  std::mt19937 rng(3);
  std::vector<uint32_t> u32(1 << 20);
  for (uint32_t& x : u32) x = rng();
  std::sort(u32.begin(), u32.end());
  const std::vector<uint8_t> a = Encode(u32, KeyCoding{4, Kind::kUnsigned, false});
  EXPECT_LT(a.size(), u32.size() * 4 * 6 / 10);
  std::mt19937_64 rng64(4);
  std::vector<uint64_t> u64(1 << 20);
  for (uint64_t& x : u64) x = rng64();
  std::sort(u64.begin(), u64.end());
  const std::vector<uint8_t> b = Encode(u64, KeyCoding{8, Kind::kUnsigned, false});
  EXPECT_LT(b.size(), u64.size() * 8 * 85 / 100);  // gaps of ~2^44: 6 bytes and a nibble
}

TEST(SortedBlocksTest, StreamVByteBlocksAreLemiresFormat) {
  // A block's payload is what libstreamvbyte's delta encoder writes (from
  // the first key), and its decoder reads it back.
  std::mt19937 rng(5);
  std::vector<uint32_t> keys(kBlockKeys + 1000);
  for (uint32_t& x : keys) x = rng() >> (rng() % 32);
  std::sort(keys.begin(), keys.end());
  const std::vector<uint8_t> body = Encode(keys, KeyCoding{4, Kind::kUnsigned, false});
  std::vector<uint8_t> theirs(streamvbyte_max_compressedbytes(kBlockKeys));
  const size_t bytes = streamvbyte_delta_encode(keys.data(), kBlockKeys, theirs.data(), keys[0]);
  ASSERT_EQ(body[0], 1);  // codec 1
  uint32_t payload;
  std::memcpy(&payload, body.data() + 8, 4);
  ASSERT_EQ(payload, bytes);
  EXPECT_EQ(0, std::memcmp(body.data() + kHeaderBytes, theirs.data(), bytes));
  std::vector<uint32_t> decoded(kBlockKeys);
  streamvbyte_delta_decode(body.data() + kHeaderBytes, decoded.data(), kBlockKeys, keys[0]);
  EXPECT_TRUE(std::equal(decoded.begin(), decoded.end(), keys.begin()));
}

TEST(SortedBlocksTest, DamageIsAnErrorNamingTheBlock) {
  std::mt19937 rng(6);
  std::vector<uint32_t> keys(3 * kBlockKeys);
  for (uint32_t& x : keys) x = rng();
  std::sort(keys.begin(), keys.end());
  const KeyCoding c{4, Kind::kUnsigned, false};
  const std::vector<uint8_t> body = Encode(keys, c);
  uint32_t payload0;
  std::memcpy(&payload0, body.data() + 8, 4);
  const size_t second = kHeaderBytes + payload0;  // where block 1 starts
  std::vector<uint32_t> out;
  // Numbered from first_block: the body's blocks are blocks 10, 11, 12.
  auto error_of = [&](std::vector<uint8_t> damaged) {
    return Decode(damaged, c, keys.size(), &out, 10).ToString();
  };
  {  // a data byte of block 11: the checksum
    std::vector<uint8_t> d = body;
    d[second + kHeaderBytes + kBlockKeys / 4 + 100] ^= 0x01;
    EXPECT_NE(error_of(d).find("block 11: the keys do not match its checksum"), std::string::npos)
        << error_of(d);
  }
  {  // a control byte of block 11: the lengths no longer add up
    std::vector<uint8_t> d = body;
    d[second + kHeaderBytes + 5] ^= 0x03;
    EXPECT_NE(error_of(d).find("block 11: its control bytes"), std::string::npos) << error_of(d);
  }
  {  // a count
    std::vector<uint8_t> d = body;
    d[second + 4] ^= 0x01;
    EXPECT_NE(error_of(d).find("block 11: holds"), std::string::npos) << error_of(d);
  }
  {  // truncated inside block 12, and one byte too many
    std::vector<uint8_t> d(body.begin(), body.end() - 10);
    EXPECT_NE(error_of(d).find("block 12: payload of"), std::string::npos) << error_of(d);
    std::vector<uint8_t> e = body;
    e.push_back(0);
    EXPECT_NE(error_of(e).find("1 bytes after the last block"), std::string::npos) << error_of(e);
  }
  {  // an unknown codec, a wrong width, reserved bytes
    std::vector<uint8_t> d = body;
    d[0] = 7;
    EXPECT_NE(error_of(d).find("block 10: unknown codec 7"), std::string::npos) << error_of(d);
    d = body;
    d[1] = 8;
    EXPECT_NE(error_of(d).find("block 10: width 8"), std::string::npos) << error_of(d);
    d = body;
    d[13] = 1;
    EXPECT_NE(error_of(d).find("block 10: reserved"), std::string::npos) << error_of(d);
  }
  EXPECT_TRUE(Decode(body, c, keys.size(), &out).ok());
  EXPECT_EQ(out, keys);
}

TEST(SortedBlocksTest, NibbleBlocksRefuseLongGapsAndBadSums) {
  std::vector<uint64_t> keys(1000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i * 1000003;
  const KeyCoding c{8, Kind::kUnsigned, false};
  std::vector<uint8_t> body = Encode(keys, c);
  ASSERT_EQ(body[0], 2);  // codec 2
  std::vector<uint64_t> out;
  std::vector<uint8_t> d = body;
  d[kHeaderBytes + 3] = 0x9F;  // a 9-byte and a 15-byte gap
  EXPECT_NE(Decode(d, c, keys.size(), &out).ToString().find("block 0: key 6: a 15-byte gap"),
            std::string::npos)
      << Decode(d, c, keys.size(), &out);
  d = body;
  d[24] ^= 0x40;  // the sum
  EXPECT_EQ(Decode(d, c, keys.size(), &out).code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace sortd::v1::blocks
