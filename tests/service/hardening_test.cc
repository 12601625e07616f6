// Hostile and unlucky input: sizes a client announces but never sends,
// responses that could not be sent, and allocations that fail inside each
// handler and reactor. Every RPC must end with a status naming the problem,
// admission must return to zero, and the server must still serve and drain.
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "tests/service/test_server.h"

namespace sortd::testing {
namespace {

v1::SortChunkedRequest Header(uint64_t total_keys, bool with_values = false,
                              bool return_indices = false) {
  v1::SortChunkedRequest m;
  m.mutable_header()->set_total_keys(total_keys);
  m.mutable_header()->set_with_values(with_values);
  m.mutable_header()->set_return_indices(return_indices);
  return m;
}

v1::SortChunkedRequest U64Chunk(std::vector<uint64_t> keys) {
  v1::SortChunkedRequest m;
  for (uint64_t k : keys) m.mutable_chunk()->mutable_keys()->mutable_uint64()->add_values(k);
  return m;
}

// Sends every message, then reads every response; the RPC's status and the
// sorted keys (uint64) received.
struct ChunkedResult {
  grpc::Status status;
  std::vector<uint64_t> keys;
};
ChunkedResult RunChunked(v1::SortService::Stub& stub,
                         const std::vector<v1::SortChunkedRequest>& messages) {
  grpc::ClientContext ctx;
  // A wedged server shows up as DEADLINE_EXCEEDED instead of a hung test.
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto stream = stub.SortChunked(&ctx);
  for (const auto& m : messages) {
    if (!stream->Write(m)) break;
  }
  stream->WritesDone();
  ChunkedResult result;
  v1::SortChunkedResponse response;
  while (stream->Read(&response)) {
    const auto& values = response.chunk().keys().uint64().values();
    result.keys.insert(result.keys.end(), values.begin(), values.end());
  }
  result.status = stream->Finish();
  return result;
}

// Admission and the in-flight gauges are back to zero, observed (the last
// RPC's reactor may still be releasing when its client returns).
void ExpectNothingInFlight(SortdServer& server) {
  auto idle = [](const std::string& t) {
    return Sample(t, "sortd_inflight_requests") == 0 && Sample(t, "sortd_inflight_bytes") == 0;
  };
  const std::string text = ScrapeUntil(server, idle);
  EXPECT_TRUE(idle(text)) << "still in flight: requests " << Sample(text, "sortd_inflight_requests")
                          << ", bytes " << Sample(text, "sortd_inflight_bytes");
}

void ExpectStillServes(client::SortClient& client) {
  auto r = client.Sort<uint64_t>(std::vector<uint64_t>{3, 1, 2});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->keys, (std::vector<uint64_t>{1, 2, 3}));
}

TEST(HostileChunkedTest, HugeAnnouncementIsRefusedBeforeAnythingIsAllocated) {
  // The wedge of issue #16: 2^40 keys announced, then 3 keys sent. Before,
  // reserving the announced size threw inside the reactor and the RPC was
  // never answered.
  auto server = StartServer();
  auto client = Connect(*server);
  for (uint64_t announced : {uint64_t{1} << 40, uint64_t{1} << 33}) {
    ChunkedResult r = RunChunked(client->stub(), {Header(announced), U64Chunk({3, 1, 2})});
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << r.status.error_message();
    EXPECT_EQ(r.status.error_message().rfind("header.total_keys:", 0), 0u) << r.status.error_message();
    EXPECT_NE(r.status.error_message().find("--max_chunked_bytes"), std::string::npos);
  }
  ExpectNothingInFlight(*server);
  ExpectStillServes(*client);
}

TEST(HostileChunkedTest, AnnouncementOverTheLimitForItsTypeIsRefusedAtTheFirstChunk) {
  // 200000 keys pass the header check (800 KB at 4 bytes) but are 1.6 MB as
  // uint64: refused when the first chunk names the type, not reserved.
  ServerOptions options;
  options.limits.max_chunked_bytes = 1 << 20;
  auto server = StartServer(options);
  auto client = Connect(*server);
  ChunkedResult r = RunChunked(client->stub(), {Header(200000), U64Chunk({1, 2, 3})});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << r.status.error_message();
  EXPECT_EQ(r.status.error_message().rfind("header.total_keys:", 0), 0u) << r.status.error_message();
  ExpectNothingInFlight(*server);
  ExpectStillServes(*client);
}

TEST(HostileChunkedTest, AnnouncementIsAdmittedWholeOrRefused) {
  // Within --max_chunked_bytes but over --max_inflight_bytes: refused by
  // admission before the columns are sized.
  ServerOptions options;
  options.max_inflight_bytes = 1 << 20;
  auto server = StartServer(options);
  auto client = Connect(*server);
  ChunkedResult r = RunChunked(client->stub(), {Header(1 << 20), U64Chunk({1, 2, 3})});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << r.status.error_message();
  EXPECT_NE(r.status.error_message().find("max_inflight_bytes"), std::string::npos)
      << r.status.error_message();
  ExpectNothingInFlight(*server);

  // An honest announcement is admitted once and sorted.
  std::vector<v1::SortChunkedRequest> honest = {Header(6), U64Chunk({9, 4, 7}), U64Chunk({1, 8, 2})};
  ChunkedResult ok = RunChunked(client->stub(), honest);
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.keys, (std::vector<uint64_t>{1, 2, 4, 7, 8, 9}));
  ExpectNothingInFlight(*server);
}

TEST(HostileChunkedTest, InflightBytesRunOutPartWayThroughAnUnannouncedUpload) {
  // No total_keys: each chunk is admitted as it arrives, and the upload is
  // refused at the chunk that no longer fits, not before, not never.
  ServerOptions options;
  options.max_inflight_bytes = 1 << 20;
  auto server = StartServer(options);
  auto client = Connect(*server);
  std::vector<v1::SortChunkedRequest> messages = {Header(0)};
  std::vector<uint64_t> chunk(10000, 7);  // 80 KB; admitted as ~240 KB each
  for (int i = 0; i < 8; ++i) messages.push_back(U64Chunk(chunk));
  ChunkedResult r = RunChunked(client->stub(), messages);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << r.status.error_message();
  EXPECT_NE(r.status.error_message().find("--max_inflight_bytes"), std::string::npos)
      << r.status.error_message();
  // The chunks before the refusal were accepted (the limit was reached
  // part-way, at the fifth 240 KB admission of a 1 MiB budget). The call is
  // counted when the reactor is done, a moment after the client has its
  // status: waits for the count.
  const std::string refused =
      R"(sortd_requests_total{code="RESOURCE_EXHAUSTED",key_type="uint64",method="SortChunked"})";
  const std::string text =
      ScrapeUntil(*server, [&](const std::string& t) { return Sample(t, refused) >= 1; });
  EXPECT_EQ(Sample(text, refused), 1);
  EXPECT_GE(Sample(text, R"(sortd_bytes_received_total{method="SortChunked"})"), 4 * 80000);
  ExpectNothingInFlight(*server);
  ExpectStillServes(*client);
}

TEST(ResponseLimitTest, ResponseOverTheMessageLimitIsRefusedBeforeSorting) {
  // 100000 uint64 keys (800 KB) fit a 1 MiB message; with their indices the
  // response (1.6 MB) does not. Refused up front, naming the limit and
  // SortChunked, instead of gRPC's "Sent message larger than max" after the
  // sort.
  // Where a sort would start: both refusals come before either site (the
  // 100000 keys are too many to batch, so they would pass one of them).
  std::mutex mu;
  std::map<std::string, int> reached;
  ServerOptions options;
  options.max_message_bytes = 1 << 20;
  options.test_site_hook = [&](absl::string_view at) {
    std::lock_guard<std::mutex> lock(mu);
    ++reached[std::string(at)];
    return false;
  };
  auto server = StartServer(options);
  client::ClientOptions copts;
  copts.max_message_bytes = 1 << 20;
  auto client = Connect(*server, copts);
  v1::SortRequest request;
  request.set_return_indices(true);
  request.mutable_keys()->mutable_uint64()->mutable_values()->Resize(100000, 5);
  ASSERT_GT(request.keys().uint64().values_size(), 16384) << "must not be batched";

  grpc::ClientContext ctx;
  v1::SortResponse response;
  grpc::Status s = client->stub().Sort(&ctx, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_EQ(s.error_message().rfind("response:", 0), 0u) << s.error_message();
  EXPECT_NE(s.error_message().find("--max_message_bytes"), std::string::npos);
  EXPECT_NE(s.error_message().find("SortChunked"), std::string::npos);
  // Nothing was sorted (a call's keys are counted before its status goes).
  EXPECT_EQ(CpuKeysSorted(*server), 0);

  // The same request on SortStream: an error response for it, the stream
  // goes on.
  grpc::ClientContext stream_ctx;
  auto stream = client->stub().SortStream(&stream_ctx);
  request.set_request_id("too-big");
  ASSERT_TRUE(stream->Write(request));
  v1::SortRequest small;
  small.set_request_id("small");
  small.mutable_keys()->mutable_uint64()->add_values(2);
  small.mutable_keys()->mutable_uint64()->add_values(1);
  ASSERT_TRUE(stream->Write(small));
  stream->WritesDone();
  std::map<std::string, v1::SortResponse> got;
  v1::SortResponse r;
  while (stream->Read(&r)) got[r.request_id()] = r;
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got["too-big"].error().code(), static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED));
  EXPECT_EQ(got["too-big"].error().message().rfind("response:", 0), 0u);
  EXPECT_EQ(got["small"].keys().uint64().values(0), 1u);
  EXPECT_EQ(got["small"].keys().uint64().values(1), 2u);

  ExpectNothingInFlight(*server);
  ExpectStillServes(*client);
  // Only "small" and ExpectStillServes' keys were sorted; neither refused
  // request reached the start of a sort. (Under this client's 1 MiB limit
  // ExpectStillServes goes through SortChunked, counted a moment after its
  // client has the answer: waits for its count.)
  const std::string keys_sorted = R"(sortd_keys_sorted_total{engine="cpu"})";
  const std::string text =
      ScrapeUntil(*server, [&](const std::string& t) { return Sample(t, keys_sorted) >= 5; });
  EXPECT_EQ(Sample(text, keys_sorted), 2 + 3);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(reached["unary.run"], 0);
  EXPECT_EQ(reached["stream.run"], 0);
}

// Every allocation site of every handler and reactor, with the RPC that
// passes through it.
struct FaultCase {
  const char* site;
  std::function<grpc::Status(client::SortClient&)> call;
};

grpc::Status UnarySort(client::SortClient& c) {
  v1::SortRequest request;
  for (uint64_t k : {5, 3, 9}) request.mutable_keys()->mutable_uint64()->add_values(k);
  grpc::ClientContext ctx;
  v1::SortResponse response;
  return c.stub().Sort(&ctx, request, &response);
}

grpc::Status UnaryPairs(client::SortClient& c) {
  v1::SortPairsRequest request;
  for (uint64_t k : {5, 3, 9}) request.mutable_keys()->mutable_uint64()->add_values(k);
  for (uint32_t v : {1, 2, 3}) request.mutable_values()->mutable_uint32()->add_values(v);
  grpc::ClientContext ctx;
  v1::SortPairsResponse response;
  return c.stub().SortPairs(&ctx, request, &response);
}

grpc::Status StreamSort(client::SortClient& c) {
  grpc::ClientContext ctx;
  auto stream = c.stub().SortStream(&ctx);
  v1::SortRequest request;
  request.set_request_id("r");
  for (uint64_t k : {5, 3, 9}) request.mutable_keys()->mutable_uint64()->add_values(k);
  stream->Write(request);
  stream->WritesDone();
  v1::SortResponse response;
  grpc::Status per_request;
  while (stream->Read(&response)) {
    if (response.has_error()) {
      per_request = grpc::Status(static_cast<grpc::StatusCode>(response.error().code()),
                                 response.error().message());
    }
  }
  grpc::Status finish = stream->Finish();
  return finish.ok() ? per_request : finish;
}

grpc::Status Chunked(client::SortClient& c) {
  return RunChunked(c.stub(), {Header(3), U64Chunk({5, 3, 9})}).status;
}

TEST(AllocationFailureTest, EveryHandlerAndReactorEndsItsRpcAndReleasesAdmission) {
  const std::vector<FaultCase> cases = {
      {"unary.run", UnarySort},     {"unary.run", UnaryPairs},
      {"stream.run", StreamSort},   {"chunked.header", Chunked},
      {"chunked.chunk", Chunked},   {"chunked.sort", Chunked},
      {"chunked.write", Chunked},
  };
  for (const FaultCase& c : cases) {
    SCOPED_TRACE(c.site);
    std::set<std::string> reached;
    std::mutex mu;
    ServerOptions options;
    options.batching_mode = BatchingMode::kOff;  // the sites of the direct path
    options.drain_timeout = absl::Seconds(5);
    options.test_site_hook = [&, site = std::string(c.site)](absl::string_view at) {
      std::lock_guard<std::mutex> lock(mu);
      reached.insert(std::string(at));
      return at == site;
    };
    auto server = StartServer(options);
    auto client = Connect(*server);
    grpc::Status s = c.call(*client);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_NE(s.error_message().find("out of memory"), std::string::npos) << s.error_message();
    {
      std::lock_guard<std::mutex> lock(mu);
      EXPECT_TRUE(reached.count(c.site)) << "the call never reached " << c.site;
    }
    ExpectNothingInFlight(*server);
    // The server drains and stops well within its drain timeout: nothing is
    // left holding an RPC open.
    const auto start = std::chrono::steady_clock::now();
    server->Shutdown();
    server.reset();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  }
}

}  // namespace
}  // namespace sortd::testing
