// The block codecs of sorted_blocks.h. The 32-bit codec encodes and
// decodes four keys a step with SSSE3 shuffles (and SSE4.1 multiplies for
// the check) where the CPU has them, else scalar; the 64-bit one is scalar
// and branch-light (unconditional unaligned stores, the length from the
// gap's magnitude). Debian's libstreamvbyte is built for baseline x86-64
// and decodes at ~0.3 GB/s on the dev VM; the tests check these codecs
// against it, and the SIMD encoder against the scalar one.
#include "sortd/v1/sorted_blocks.h"
#include "sortd/v1/sorted_blocks_mix.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define SORTD_BLOCKS_X86 1
#endif

namespace sortd::v1::blocks {
namespace {

using Kind = KeyCoding::Kind;

// Slack after the last block: the encoders store whole words (the SSE4.1
// one 16 bytes) at a time.
constexpr size_t kSlack = 16;

struct Header {
  uint8_t codec = 0;
  uint8_t width = 0;
  uint32_t count = 0;
  uint32_t payload = 0;
  uint64_t first = 0;
  uint64_t sum = 0;
};

void Store32(uint8_t* at, uint32_t v) { std::memcpy(at, &v, 4); }
void Store64(uint8_t* at, uint64_t v) { std::memcpy(at, &v, 8); }
uint32_t Load32(const uint8_t* at) {
  uint32_t v;
  std::memcpy(&v, at, 4);
  return v;
}
uint64_t Load64(const uint8_t* at) {
  uint64_t v;
  std::memcpy(&v, at, 8);
  return v;
}

void WriteHeader(const Header& h, uint8_t* out) {
  std::memset(out, 0, kHeaderBytes);
  out[0] = h.codec;
  out[1] = h.width;
  Store32(out + 4, h.count);
  Store32(out + 8, h.payload);
  Store64(out + 16, h.first);
  Store64(out + 24, h.sum);
}

Header ReadHeader(const uint8_t* in) {
  Header h;
  h.codec = in[0];
  h.width = in[1];
  h.count = Load32(in + 4);
  h.payload = Load32(in + 8);
  h.first = Load64(in + 16);
  h.sum = Load64(in + 24);
  return h;
}

bool ReservedZero(const uint8_t* in) {
  return in[2] == 0 && in[3] == 0 && Load32(in + 12) == 0;
}

template <typename W>
W ToOrder(W x, const KeyCoding& c) {
  constexpr W kSign = W{1} << (sizeof(W) * 8 - 1);
  W y = x;
  if (c.kind == Kind::kSigned) y = x ^ kSign;
  if (c.kind == Kind::kFloat) y = (x & kSign) ? static_cast<W>(~x) : static_cast<W>(x | kSign);
  return c.descending ? static_cast<W>(~y) : y;
}

template <typename W>
W FromOrder(W y, const KeyCoding& c) {
  constexpr W kSign = W{1} << (sizeof(W) * 8 - 1);
  if (c.descending) y = static_cast<W>(~y);
  if (c.kind == Kind::kSigned) return y ^ kSign;
  if (c.kind == Kind::kFloat) return (y & kSign) ? static_cast<W>(y ^ kSign) : static_cast<W>(~y);
  return y;
}

// The check of a block: Mix32 / Mix64 (sorted_blocks_mix.h) by width.
#if SORTD_BLOCKS_X86
// Mix32's finalizer on four lanes (the index term already added).
__attribute__((target("sse4.1"))) inline __m128i Mix32Lanes(__m128i h) {
  h = _mm_xor_si128(h, _mm_srli_epi32(h, 16));
  h = _mm_mullo_epi32(h, _mm_set1_epi32(0x7FEB352D));
  h = _mm_xor_si128(h, _mm_srli_epi32(h, 15));
  h = _mm_mullo_epi32(h, _mm_set1_epi32(static_cast<int>(0x846CA68Bu)));
  return _mm_xor_si128(h, _mm_srli_epi32(h, 16));
}
#endif

template <typename W>
uint64_t Mix(W word, uint32_t index) {
  if constexpr (sizeof(W) == 4) {
    return Mix32(word, index);
  } else {
    return Mix64(word, index);
  }
}

uint32_t ByteLength32(uint32_t d) {
  return 1 + (d > 0xFFu) + (d > 0xFFFFu) + (d > 0xFFFFFFu);
}

uint32_t ByteLength64(uint64_t d) {
  return d == 0 ? 0 : static_cast<uint32_t>((64 - __builtin_clzll(d) + 7) / 8);
}

template <typename W, Kind K, bool kDescending>
W ToOrderT(W x) {
  constexpr W kSign = W{1} << (sizeof(W) * 8 - 1);
  W y = x;
  if constexpr (K == Kind::kSigned) y = x ^ kSign;
  if constexpr (K == Kind::kFloat) y = (x & kSign) ? static_cast<W>(~x) : static_cast<W>(x | kSign);
  if constexpr (kDescending) y = static_cast<W>(~y);
  return y;
}

struct GroupTables {
  std::array<uint8_t, 256> length;             // data bytes of a full group
  alignas(16) std::array<std::array<uint8_t, 16>, 256> shuffle;  // decoding
  alignas(16) std::array<std::array<uint8_t, 16>, 256> pack;     // encoding
};

const GroupTables& Tables() {
  static const GroupTables* tables = [] {
    auto* t = new GroupTables();
    for (int code = 0; code < 256; ++code) {
      uint8_t offset = 0;
      t->pack[code].fill(0x80);
      for (int j = 0; j < 4; ++j) {
        const uint8_t length = static_cast<uint8_t>(((code >> (2 * j)) & 3) + 1);
        for (int k = 0; k < 4; ++k) {
          t->shuffle[code][4 * j + k] = k < length ? static_cast<uint8_t>(offset + k) : 0x80;
          if (k < length) t->pack[code][offset + k] = static_cast<uint8_t>(4 * j + k);
        }
        offset = static_cast<uint8_t>(offset + length);
      }
      t->length[code] = offset;
    }
    return t;
  }();
  return *tables;
}

#if SORTD_BLOCKS_X86
std::atomic<bool> scalar_only{false};  // testing_only::UseScalarCodecs

bool HasSse41() {
  static const bool sse41 = __builtin_cpu_supports("ssse3") && __builtin_cpu_supports("sse4.1");
  return sse41 && !scalar_only.load(std::memory_order_relaxed);
}

// Full groups of four 32-bit keys: order words, gaps (the one before the
// first from *prev), the control byte from three unsigned compares, the
// gaps' low bytes packed by one shuffle and stored 16 bytes at a time
// (kSlack), and Mix32 of four lanes for the check. The same bytes as the
// scalar loop. `prev` and `sum` carry over.
template <Kind K, bool kDescending>
__attribute__((target("ssse3,sse4.1"))) void EncodeGroupsSse41(const uint32_t* keys,
                                                               uint32_t groups, uint8_t* control,
                                                               uint8_t** data, uint32_t* prev,
                                                               uint64_t* sum) {
  const GroupTables& t = Tables();
  const __m128i sign = _mm_set1_epi32(static_cast<int>(0x80000000u));
  const __m128i zero = _mm_setzero_si128();
  const __m128i over1 = _mm_set1_epi32(static_cast<int>(0xFFu ^ 0x80000000u));
  const __m128i over2 = _mm_set1_epi32(static_cast<int>(0xFFFFu ^ 0x80000000u));
  const __m128i over3 = _mm_set1_epi32(static_cast<int>(0xFFFFFFu ^ 0x80000000u));
  const __m128i golden4 = _mm_set1_epi32(static_cast<int>(4u * 0x9E3779B9u));
  __m128i index_term = _mm_setr_epi32(0, static_cast<int>(0x9E3779B9u),
                                      static_cast<int>(2u * 0x9E3779B9u),
                                      static_cast<int>(3u * 0x9E3779B9u));
  __m128i last = _mm_set1_epi32(static_cast<int>(*prev));
  __m128i sums = zero;
  uint8_t* at = *data;
  for (uint32_t g = 0; g < groups; ++g) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(keys + 4 * g));
    __m128i w = x;
    if constexpr (K == Kind::kSigned) w = _mm_xor_si128(x, sign);
    if constexpr (K == Kind::kFloat) w = _mm_xor_si128(x, _mm_or_si128(_mm_srai_epi32(x, 31), sign));
    if constexpr (kDescending) w = _mm_xor_si128(w, _mm_set1_epi32(-1));
    const __m128i gap = _mm_sub_epi32(w, _mm_alignr_epi8(w, last, 12));
    last = w;
    __m128i h = _mm_add_epi32(w, index_term);
    index_term = _mm_add_epi32(index_term, golden4);
    h = Mix32Lanes(h);
    sums = _mm_add_epi64(sums, _mm_add_epi64(_mm_unpacklo_epi32(h, zero), _mm_unpackhi_epi32(h, zero)));
    // Byte length less 1 a lane: how many of 0xFF, 0xFFFF, 0xFFFFFF the gap exceeds.
    const __m128i biased = _mm_xor_si128(gap, sign);
    const __m128i minus = _mm_add_epi32(_mm_add_epi32(_mm_cmpgt_epi32(biased, over1),
                                                      _mm_cmpgt_epi32(biased, over2)),
                                        _mm_cmpgt_epi32(biased, over3));
    const __m128i codes = _mm_sub_epi32(zero, minus);
    const __m128i bytes = _mm_packus_epi16(_mm_packus_epi32(codes, codes), zero);
    const uint32_t v = static_cast<uint32_t>(_mm_cvtsi128_si32(bytes));
    const uint32_t code = (v & 3) | ((v >> 6) & 0xC) | ((v >> 12) & 0x30) | ((v >> 18) & 0xC0);
    control[g] = static_cast<uint8_t>(code);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(at),
                     _mm_shuffle_epi8(gap, _mm_load_si128(reinterpret_cast<const __m128i*>(
                                               t.pack[code].data()))));
    at += t.length[code];
  }
  alignas(16) uint64_t lanes[2];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes), sums);
  *sum += lanes[0] + lanes[1];
  *prev = static_cast<uint32_t>(_mm_cvtsi128_si32(_mm_shuffle_epi32(last, 0xFF)));
  *data = at;
}
#endif

// One block's payload; returns its bytes (the caller falls back to raw when
// that is not smaller than the keys). The coding is a template argument:
// the byte stores alias everything, so a runtime coding would be reloaded
// after each.
template <typename W, Kind K, bool kDescending>
size_t EncodePayloadT(const W* keys, uint32_t count, uint8_t* out, uint64_t* sum) {
  W prev = ToOrderT<W, K, kDescending>(keys[0]);
  uint64_t total = 0;
  if constexpr (sizeof(W) == 4) {
    uint8_t* control = out;
    uint8_t* data = out + (count + 3) / 4;
    const uint32_t full = count / 4 * 4;
    uint32_t g = 0;
#if SORTD_BLOCKS_X86
    if (HasSse41()) {
      EncodeGroupsSse41<K, kDescending>(keys, full / 4, control, &data, &prev, &total);
      g = full;
    }
#endif
    for (; g < full; g += 4) {
      uint32_t code = 0;
      for (uint32_t j = 0; j < 4; ++j) {
        const W w = ToOrderT<W, K, kDescending>(keys[g + j]);
        total += Mix32(w, g + j);
        const uint32_t gap = w - prev;
        prev = w;
        const uint32_t length = ByteLength32(gap);
        code |= (length - 1) << (2 * j);
        Store32(data, gap);
        data += length;
      }
      control[g / 4] = static_cast<uint8_t>(code);
    }
    if (full < count) {
      uint32_t code = 0;
      for (uint32_t i = full; i < count; ++i) {
        const W w = ToOrderT<W, K, kDescending>(keys[i]);
        total += Mix32(w, i);
        const uint32_t gap = w - prev;
        prev = w;
        const uint32_t length = ByteLength32(gap);
        code |= (length - 1) << (2 * (i - full));
        Store32(data, gap);
        data += length;
      }
      control[full / 4] = static_cast<uint8_t>(code);
    }
    *sum = total;
    return static_cast<size_t>(data - out);
  } else {
    uint8_t* control = out;
    uint8_t* data = out + (count + 1) / 2;
    for (uint32_t i = 0; i < count; i += 2) {
      uint32_t code = 0;
      for (uint32_t j = 0; j < 2 && i + j < count; ++j) {
        const W w = ToOrderT<W, K, kDescending>(keys[i + j]);
        total += Mix64(w, i + j);
        const uint64_t gap = w - prev;
        prev = w;
        const uint32_t length = ByteLength64(gap);
        code |= length << (4 * j);
        Store64(data, gap);
        data += length;
      }
      control[i / 2] = static_cast<uint8_t>(code);
    }
    *sum = total;
    return static_cast<size_t>(data - out);
  }
}

template <typename W>
size_t EncodePayload(const W* keys, uint32_t count, const KeyCoding& c, uint8_t* out,
                     uint64_t* sum) {
  switch (c.kind) {
    case Kind::kSigned:
      return c.descending ? EncodePayloadT<W, Kind::kSigned, true>(keys, count, out, sum)
                          : EncodePayloadT<W, Kind::kSigned, false>(keys, count, out, sum);
    case Kind::kFloat:
      return c.descending ? EncodePayloadT<W, Kind::kFloat, true>(keys, count, out, sum)
                          : EncodePayloadT<W, Kind::kFloat, false>(keys, count, out, sum);
    default:
      return c.descending ? EncodePayloadT<W, Kind::kUnsigned, true>(keys, count, out, sum)
                          : EncodePayloadT<W, Kind::kUnsigned, false>(keys, count, out, sum);
  }
}

template <typename W>
size_t EncodeTyped(const W* keys, uint64_t count, const KeyCoding& c, uint8_t* out) {
  uint8_t* at = out;
  for (uint64_t begin = 0; begin < count; begin += kBlockKeys) {
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(kBlockKeys, count - begin));
    Header h;
    h.width = sizeof(W);
    h.count = n;
    h.first = ToOrder(keys[begin], c);
    const size_t raw = size_t{n} * sizeof(W);
    const size_t coded = EncodePayload(keys + begin, n, c, at + kHeaderBytes, &h.sum);
    if (coded < raw) {
      h.codec = static_cast<uint8_t>(sizeof(W) == 4 ? Codec::kStreamVByteDelta : Codec::kNibbleDelta);
      h.payload = static_cast<uint32_t>(coded);
    } else {
      h.codec = static_cast<uint8_t>(Codec::kRaw);
      h.payload = static_cast<uint32_t>(raw);
      std::memcpy(at + kHeaderBytes, keys + begin, raw);
    }
    WriteHeader(h, at);
    at += kHeaderBytes + h.payload;
  }
  return static_cast<size_t>(at - out);
}

// ---- decoding ----------------------------------------------------------

absl::Status BlockError(uint64_t block, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("block ", block, ": ", what));
}

// Data bytes the control bytes of a StreamVByte block announce.
uint64_t AnnouncedBytes32(const uint8_t* control, uint32_t count) {
  const GroupTables& t = Tables();
  uint64_t bytes = 0;
  const uint32_t full = count / 4;
  for (uint32_t g = 0; g < full; ++g) bytes += t.length[control[g]];
  for (uint32_t j = 0; j < count % 4; ++j) bytes += ((control[full] >> (2 * j)) & 3) + 1;
  return bytes;
}

#if SORTD_BLOCKS_X86
// Full groups of four while 16 bytes can be loaded before `readable_end`;
// returns the groups decoded. `prev` and `sum` carry over.
__attribute__((target("ssse3,sse4.1"))) uint32_t DecodeGroupsSse41(
    const uint8_t* control, const uint8_t** data, const uint8_t* readable_end, uint32_t groups,
    const KeyCoding& c, uint32_t* prev, uint64_t* sum, uint32_t* out) {
  const GroupTables& t = Tables();
  const __m128i ones = _mm_set1_epi32(-1);
  const __m128i sign = _mm_set1_epi32(static_cast<int>(0x80000000u));
  const __m128i zero = _mm_setzero_si128();
  const __m128i invert = c.descending ? ones : zero;
  __m128i last = _mm_set1_epi32(static_cast<int>(*prev));
  __m128i sums = _mm_setzero_si128();
  // Mix32 of four lanes: the index term grows by 4 golden-ratio steps a group.
  const __m128i golden4 = _mm_set1_epi32(static_cast<int>(4u * 0x9E3779B9u));
  __m128i index_term = _mm_setr_epi32(0, static_cast<int>(0x9E3779B9u),
                                      static_cast<int>(2u * 0x9E3779B9u),
                                      static_cast<int>(3u * 0x9E3779B9u));
  const uint8_t* at = *data;
  uint32_t g = 0;
  for (; g < groups && at + 16 <= readable_end; ++g) {
    const uint8_t code = control[g];
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
    v = _mm_shuffle_epi8(v, _mm_load_si128(reinterpret_cast<const __m128i*>(t.shuffle[code].data())));
    at += t.length[code];
    v = _mm_add_epi32(v, _mm_slli_si128(v, 4));
    v = _mm_add_epi32(v, _mm_slli_si128(v, 8));
    v = _mm_add_epi32(v, last);
    last = _mm_shuffle_epi32(v, 0xFF);
    __m128i h = _mm_add_epi32(v, index_term);
    index_term = _mm_add_epi32(index_term, golden4);
    h = Mix32Lanes(h);
    sums = _mm_add_epi64(sums, _mm_add_epi64(_mm_unpacklo_epi32(h, zero), _mm_unpackhi_epi32(h, zero)));
    __m128i x = _mm_xor_si128(v, invert);
    if (c.kind == Kind::kSigned) {
      x = _mm_xor_si128(x, sign);
    } else if (c.kind == Kind::kFloat) {
      const __m128i top = _mm_srai_epi32(x, 31);
      x = _mm_xor_si128(x, _mm_or_si128(_mm_xor_si128(top, ones), sign));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 4 * g), x);
  }
  alignas(16) uint64_t lanes[2];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes), sums);
  *sum += lanes[0] + lanes[1];
  *prev = static_cast<uint32_t>(_mm_cvtsi128_si32(last));
  *data = at;
  return g;
}
#endif

// StreamVByte delta payload of one block (lengths already checked).
void DecodePayload32(const uint8_t* payload, const uint8_t* readable_end, uint32_t count,
                     uint32_t first, const KeyCoding& c, uint64_t* sum, uint32_t* out) {
  const uint8_t* control = payload;
  const uint8_t* data = payload + (count + 3) / 4;
  uint32_t prev = first;
  uint32_t i = 0;
#if SORTD_BLOCKS_X86
  if (HasSse41()) i = 4 * DecodeGroupsSse41(control, &data, readable_end, count / 4, c, &prev, sum, out);
#else
  (void)readable_end;
#endif
  for (; i < count; ++i) {
    const uint32_t length = ((control[i / 4] >> (2 * (i % 4))) & 3) + 1;
    uint32_t gap = 0;
    std::memcpy(&gap, data, length);
    data += length;
    prev += gap;
    *sum += Mix32(prev, i);
    out[i] = FromOrder(prev, c);
  }
}

void DecodePayload64(const uint8_t* payload, const uint8_t* readable_end, uint32_t count,
                     uint64_t first, const KeyCoding& c, uint64_t* sum, uint64_t* out) {
  static constexpr uint64_t kMask[9] = {0,
                                        0xFFull,
                                        0xFFFFull,
                                        0xFFFFFFull,
                                        0xFFFFFFFFull,
                                        0xFFFFFFFFFFull,
                                        0xFFFFFFFFFFFFull,
                                        0xFFFFFFFFFFFFFFull,
                                        ~0ull};
  const uint8_t* control = payload;
  const uint8_t* data = payload + (count + 1) / 2;
  uint64_t prev = first;
  uint64_t total = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t length = (control[i / 2] >> (4 * (i & 1))) & 0xF;
    uint64_t gap;
    if (data + 8 <= readable_end) {
      gap = Load64(data) & kMask[length];
    } else {
      gap = 0;
      std::memcpy(&gap, data, length);
    }
    data += length;
    prev += gap;
    total += Mix64(prev, i);
    out[i] = FromOrder(prev, c);
  }
  *sum += total;
}

template <typename W>
absl::Status DecodeTyped(const uint8_t* body, size_t bytes, const KeyCoding& c,
                         uint64_t first_block, uint64_t count, W* out) {
  const uint8_t* at = body;
  const uint8_t* const end = body + bytes;
  uint64_t done = 0;
  for (uint64_t block = first_block; done < count; ++block) {
    if (static_cast<size_t>(end - at) < kHeaderBytes) {
      return BlockError(block, absl::StrCat("truncated: ", end - at, " bytes left of a ",
                                            kHeaderBytes, "-byte header"));
    }
    const Header h = ReadHeader(at);
    const uint64_t want = std::min<uint64_t>(kBlockKeys, count - done);
    if (h.width != sizeof(W)) {
      return BlockError(block, absl::StrCat("width ", h.width, ", the keys are ", sizeof(W)));
    }
    if (!ReservedZero(at)) return BlockError(block, "reserved header bytes are not zero");
    if (h.count != want) {
      return BlockError(block, absl::StrCat("holds ", h.count, " keys, expected ", want));
    }
    at += kHeaderBytes;
    if (h.payload > static_cast<size_t>(end - at)) {
      return BlockError(block, absl::StrCat("payload of ", h.payload, " bytes, ", end - at,
                                            " left in the part"));
    }
    const uint8_t* payload = at;
    W* dst = out + done;
    uint64_t sum = 0;
    const uint32_t n = h.count;
    if (h.codec == static_cast<uint8_t>(Codec::kRaw)) {
      if (h.payload != uint64_t{n} * sizeof(W)) {
        return BlockError(block, absl::StrCat("raw payload of ", h.payload, " bytes for ", n,
                                              " keys"));
      }
      std::memcpy(dst, payload, h.payload);
      for (uint32_t i = 0; i < n; ++i) sum += Mix(ToOrder(dst[i], c), i);
      if (ToOrder(dst[0], c) != h.first) return absl::DataLossError(absl::StrCat(
          "block ", block, ": its first key does not match its header"));
    } else if (sizeof(W) == 4 && h.codec == static_cast<uint8_t>(Codec::kStreamVByteDelta)) {
      const uint64_t control = (uint64_t{n} + 3) / 4;
      if (control > h.payload ||
          control + AnnouncedBytes32(payload, n) != h.payload) {
        return BlockError(block, "its control bytes do not account for its payload");
      }
      if constexpr (sizeof(W) == 4) {
        DecodePayload32(payload, end, n, static_cast<uint32_t>(h.first), c, &sum, dst);
      }
    } else if (sizeof(W) == 8 && h.codec == static_cast<uint8_t>(Codec::kNibbleDelta)) {
      const uint64_t control = (uint64_t{n} + 1) / 2;
      if (control > h.payload) return BlockError(block, "shorter than its control bytes");
      uint64_t announced = 0;
      for (uint32_t i = 0; i < n; ++i) {
        const uint32_t length = (payload[i / 2] >> (4 * (i & 1))) & 0xF;
        if (length > 8) return BlockError(block, absl::StrCat("key ", i, ": a ", length,
                                                              "-byte gap"));
        announced += length;
      }
      if (control + announced != h.payload) {
        return BlockError(block, "its control bytes do not account for its payload");
      }
      if constexpr (sizeof(W) == 8) {
        DecodePayload64(payload, end, n, h.first, c, &sum, dst);
      }
    } else {
      return BlockError(block, absl::StrCat("unknown codec ", h.codec, " for ", sizeof(W),
                                            "-byte keys"));
    }
    if (sum != h.sum) {
      return absl::DataLossError(absl::StrCat("block ", block,
                                              ": the keys do not match its checksum"));
    }
    at += h.payload;
    done += n;
  }
  if (at != end) {
    return absl::InvalidArgumentError(absl::StrCat(
        "block ", first_block, "..: ", end - at, " bytes after the last block"));
  }
  return absl::OkStatus();
}

}  // namespace

namespace testing_only {
void UseScalarCodecs(bool scalar) {
#if SORTD_BLOCKS_X86
  scalar_only.store(scalar);
#else
  (void)scalar;
#endif
}
}  // namespace testing_only

size_t MaxEncodedBytes(uint64_t count, int width) {
  const uint64_t blocks = (count + kBlockKeys - 1) / kBlockKeys;
  return static_cast<size_t>(blocks * kHeaderBytes + count * static_cast<uint64_t>(width) +
                             (count + 1) / 2 + kSlack);
}

size_t EncodeBlocks(const void* keys, uint64_t count, const KeyCoding& coding, uint8_t* out) {
  if (coding.width == 8) {
    return EncodeTyped(static_cast<const uint64_t*>(keys), count, coding, out);
  }
  return EncodeTyped(static_cast<const uint32_t*>(keys), count, coding, out);
}

absl::Status DecodeBlocks(const uint8_t* body, size_t bytes, const KeyCoding& coding,
                          uint64_t first_block, uint64_t count, void* out) {
  if (coding.width == 8) {
    return DecodeTyped(body, bytes, coding, first_block, count, static_cast<uint64_t*>(out));
  }
  if (coding.width != 4) {
    return absl::InvalidArgumentError(absl::StrCat("keys of ", coding.width, " bytes"));
  }
  return DecodeTyped(body, bytes, coding, first_block, count, static_cast<uint32_t*>(out));
}

}  // namespace sortd::v1::blocks
