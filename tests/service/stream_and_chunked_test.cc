// SortStream (1,000 requests, completion order, per-request errors) and
// SortChunked (client-side transparent chunking, protocol errors).
#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <thread>

#include "tests/service/test_server.h"

namespace sortd::testing {
namespace {

TEST(SortStreamTest, ThousandRequestsEachAnsweredOnceWithItsId) {
  auto server = StartServer();
  auto client = Connect(*server);
  grpc::ClientContext ctx;
  auto stream = client->stub().SortStream(&ctx);
  std::map<std::string, std::vector<uint32_t>> expected;
  std::mt19937 rng(7);
  constexpr int kRequests = 1000;
  std::thread writer([&] {
    for (int i = 0; i < kRequests; ++i) {
      v1::SortRequest request;
      request.set_request_id("r" + std::to_string(i));
      if (i % 100 == 99) {
        request.set_order(static_cast<v1::SortOrder>(42));  // invalid: answered with error
        request.mutable_keys()->mutable_uint32()->add_values(1);
      } else {
        auto* values = request.mutable_keys()->mutable_uint32()->mutable_values();
        for (int k = 0; k < 1 + i % 300; ++k) values->Add(rng());
      }
      ASSERT_TRUE(stream->Write(request));
    }
    stream->WritesDone();
  });
  // The writer builds the same keys again here to know the expected output.
  std::mt19937 rng2(7);
  for (int i = 0; i < kRequests; ++i) {
    if (i % 100 == 99) continue;
    std::vector<uint32_t> keys;
    for (int k = 0; k < 1 + i % 300; ++k) keys.push_back(rng2());
    std::sort(keys.begin(), keys.end());
    expected["r" + std::to_string(i)] = keys;
  }
  std::map<std::string, int> seen;
  int errors = 0;
  v1::SortResponse response;
  while (stream->Read(&response)) {
    ++seen[response.request_id()];
    if (response.has_error()) {
      ++errors;
      EXPECT_EQ(response.error().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
      EXPECT_EQ(response.error().message().rfind("order:", 0), 0u);
      continue;
    }
    const auto& got = response.keys().uint32().values();
    EXPECT_EQ(std::vector<uint32_t>(got.begin(), got.end()), expected[response.request_id()])
        << response.request_id();
  }
  writer.join();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(seen.size(), static_cast<size_t>(kRequests));
  for (const auto& [id, count] : seen) EXPECT_EQ(count, 1) << id;
  EXPECT_EQ(errors, kRequests / 100);
}

TEST(SortChunkedTest, ClientChunksLargeArraysTransparently) {
  ServerOptions options;
  options.limits.chunk_response_bytes = 64 << 10;  // many response chunks
  auto server = StartServer(options);
  client::ClientOptions copts;
  copts.max_message_bytes = 2 << 20;  // forces SortChunked above ~1 MiB
  copts.chunk_bytes = 256 << 10;
  copts.session_min_bytes = 0;  // SortChunked, not a sort session
  auto client = Connect(*server, copts);
  std::mt19937_64 rng(3);
  std::vector<uint64_t> keys(1 << 20);
  for (auto& k : keys) k = rng() % 1000;
  auto r = client->Sort<uint64_t>(keys, v1::SORT_ORDER_DESCENDING, true);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->keys.size(), keys.size());
  EXPECT_EQ(r->engine, v1::ENGINE_CPU);
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(r->keys[i], keys[r->indices[i]]);
    if (i > 0) {
      ASSERT_GE(r->keys[i - 1], r->keys[i]);
      if (r->keys[i - 1] == r->keys[i]) ASSERT_LT(r->indices[i - 1], r->indices[i]);
    }
  }
  // Pairs with byte-string values through the chunked path.
  std::vector<uint32_t> pkeys(200000);
  std::vector<std::string> pvalues(pkeys.size());
  for (size_t i = 0; i < pkeys.size(); ++i) {
    pkeys[i] = static_cast<uint32_t>(rng() % 5000);
    pvalues[i] = "value-" + std::to_string(pkeys[i]) + "-" + std::to_string(i);
  }
  // ~4 MB of payload: over the client's 2 MiB message limit, so SortChunked.
  size_t payload = pkeys.size() * sizeof(uint32_t);
  for (const std::string& v : pvalues) payload += v.size();
  ASSERT_TRUE(client->NeedsChunking(payload));
  for (auto order : {v1::SORT_ORDER_ASCENDING, v1::SORT_ORDER_DESCENDING}) {
    SCOPED_TRACE(order == v1::SORT_ORDER_ASCENDING ? "ascending" : "descending");
    auto pairs = client->SortPairs<uint32_t, std::string>(pkeys, pvalues, order);
    ASSERT_TRUE(pairs.ok()) << pairs.status();
    // The host reference: a stable sort of the positions by key (descending:
    // reverse order of distinct keys, equal keys in input order). Each value
    // names its input position, so the values compared here are the
    // permutation the server applied.
    std::vector<size_t> perm(pkeys.size());
    std::iota(perm.begin(), perm.end(), size_t{0});
    std::stable_sort(perm.begin(), perm.end(), [&](size_t a, size_t b) {
      return order == v1::SORT_ORDER_DESCENDING ? pkeys[b] < pkeys[a] : pkeys[a] < pkeys[b];
    });
    std::vector<uint32_t> want_keys(perm.size());
    std::vector<std::string> want_values(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) {
      want_keys[i] = pkeys[perm[i]];
      want_values[i] = pvalues[perm[i]];
    }
    ASSERT_EQ(pairs->keys.size(), pkeys.size());
    ASSERT_EQ(pairs->values.size(), pkeys.size());
    // Element by element, to name the first position that differs.
    for (size_t i = 0; i < perm.size(); ++i) {
      ASSERT_EQ(pairs->keys[i], want_keys[i]) << "key at " << i;
      ASSERT_EQ(pairs->values[i], want_values[i]) << "value at " << i;
    }
  }
  // Both went through SortChunked (counted once its reactor is done, a
  // moment after the client has its answer).
  const std::string chunked =
      R"(sortd_requests_total{code="OK",key_type="uint32",method="SortChunked"})";
  const std::string text =
      ScrapeUntil(*server, [&](const std::string& t) { return Sample(t, chunked) >= 2; });
  EXPECT_EQ(Sample(text, chunked), 2);
}

TEST(SortChunkedTest, ChunksFitTheClientsOwnMessageLimit) {
  // The default chunk size (4 MiB) is above this client's 2 MiB limit: the
  // client sends smaller chunks instead of failing with RESOURCE_EXHAUSTED.
  ServerOptions options;
  options.limits.chunk_response_bytes = 256 << 10;
  auto server = StartServer(options);
  client::ClientOptions copts;
  copts.max_message_bytes = 2 << 20;
  auto client = Connect(*server, copts);
  std::mt19937 rng(4);
  std::vector<std::string> keys(60000);  // ~3.5 MB of byte strings
  for (auto& k : keys) k = std::string(20 + rng() % 80, static_cast<char>('a' + rng() % 26));
  auto r = client->Sort<std::string>(keys, v1::SORT_ORDER_ASCENDING, true);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->keys.size(), keys.size());
  EXPECT_TRUE(std::is_sorted(r->keys.begin(), r->keys.end()));
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(r->keys[i], keys[r->indices[i]]);
}

// Sends the messages, reads every response; the uint32 keys received go to
// `keys` (when given), in the order of their offsets.
grpc::Status RunChunked(v1::SortService::Stub& stub,
                        const std::vector<v1::SortChunkedRequest>& messages,
                        std::vector<uint32_t>* keys = nullptr) {
  grpc::ClientContext ctx;
  auto stream = stub.SortChunked(&ctx);
  for (const auto& m : messages) {
    if (!stream->Write(m)) break;
  }
  stream->WritesDone();
  v1::SortChunkedResponse response;
  while (stream->Read(&response)) {
    if (keys == nullptr) continue;
    EXPECT_EQ(response.offset(), keys->size());
    const auto& got = response.chunk().keys().uint32().values();
    keys->insert(keys->end(), got.begin(), got.end());
  }
  return stream->Finish();
}

v1::SortChunkedRequest Chunk(std::vector<uint32_t> keys) {
  v1::SortChunkedRequest m;
  for (uint32_t k : keys) m.mutable_chunk()->mutable_keys()->mutable_uint32()->add_values(k);
  return m;
}

TEST(SortChunkedTest, ProtocolErrorsNameTheField) {
  auto server = StartServer();
  auto client = Connect(*server);
  v1::SortChunkedRequest header;
  header.mutable_header()->set_total_keys(3);

  grpc::Status s = RunChunked(client->stub(), {Chunk({1})});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("header:", 0), 0u) << s.error_message();

  s = RunChunked(client->stub(), {header, Chunk({1, 2})});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("header.total_keys:", 0), 0u) << s.error_message();

  v1::SortChunkedRequest other_type;
  other_type.mutable_chunk()->mutable_keys()->mutable_float32()->add_values(1.0f);
  s = RunChunked(client->stub(), {header, Chunk({1}), other_type});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("chunk.keys:", 0), 0u) << s.error_message();

  v1::SortChunkedRequest pairs_header;
  pairs_header.mutable_header()->set_with_values(true);
  s = RunChunked(client->stub(), {pairs_header, Chunk({1})});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("chunk.values:", 0), 0u) << s.error_message();

  s = RunChunked(client->stub(), {});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // A well-formed upload still works afterwards, including an empty one.
  std::vector<uint32_t> sorted;
  s = RunChunked(client->stub(), {header, Chunk({3, 1}), Chunk({2})}, &sorted);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(sorted, (std::vector<uint32_t>{1, 2, 3}));
  v1::SortChunkedRequest empty_header;
  empty_header.mutable_header();
  std::vector<uint32_t> none;
  EXPECT_TRUE(RunChunked(client->stub(), {empty_header}, &none).ok());
  EXPECT_TRUE(none.empty());
}

TEST(SortChunkedTest, ChunkedUploadOverTheLimitIsResourceExhausted) {
  ServerOptions options;
  options.limits.max_chunked_bytes = 1000;
  auto server = StartServer(options);
  auto client = Connect(*server);
  v1::SortChunkedRequest header;
  header.mutable_header();
  std::vector<uint32_t> keys(300, 1);
  grpc::Status s = RunChunked(client->stub(), {header, Chunk(keys)});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("max_chunked_bytes"), std::string::npos);
}

}  // namespace
}  // namespace sortd::testing
