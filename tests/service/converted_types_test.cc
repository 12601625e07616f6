// The types sorted by conversion (server/wire/converted_arrays.h) through
// the real service: int8, uint8, int16, uint16, float16, bfloat16, bool,
// datetime64 and timedelta64, as keys (both orders, with the permutation)
// and as values, inline, batched-size and streamed; every answer compared
// with a stable sort by the element's own value in the test; bad arrays
// refused naming the field.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "sortd/v1/sort.grpc.pb.h"
#include "tests/service/test_server.h"

namespace sortd {
namespace {

using ::sortd::testing::StartServer;
using ::sortd::testing::Target;

struct NarrowCase {
  const char* name;
  size_t width;
  // Sets the case on `a` and returns its bytes field.
  std::string* (*mutable_bytes)(v1::TypedArray* a);
  const std::string& (*bytes)(const v1::TypedArray& a);
  // The element's value (floats: NaN for every NaN pattern).
  double (*value)(uint32_t pattern);
};

double Half(uint32_t v) {
  const int sign = (v >> 15) & 1, exponent = (v >> 10) & 0x1F, mantissa = v & 0x3FF;
  double magnitude;
  if (exponent == 0x1F) {
    magnitude = mantissa ? std::nan("") : std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -24);
  } else {
    magnitude = std::ldexp(1024 + mantissa, exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

double BFloat(uint32_t v) {
  const uint32_t bits = v << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

const NarrowCase kNarrow[] = {
    {"int8", 1, [](v1::TypedArray* a) { return a->mutable_int8()->mutable_values(); },
     [](const v1::TypedArray& a) -> const std::string& { return a.int8().values(); },
     [](uint32_t v) { return double(int8_t(v)); }},
    {"uint8", 1, [](v1::TypedArray* a) { return a->mutable_uint8()->mutable_values(); },
     [](const v1::TypedArray& a) -> const std::string& { return a.uint8().values(); },
     [](uint32_t v) { return double(uint8_t(v)); }},
    {"int16", 2, [](v1::TypedArray* a) { return a->mutable_int16()->mutable_values(); },
     [](const v1::TypedArray& a) -> const std::string& { return a.int16().values(); },
     [](uint32_t v) { return double(int16_t(v)); }},
    {"uint16", 2, [](v1::TypedArray* a) { return a->mutable_uint16()->mutable_values(); },
     [](const v1::TypedArray& a) -> const std::string& { return a.uint16().values(); },
     [](uint32_t v) { return double(uint16_t(v)); }},
    {"float16", 2, [](v1::TypedArray* a) { return a->mutable_float16()->mutable_values(); },
     [](const v1::TypedArray& a) -> const std::string& { return a.float16().values(); }, Half},
    {"bfloat16", 2, [](v1::TypedArray* a) { return a->mutable_bfloat16()->mutable_values(); },
     [](const v1::TypedArray& a) -> const std::string& { return a.bfloat16().values(); }, BFloat},
    {"bool", 1, [](v1::TypedArray* a) { return a->mutable_boolean()->mutable_values(); },
     [](const v1::TypedArray& a) -> const std::string& { return a.boolean().values(); },
     [](uint32_t v) { return double(v); }},
};

// sortd's order of two values: NaN last and equal, -0.0 before +0.0.
bool ContractLess(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return !std::isnan(a) && std::isnan(b);
  if (a == 0 && b == 0) return std::signbit(a) && !std::signbit(b);
  return a < b;
}

uint32_t PatternAt(const std::string& bytes, size_t width, size_t i) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data()) + i * width;
  return width == 1 ? p[0] : uint32_t(p[0] | (p[1] << 8));
}

// The stable order of `bytes` (as elements of `c`) in `order`: descending
// is the reverse of the ascending order of distinct values, stable.
std::vector<uint64_t> ReferencePermutation(const NarrowCase& c, const std::string& bytes,
                                           bool descending) {
  const size_t n = bytes.size() / c.width;
  std::vector<uint64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](uint64_t x, uint64_t y) {
    const double a = c.value(PatternAt(bytes, c.width, x)), b = c.value(PatternAt(bytes, c.width, y));
    return descending ? ContractLess(b, a) : ContractLess(a, b);
  });
  return perm;
}

// Random patterns with many ties, and the specials of the floats (+-0,
// +-inf, NaNs of both signs and several payloads).
std::string RandomPatterns(const NarrowCase& c, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string bytes(n * c.width, '\0');
  const bool is_bool = std::string(c.name) == "bool";
  const std::vector<uint32_t> specials =
      std::string(c.name) == "float16"    ? std::vector<uint32_t>{0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7C01, 0x0001, 0x8001}
      : std::string(c.name) == "bfloat16" ? std::vector<uint32_t>{0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81, 0x0001, 0x8001}
                                          : std::vector<uint32_t>{0, 1};
  for (size_t i = 0; i < n; ++i) {
    uint32_t v = (rng() % 4 == 0) ? specials[rng() % specials.size()] : uint32_t(rng() % 300);
    if (rng() % 3 == 0) v = uint32_t(rng());
    if (is_bool) v &= 1;
    for (size_t b = 0; b < c.width; ++b) bytes[i * c.width + b] = char(v >> (8 * b));
  }
  return bytes;
}

class ConvertedTypesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServer();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::SortService::NewStub(
        grpc::CreateChannel(Target(*server_), grpc::InsecureChannelCredentials()));
  }
  grpc::Status Sort(const v1::SortRequest& request, v1::SortResponse* response) {
    grpc::ClientContext ctx;
    return stub_->Sort(&ctx, request, response);
  }
  std::unique_ptr<SortdServer> server_;
  std::unique_ptr<v1::SortService::Stub> stub_;
};

TEST_F(ConvertedTypesTest, NarrowKeysSortStablyInBothOrdersWithTheirPermutation) {
  // Sizes below and above the batcher's and the inline limit's.
  for (const NarrowCase& c : kNarrow) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{777}, size_t{20000}}) {
      for (bool descending : {false, true}) {
        SCOPED_TRACE(std::string(c.name) + " n=" + std::to_string(n) + (descending ? " desc" : " asc"));
        v1::SortRequest request;
        *c.mutable_bytes(request.mutable_keys()) = RandomPatterns(c, n, n * 31 + descending);
        request.set_order(descending ? v1::SORT_ORDER_DESCENDING : v1::SORT_ORDER_ASCENDING);
        request.set_return_indices(true);
        v1::SortResponse response;
        grpc::Status status = Sort(request, &response);
        ASSERT_TRUE(status.ok()) << status.error_message();
        const std::string& in = c.bytes(request.keys());
        const std::vector<uint64_t> expected = ReferencePermutation(c, in, descending);
        ASSERT_EQ(std::vector<uint64_t>(response.indices().begin(), response.indices().end()), expected);
        // Keys: the input's own bytes in that order (NaN payloads unchanged).
        std::string expected_keys;
        for (uint64_t i : expected) expected_keys.append(in, i * c.width, c.width);
        ASSERT_EQ(response.keys().array_case(), request.keys().array_case());
        EXPECT_EQ(c.bytes(response.keys()), expected_keys);
        // Keys only: the same keys.
        request.set_return_indices(false);
        v1::SortResponse keys_only;
        ASSERT_TRUE(Sort(request, &keys_only).ok());
        EXPECT_EQ(c.bytes(keys_only.keys()), expected_keys);
        EXPECT_EQ(keys_only.indices_size(), 0);
      }
    }
  }
}

// Times with NaT: NaT goes where `nulls` says in both orders, the rest in
// int64 order, stable; the unit comes back.
TEST_F(ConvertedTypesTest, TimeKeysPlaceNaTAsANullAndEchoTheirUnit) {
  constexpr int64_t kNaT = std::numeric_limits<int64_t>::min();
  std::mt19937_64 rng(5);
  std::vector<int64_t> times;
  for (int i = 0; i < 5000; ++i) {
    const int pick = int(rng() % 6);
    times.push_back(pick == 0 ? kNaT : pick == 1 ? std::numeric_limits<int64_t>::max()
                                 : pick == 2 ? kNaT + 1 : int64_t(rng() % 50) - 25);
  }
  for (bool timedelta : {false, true}) {
    for (bool descending : {false, true}) {
      for (bool nulls_first : {false, true}) {
        SCOPED_TRACE(std::string(timedelta ? "timedelta64" : "datetime64") + (descending ? " desc" : " asc") +
                     (nulls_first ? " nulls first" : " nulls last"));
        v1::SortRequest request;
        auto* field = timedelta ? request.mutable_keys()->mutable_timedelta64()->mutable_values()
                                : request.mutable_keys()->mutable_datetime64()->mutable_values();
        field->Add(times.begin(), times.end());
        if (timedelta) {
          request.mutable_keys()->mutable_timedelta64()->set_unit(v1::TIME_UNIT_MICROSECOND);
        } else {
          request.mutable_keys()->mutable_datetime64()->set_unit(v1::TIME_UNIT_NANOSECOND);
        }
        request.set_order(descending ? v1::SORT_ORDER_DESCENDING : v1::SORT_ORDER_ASCENDING);
        request.set_nulls(nulls_first ? v1::NULL_PLACEMENT_FIRST : v1::NULL_PLACEMENT_LAST);
        request.set_return_indices(true);
        v1::SortResponse response;
        grpc::Status status = Sort(request, &response);
        ASSERT_TRUE(status.ok()) << status.error_message();
        std::vector<uint64_t> nat, rest;
        for (size_t i = 0; i < times.size(); ++i) (times[i] == kNaT ? nat : rest).push_back(i);
        std::stable_sort(rest.begin(), rest.end(), [&](uint64_t a, uint64_t b) {
          return descending ? times[a] > times[b] : times[a] < times[b];
        });
        std::vector<uint64_t> expected = nulls_first ? nat : rest;
        const std::vector<uint64_t>& tail = nulls_first ? rest : nat;
        expected.insert(expected.end(), tail.begin(), tail.end());
        ASSERT_EQ(std::vector<uint64_t>(response.indices().begin(), response.indices().end()), expected);
        const auto& out = timedelta ? response.keys().timedelta64().values()
                                    : response.keys().datetime64().values();
        ASSERT_EQ(out.size(), int(times.size()));
        for (size_t i = 0; i < expected.size(); ++i) ASSERT_EQ(out.Get(int(i)), times[expected[i]]);
        EXPECT_EQ(timedelta ? response.keys().timedelta64().unit() : response.keys().datetime64().unit(),
                  timedelta ? v1::TIME_UNIT_MICROSECOND : v1::TIME_UNIT_NANOSECOND);
      }
    }
  }
}

// Converted keys carry values of any type; converted values follow any
// keys (gathered by the permutation).
TEST_F(ConvertedTypesTest, PairsCarryConvertedKeysAndValues) {
  const NarrowCase& int16 = kNarrow[2];
  const std::string keys = RandomPatterns(int16, 3000, 9);
  const size_t n = keys.size() / 2;
  const std::vector<uint64_t> perm = ReferencePermutation(int16, keys, /*descending=*/true);
  {
    v1::SortPairsRequest request;
    *request.mutable_keys()->mutable_int16()->mutable_values() = keys;
    request.set_order(v1::SORT_ORDER_DESCENDING);
    auto* values = request.mutable_values()->mutable_timedelta64();
    values->set_unit(v1::TIME_UNIT_SECOND);
    for (size_t i = 0; i < n; ++i) values->add_values(int64_t(i) * 1000 - 7);
    v1::SortPairsResponse response;
    grpc::ClientContext ctx;
    grpc::Status status = stub_->SortPairs(&ctx, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.values().timedelta64().values_size(), int(n));
    EXPECT_EQ(response.values().timedelta64().unit(), v1::TIME_UNIT_SECOND);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(response.values().timedelta64().values(int(i)), int64_t(perm[i]) * 1000 - 7);
  }
  {
    // uint32 keys (the CPU engine's own pairs path otherwise) with uint8 values.
    v1::SortPairsRequest request;
    std::vector<uint32_t> ukeys(n);
    std::string values(n, '\0');
    for (size_t i = 0; i < n; ++i) {
      ukeys[i] = uint32_t(PatternAt(keys, 2, i)) % 50;
      values[i] = char(i % 251);
    }
    request.mutable_keys()->mutable_uint32()->mutable_values()->Add(ukeys.begin(), ukeys.end());
    *request.mutable_values()->mutable_uint8()->mutable_values() = values;
    v1::SortPairsResponse response;
    grpc::ClientContext ctx;
    grpc::Status status = stub_->SortPairs(&ctx, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    std::vector<uint64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) { return ukeys[a] < ukeys[b]; });
    std::string expected(n, '\0');
    for (size_t i = 0; i < n; ++i) expected[i] = values[order[i]];
    EXPECT_EQ(response.values().uint8().values(), expected);
  }
}

// Small converted requests on a stream are not batched with numeric ones
// (a batch sorts core types): each answer is its own request's sort.
TEST_F(ConvertedTypesTest, StreamedSmallRequestsEachGetTheirOwnSort) {
  grpc::ClientContext ctx;
  auto stream = stub_->SortStream(&ctx);
  std::vector<std::string> sent;
  for (int i = 0; i < 64; ++i) {
    v1::SortRequest request;
    request.set_request_id(std::to_string(i));
    if (i % 2 == 0) {
      *request.mutable_keys()->mutable_uint8()->mutable_values() = RandomPatterns(kNarrow[1], 100 + i, i);
      sent.push_back(request.keys().uint8().values());
    } else {
      for (int k = 0; k < 100; ++k) request.mutable_keys()->mutable_uint32()->add_values(uint32_t((k * 7919 + i) % 97));
      sent.push_back("");
    }
    ASSERT_TRUE(stream->Write(request));
  }
  stream->WritesDone();
  v1::SortResponse response;
  int answered = 0;
  while (stream->Read(&response)) {
    const int i = std::stoi(response.request_id());
    ASSERT_FALSE(response.has_error()) << response.error().message();
    if (i % 2 == 0) {
      std::string expected = sent[i];
      std::sort(expected.begin(), expected.end(), [](char a, char b) { return uint8_t(a) < uint8_t(b); });
      EXPECT_EQ(response.keys().uint8().values(), expected) << "request " << i;
    } else {
      EXPECT_TRUE(std::is_sorted(response.keys().uint32().values().begin(), response.keys().uint32().values().end()));
      EXPECT_EQ(response.keys().uint32().values_size(), 100);
    }
    ++answered;
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(answered, 64);
}

TEST_F(ConvertedTypesTest, MalformedArraysAreRefusedNamingTheField) {
  struct Bad {
    std::function<void(v1::SortRequest*)> make;
    const char* message;
  };
  const std::vector<Bad> cases = {
      {[](v1::SortRequest* r) { r->mutable_keys()->mutable_int16()->set_values("abc"); }, "keys.int16: 3 bytes"},
      {[](v1::SortRequest* r) { r->mutable_keys()->mutable_bfloat16()->set_values("a"); }, "keys.bfloat16"},
      {[](v1::SortRequest* r) { r->mutable_keys()->mutable_boolean()->set_values(std::string("\x00\x01\x02", 3)); },
       "keys.boolean: element 2 is byte 2"},
      {[](v1::SortRequest* r) { r->mutable_keys()->mutable_datetime64()->add_values(1); }, "keys.datetime64.unit: required"},
      {[](v1::SortRequest* r) {
         r->mutable_keys()->mutable_timedelta64()->add_values(1);
         r->mutable_keys()->mutable_timedelta64()->set_unit(static_cast<v1::TimeUnit>(99));
       },
       "keys.timedelta64.unit: unknown value 99"},
      {[](v1::SortRequest* r) {
         r->mutable_keys()->mutable_uint8()->set_values("ab");
         r->set_nulls(static_cast<v1::NullPlacement>(5));
       },
       "nulls: unknown value 5"},
  };
  const double sorted_before = testing::CpuKeysSorted(*server_);
  for (const Bad& bad : cases) {
    v1::SortRequest request;
    bad.make(&request);
    v1::SortResponse response;
    grpc::Status status = Sort(request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad.message;
    EXPECT_NE(status.error_message().find(bad.message), std::string::npos)
        << "got: " << status.error_message() << "; want: " << bad.message;
  }
  // Refused before any sort.
  EXPECT_EQ(testing::CpuKeysSorted(*server_), sorted_before);
}

// SortChunked does not carry the converted types yet: a chunk of one is
// refused naming the array and the type.
TEST_F(ConvertedTypesTest, ChunkedUploadsOfConvertedTypesAreRefusedNamingTheType) {
  grpc::ClientContext ctx;
  auto stream = stub_->SortChunked(&ctx);
  v1::SortChunkedRequest header;
  header.mutable_header()->set_total_keys(3);
  ASSERT_TRUE(stream->Write(header));
  v1::SortChunkedRequest chunk;
  chunk.mutable_chunk()->mutable_keys()->mutable_int8()->set_values("abc");
  stream->Write(chunk);
  stream->WritesDone();
  v1::SortChunkedResponse response;
  while (stream->Read(&response)) {
  }
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("chunk.keys: int8 arrays are sorted by Sort, SortPairs and "
                                        "SortStream (not yet by SortChunked)"),
            std::string::npos)
      << status.error_message();
}

}  // namespace
}  // namespace sortd
