// Sort sessions through the in-process server: the C++ client's parallel
// path for every key type, pairs and indices, checked against a reference
// sort; and the protocol's failure semantics driven part by part (out of
// order, duplicates, gaps, cancelled and abandoned uploads, limits).
#include <algorithm>
#include <numeric>
#include <random>
#include <thread>

#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include "sortd/v1/session_part_codec.h"
#include "tests/service/test_server.h"

namespace sortd::testing {
namespace {

namespace part = v1::session_part;

const grpc::internal::RpcMethod kUpload("/sortd.v1.SortService/UploadParts",
                                        grpc::internal::RpcMethod::CLIENT_STREAMING);
const grpc::internal::RpcMethod kDownload("/sortd.v1.SortService/DownloadParts",
                                          grpc::internal::RpcMethod::SERVER_STREAMING);

client::ClientOptions SessionOptions(int connections = 3) {
  client::ClientOptions options;
  options.session_min_bytes = 1;  // every numeric sort through a session
  options.connections = connections;
  options.part_bytes = 4096;      // many parts per connection
  return options;
}

template <typename T>
std::vector<T> RandomKeys(size_t n, uint64_t seed, uint64_t distinct = 0) {
  std::mt19937_64 rng(seed);
  std::vector<T> keys(n);
  for (T& k : keys) {
    const uint64_t r = distinct > 0 ? rng() % distinct : rng();
    if constexpr (std::is_floating_point_v<T>) {
      k = static_cast<T>(static_cast<int64_t>(r % 2000001) - 1000000) / 7;
    } else {
      k = static_cast<T>(r);
    }
  }
  return keys;
}

// The stable permutation a correct server returns.
template <typename T>
std::vector<uint64_t> ReferencePermutation(const std::vector<T>& keys, v1::SortOrder order) {
  std::vector<uint64_t> perm(keys.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](uint64_t a, uint64_t b) {
    return order == v1::SORT_ORDER_ASCENDING ? keys[a] < keys[b] : keys[b] < keys[a];
  });
  return perm;
}

template <typename T>
void ExpectSortedThroughSession(size_t n, v1::SortOrder order, bool with_indices) {
  auto server = StartServer();
  auto c = Connect(*server, SessionOptions());
  const std::vector<T> keys = RandomKeys<T>(n, n, /*distinct=*/n / 4 + 1);
  std::vector<T> out(n);
  std::vector<uint64_t> indices(with_indices ? n : 0);
  absl::StatusOr<v1::Engine> engine =
      c->SortInto<T>(keys, absl::MakeSpan(out), order, absl::MakeSpan(indices));
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ(*engine, v1::ENGINE_CPU);
  const std::vector<uint64_t> perm = ReferencePermutation(keys, order);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[i], keys[perm[i]]) << "position " << i;
    if (with_indices) ASSERT_EQ(indices[i], perm[i]) << "position " << i;
  }
  // Ended, and its memory given back (once gRPC lets go of the last part
  // it sent, which can be a moment after EndSortSession answered).
  const std::string text = ScrapeUntil(*server, [](const std::string& t) {
    return Sample(t, "sortd_sort_sessions") == 0 && Sample(t, "sortd_inflight_bytes") == 0;
  });
  EXPECT_EQ(Sample(text, "sortd_sort_sessions"), 0);
  EXPECT_EQ(Sample(text, "sortd_inflight_bytes"), 0);
}

TEST(SessionTest, EveryKeyTypeSortsThroughSessionsAgainstTheReference) {
  ExpectSortedThroughSession<uint32_t>(100003, v1::SORT_ORDER_ASCENDING, false);
  ExpectSortedThroughSession<int32_t>(50001, v1::SORT_ORDER_DESCENDING, true);
  ExpectSortedThroughSession<float>(40000, v1::SORT_ORDER_ASCENDING, true);
  ExpectSortedThroughSession<uint64_t>(30011, v1::SORT_ORDER_DESCENDING, false);
  ExpectSortedThroughSession<int64_t>(20000, v1::SORT_ORDER_ASCENDING, true);
  ExpectSortedThroughSession<double>(10007, v1::SORT_ORDER_DESCENDING, false);
}

// The CPU engine partitions a keys-only session's keys as its parts land
// (counted by sortd_sort_sessions_sorted_arriving_total), and each answer is
// still the stable sort, for every key type and both orders; sessions with
// indices or values are sorted after the upload and not counted.
template <typename T>
void ExpectSortedArriving(client::SortClient& c, size_t n, v1::SortOrder order) {
  const std::vector<T> keys = RandomKeys<T>(n, n + order, /*distinct=*/n / 3);
  std::vector<T> out(n);
  absl::StatusOr<v1::Engine> engine = c.SortInto<T>(keys, absl::MakeSpan(out), order);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ(*engine, v1::ENGINE_CPU);
  const std::vector<uint64_t> perm = ReferencePermutation(keys, order);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], keys[perm[i]]) << "position " << i;
}

TEST(SessionTest, TheCpuSortsKeysOnlySessionsWhileTheirPartsArrive) {
  ServerOptions options;
  options.dispatcher.cpu.parallel_threshold = 1 << 14;  // the arriving path from 16384 keys
  auto server = StartServer(options);
  client::ClientOptions session = SessionOptions();
  session.part_bytes = 64 << 10;  // many parts, in any order over the connections
  auto c = Connect(*server, session);
  ExpectSortedArriving<uint32_t>(*c, 300007, v1::SORT_ORDER_ASCENDING);
  ExpectSortedArriving<int32_t>(*c, 100000, v1::SORT_ORDER_DESCENDING);
  ExpectSortedArriving<float>(*c, 100003, v1::SORT_ORDER_DESCENDING);
  ExpectSortedArriving<uint64_t>(*c, 70001, v1::SORT_ORDER_ASCENDING);
  ExpectSortedArriving<int64_t>(*c, 50000, v1::SORT_ORDER_DESCENDING);
  ExpectSortedArriving<double>(*c, 65536, v1::SORT_ORDER_ASCENDING);
  const int arriving = 6;
  EXPECT_EQ(Sample(Scrape(*server), "sortd_sort_sessions_sorted_arriving_total"), arriving);

  // With indices, or values, the CPU sorts after the upload (not counted).
  std::vector<uint32_t> keys = RandomKeys<uint32_t>(100000, 6, 100);
  std::vector<uint32_t> out(keys.size());
  std::vector<uint64_t> indices(keys.size());
  ASSERT_TRUE(c->SortInto<uint32_t>(keys, absl::MakeSpan(out), v1::SORT_ORDER_ASCENDING,
                                    absl::MakeSpan(indices))
                  .ok());
  EXPECT_EQ(indices, ReferencePermutation(keys, v1::SORT_ORDER_ASCENDING));
  auto pairs = c->SortPairs<uint32_t, uint32_t>(keys, keys);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  // Under the threshold: sorted after the upload too.
  ExpectSortedArriving<uint32_t>(*c, 10000, v1::SORT_ORDER_ASCENDING);
  EXPECT_EQ(Sample(Scrape(*server), "sortd_sort_sessions_sorted_arriving_total"), arriving);
}

// A session sorted on the host is admitted with its sort's scratch (the
// arriving sort's pool, about the keys' size): a server whose limit holds
// the buffer but not both refuses it at once as never fitting (no wait),
// one with room for both sorts it while it arrives, and the reservation
// goes back with the session.
TEST(SessionTest, ACpuSessionIsAdmittedWithItsSortScratch) {
  ServerOptions options;
  options.dispatcher.cpu.parallel_threshold = 1 << 14;
  const size_t n = 300007;
  options.max_inflight_bytes = n * 4 + n * 2;  // the buffer, not buffer and pool
  auto server = StartServer(options);
  client::ClientOptions session = SessionOptions();
  session.part_bytes = 64 << 10;
  auto c = Connect(*server, session);
  const std::vector<uint32_t> keys = RandomKeys<uint32_t>(n, 7, n / 3);
  std::vector<uint32_t> out(n);
  absl::StatusOr<v1::Engine> refused =
      c->SortInto<uint32_t>(keys, absl::MakeSpan(out), v1::SORT_ORDER_ASCENDING);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(refused.status().message().find(absl::StrCat("request of ", n * 8, " bytes")),
            std::string::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("--max_inflight_bytes"), std::string::npos);
  std::string text = Scrape(*server);
  EXPECT_EQ(Sample(text, R"(sortd_admission_refusals_total{reason="too_large"})"), 1);
  EXPECT_EQ(Sample(text, "sortd_admission_waiting_requests"), 0);
  // Half the keys leave room for both: sorted while arriving.
  ExpectSortedArriving<uint32_t>(*c, n / 2, v1::SORT_ORDER_ASCENDING);
  ExpectSortedArriving<float>(*c, n / 2, v1::SORT_ORDER_DESCENDING);
  text = ScrapeUntil(*server, [](const std::string& t) {
    return Sample(t, "sortd_inflight_bytes") == 0;
  });
  EXPECT_EQ(Sample(text, "sortd_sort_sessions_sorted_arriving_total"), 2);
  // The reservation went back with the sessions.
  EXPECT_EQ(Sample(text, "sortd_inflight_bytes"), 0);
}

TEST(SessionTest, PairsCarryEachValueWithItsKeyStably) {
  auto server = StartServer();
  auto c = Connect(*server, SessionOptions(4));
  const size_t n = 70001;
  const std::vector<uint32_t> keys = RandomKeys<uint32_t>(n, 7, /*distinct=*/100);
  std::vector<double> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<double>(i) + 0.5;
  auto result = c->SortPairs<uint32_t, double>(keys, values, v1::SORT_ORDER_DESCENDING);
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<uint64_t> perm = ReferencePermutation(keys, v1::SORT_ORDER_DESCENDING);
  ASSERT_EQ(result->keys.size(), n);
  ASSERT_EQ(result->values.size(), n);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(result->keys[i], keys[perm[i]]);
    ASSERT_EQ(result->values[i], values[perm[i]]);
  }
  const std::string text = Scrape(*server);
  EXPECT_EQ(Sample(text, R"(sortd_requests_total{code="OK",key_type="uint32",method="SortSession"})"),
            1);
  EXPECT_EQ(Sample(text, R"(sortd_requests_total{code="OK",key_type="uint32",method="SortChunked"})"),
            -1);
}

TEST(SessionTest, SortIntoSortsInPlaceAndEmptyArraysWork) {
  auto server = StartServer();
  auto c = Connect(*server, SessionOptions(2));
  std::vector<int64_t> keys = RandomKeys<int64_t>(9999, 3);
  const std::vector<int64_t> original = keys;
  auto engine = c->SortInto<int64_t>(keys, absl::MakeSpan(keys));
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<int64_t> expected = original;
  std::stable_sort(expected.begin(), expected.end());
  EXPECT_EQ(keys, expected);
  std::vector<uint32_t> none;
  auto empty = c->Sort<uint32_t>(none);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->keys.empty());
}

TEST(SessionTest, TwoLargeSortsAtOnceEachGetTheirOwnResult) {
  auto server = StartServer();
  auto c = Connect(*server, SessionOptions(3));
  const std::vector<uint32_t> a = RandomKeys<uint32_t>(200000, 11);
  const std::vector<uint32_t> b = RandomKeys<uint32_t>(150000, 12);
  absl::StatusOr<client::SortResult<uint32_t>> ra, rb;
  std::thread ta([&] { ra = c->Sort<uint32_t>(a); });
  std::thread tb([&] { rb = c->Sort<uint32_t>(b); });
  ta.join();
  tb.join();
  ASSERT_TRUE(ra.ok()) << ra.status();
  ASSERT_TRUE(rb.ok()) << rb.status();
  std::vector<uint32_t> ea = a, eb = b;
  std::sort(ea.begin(), ea.end());
  std::sort(eb.begin(), eb.end());
  EXPECT_EQ(ra->keys, ea);
  EXPECT_EQ(rb->keys, eb);
}

TEST(SessionTest, ProgressReportsEveryPhaseUpToItsTotal) {
  auto server = StartServer();
  client::ClientOptions options = SessionOptions(2);
  std::mutex mu;
  std::vector<client::TransferProgress> seen;
  options.progress = [&](const client::TransferProgress& p) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(p);
  };
  auto c = Connect(*server, options);
  const std::vector<uint32_t> keys = RandomKeys<uint32_t>(10000, 5);
  ASSERT_TRUE(c->Sort<uint32_t>(keys, v1::SORT_ORDER_ASCENDING, true).ok());
  uint64_t up = 0, down = 0;
  bool sorted = false;
  for (const auto& p : seen) {
    if (p.phase == client::TransferProgress::Phase::kUpload) up = std::max(up, p.bytes_done);
    if (p.phase == client::TransferProgress::Phase::kDownload) down = std::max(down, p.bytes_done);
    if (p.phase == client::TransferProgress::Phase::kSort && p.bytes_done == 1) sorted = true;
  }
  EXPECT_EQ(up, 40000u);
  EXPECT_EQ(down, 40000u + 80000u);  // keys and indices
  EXPECT_TRUE(sorted);
}

// A server older than sort sessions: only unary Sort (UNIMPLEMENTED for the
// session RPCs, as gRPC answers for methods a service lacks).
class SortOnlyService final : public v1::SortService::CallbackService {
 public:
  grpc::ServerUnaryReactor* Sort(grpc::CallbackServerContext* ctx, const v1::SortRequest* request,
                                 v1::SortResponse* response) override {
    std::vector<uint32_t> keys(request->keys().uint32().values().begin(),
                               request->keys().uint32().values().end());
    std::sort(keys.begin(), keys.end());
    response->mutable_keys()->mutable_uint32()->mutable_values()->Add(keys.begin(), keys.end());
    response->set_engine(v1::ENGINE_CPU);
    sorts.fetch_add(1);
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  std::atomic<int> sorts{0};
};

TEST(SessionTest, AServerWithoutSessionsIsSortedTheOldWay) {
  SortOnlyService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  client::ClientOptions options = SessionOptions(2);
  options.service_config_json.clear();  // the fake serves no health checks
  auto c = client::SortClient::Connect("127.0.0.1:" + std::to_string(port), options);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<uint32_t> keys = RandomKeys<uint32_t>(5000, 4);
  auto result = (*c)->Sort<uint32_t>(keys);
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<uint32_t> expected = keys;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(result->keys, expected);
  EXPECT_EQ(service.sorts.load(), 1);  // after StartSortSession came back UNIMPLEMENTED
  std::vector<uint32_t> out(keys.size());
  auto into = (*c)->SortInto<uint32_t>(keys, absl::MakeSpan(out));
  ASSERT_TRUE(into.ok()) << into.status();
  EXPECT_EQ(out, expected);
  EXPECT_EQ(service.sorts.load(), 2);
  server->Shutdown();
}

// --- The protocol, part by part ---------------------------------------------

class SessionProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }

  void Start(ServerOptions options) {
    client_.reset();
    server_ = StartServer(options);
    client_ = Connect(*server_);
    channel_ = grpc::CreateChannel(Target(*server_), grpc::InsecureChannelCredentials());
  }

  std::string StartSession(uint64_t n, v1::ElementType values = v1::ELEMENT_TYPE_UNSPECIFIED,
                           grpc::Status* failed = nullptr, bool transfer_only = false,
                           v1::StartSortSessionResponse* answer = nullptr) {
    v1::StartSortSessionRequest request;
    request.set_key_type(v1::ELEMENT_TYPE_UINT32);
    request.set_total_keys(n);
    request.set_value_type(values);
    request.set_transfer_only(transfer_only);
    request.set_request_id("protocol-test");
    v1::StartSortSessionResponse response;
    grpc::ClientContext ctx;
    grpc::Status status = client_->stub().StartSortSession(&ctx, request, &response);
    if (failed != nullptr) *failed = status;
    else EXPECT_TRUE(status.ok()) << status.error_message();
    if (answer != nullptr) *answer = response;
    return response.session_id();
  }

  static grpc::ByteBuffer Part(const std::string& id, int array, uint64_t offset,
                               const std::vector<uint32_t>& body) {
    part::Header header{id, array, offset};
    // Owned copy: the test's vectors go away before gRPC may let go.
    auto* copy = new std::vector<uint32_t>(body);
    return part::Encode(header, copy->data(), copy->size() * 4,
                        [](void* p) { delete static_cast<std::vector<uint32_t>*>(p); }, copy);
  }

  grpc::Status Upload(const std::vector<grpc::ByteBuffer>& parts) {
    grpc::ClientContext ctx;
    grpc::ByteBuffer response;
    std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer(
        grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(channel_.get(), kUpload,
                                                                      &ctx, &response));
    for (const grpc::ByteBuffer& p : parts) {
      if (!writer->Write(p)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  grpc::Status Finish(const std::string& id, v1::FinishSortSessionResponse* out = nullptr) {
    grpc::ClientContext ctx;
    v1::FinishSortSessionRequest request;
    request.set_session_id(id);
    v1::FinishSortSessionResponse response;
    grpc::Status status = client_->stub().FinishSortSession(&ctx, request, &response);
    if (out != nullptr) *out = response;
    return status;
  }

  // Finish, asked again while the server reports parts still arriving: a
  // cancelled UploadParts returns to its client before the server's handler
  // has finished copying the part it was reading.
  grpc::Status FinishOnceArrived(const std::string& id) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    grpc::Status status = Finish(id);
    while (status.error_message().find("still arriving") != std::string::npos && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
      status = Finish(id);
    }
    return status;
  }

  grpc::Status End(const std::string& id) {
    grpc::ClientContext ctx;
    v1::EndSortSessionRequest request;
    request.set_session_id(id);
    v1::EndSortSessionResponse response;
    return client_->stub().EndSortSession(&ctx, request, &response);
  }

  // Downloads [offset, offset + count) of `array`; the elements, or the status.
  grpc::Status Download(const std::string& id, int array, uint64_t offset, uint64_t count,
                        std::vector<uint32_t>* out, uint64_t part_bytes = 0) {
    v1::DownloadPartsRequest request;
    request.set_session_id(id);
    request.set_array(static_cast<v1::SessionArray>(array));
    request.set_offset(offset);
    request.set_count(count);
    request.set_part_bytes(part_bytes);
    grpc::ByteBuffer bytes;
    bool own = false;
    grpc::SerializationTraits<v1::DownloadPartsRequest>::Serialize(request, &bytes, &own);
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
        grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(channel_.get(), kDownload,
                                                                      &ctx, bytes));
    grpc::ByteBuffer message;
    while (reader->Read(&message)) {
      part::Reader in(&message);
      part::Header header;
      EXPECT_TRUE(in.Start(&header)) << in.error();
      EXPECT_EQ(header.offset, offset + out->size());
      std::vector<uint32_t> body(in.body_bytes() / 4);
      EXPECT_TRUE(in.ReadBody(body.data())) << in.error();
      out->insert(out->end(), body.begin(), body.end());
    }
    return reader->Finish();
  }

  double Gauge(const std::string& name) { return Sample(Scrape(*server_), name); }

  std::unique_ptr<SortdServer> server_;
  std::unique_ptr<client::SortClient> client_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(SessionProtocolTest, PartsOutOfOrderFromSeveralStreamsMakeOneSort) {
  const std::string id = StartSession(9);
  ASSERT_TRUE(Upload({Part(id, v1::SESSION_ARRAY_KEYS, 6, {3, 1, 2})}).ok());
  ASSERT_TRUE(Upload({Part(id, v1::SESSION_ARRAY_KEYS, 3, {9, 8, 7}),
                      Part("", v1::SESSION_ARRAY_KEYS, 0, {6, 5, 4})})
                  .ok());
  v1::FinishSortSessionResponse finished;
  ASSERT_TRUE(Finish(id, &finished).ok());
  EXPECT_EQ(finished.total_keys(), 9u);
  std::vector<uint32_t> first, second;
  ASSERT_TRUE(Download(id, v1::SESSION_ARRAY_KEYS, 0, 4, &first, /*part_bytes=*/4).ok());
  ASSERT_TRUE(Download(id, v1::SESSION_ARRAY_KEYS, 4, 0, &second).ok());
  EXPECT_EQ(first, (std::vector<uint32_t>{1, 2, 3, 4}));
  EXPECT_EQ(second, (std::vector<uint32_t>{5, 6, 7, 8, 9}));
  // A repeated finish answers again (a client retrying after a lost reply).
  EXPECT_TRUE(Finish(id).ok());
  EXPECT_TRUE(End(id).ok());
  EXPECT_EQ(End(id).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(SessionProtocolTest, DuplicateOrOverlappingPartsAreRefusedAndTheFirstKept) {
  const std::string id = StartSession(6);
  ASSERT_TRUE(Upload({Part(id, v1::SESSION_ARRAY_KEYS, 0, {5, 4, 3})}).ok());
  grpc::Status dup = Upload({Part(id, v1::SESSION_ARRAY_KEYS, 2, {0, 0})});
  EXPECT_EQ(dup.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_NE(dup.error_message().find("[2, 3)"), std::string::npos) << dup.error_message();
  ASSERT_TRUE(Upload({Part(id, v1::SESSION_ARRAY_KEYS, 3, {2, 1, 0})}).ok());
  ASSERT_TRUE(Finish(id).ok());
  std::vector<uint32_t> out;
  ASSERT_TRUE(Download(id, v1::SESSION_ARRAY_KEYS, 0, 0, &out).ok());
  EXPECT_EQ(out, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5}));
}

TEST_F(SessionProtocolTest, FinishNamesTheElementsThatNeverArrived) {
  const std::string id = StartSession(10);
  ASSERT_TRUE(Upload({Part(id, v1::SESSION_ARRAY_KEYS, 0, {1, 2}),
                      Part(id, v1::SESSION_ARRAY_KEYS, 5, {1, 2})})
                  .ok());
  grpc::Status status = Finish(id);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("6 keys not received: [2, 5) [7, 10)"), std::string::npos)
      << status.error_message();
  std::vector<uint32_t> out;
  EXPECT_EQ(Download(id, v1::SESSION_ARRAY_KEYS, 0, 0, &out).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  // The missing parts can still come; then the sort goes ahead.
  ASSERT_TRUE(Upload({Part(id, v1::SESSION_ARRAY_KEYS, 2, {0, 0, 0}),
                      Part(id, v1::SESSION_ARRAY_KEYS, 7, {9, 9, 9})})
                  .ok());
  EXPECT_TRUE(Finish(id).ok());
}

TEST_F(SessionProtocolTest, BadPartsAndReferencesGetTheirStatus) {
  const std::string id = StartSession(4);
  struct Case {
    grpc::ByteBuffer part;
    grpc::StatusCode code;
    const char* says;
  };
  std::vector<Case> cases;
  cases.push_back({Part(id, v1::SESSION_ARRAY_KEYS, 3, {1, 2}), grpc::StatusCode::INVALID_ARGUMENT,
                   "past total_keys"});
  cases.push_back({Part(id, v1::SESSION_ARRAY_VALUES, 0, {1}), grpc::StatusCode::INVALID_ARGUMENT,
                   "without value_type"});
  cases.push_back({Part(id, v1::SESSION_ARRAY_INDICES, 0, {1, 2}),
                   grpc::StatusCode::INVALID_ARGUMENT, "part.array"});
  cases.push_back({Part("no-such-session", v1::SESSION_ARRAY_KEYS, 0, {1}),
                   grpc::StatusCode::NOT_FOUND, "no open session"});
  {
    part::Header header{id, v1::SESSION_ARRAY_KEYS, 0};
    static const char three[3] = {1, 2, 3};
    cases.push_back({part::Encode(header, three, 3, [](void*) {}, nullptr),
                     grpc::StatusCode::INVALID_ARGUMENT, "multiple of the 4-byte element"});
  }
  {
    grpc::Slice junk(std::string("\xff\xff\xff", 3));
    cases.push_back({grpc::ByteBuffer(&junk, 1), grpc::StatusCode::INVALID_ARGUMENT,
                     "not a SessionPart"});
  }
  for (const Case& c : cases) {
    grpc::Status status = Upload({c.part});
    EXPECT_EQ(status.error_code(), c.code) << status.error_message();
    EXPECT_NE(status.error_message().find(c.says), std::string::npos) << status.error_message();
  }
  grpc::Status not_found = Finish("nope");
  EXPECT_EQ(not_found.error_code(), grpc::StatusCode::NOT_FOUND);
  // Nothing was accepted: every key is still missing, and the server serves.
  EXPECT_EQ(Finish(id).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  std::vector<uint32_t> keys = {3, 1, 2};
  auto sorted = client_->Sort<uint32_t>(keys);
  ASSERT_TRUE(sorted.ok());
  EXPECT_EQ(sorted->keys, (std::vector<uint32_t>{1, 2, 3}));
}

TEST_F(SessionProtocolTest, StartRequestsAreValidated) {
  grpc::Status status;
  v1::StartSortSessionRequest request;
  request.set_total_keys(10);  // no key_type
  v1::StartSortSessionResponse response;
  grpc::ClientContext ctx;
  status = client_->stub().StartSortSession(&ctx, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("key_type"), std::string::npos);
  StartSession(10, v1::ELEMENT_TYPE_UNSPECIFIED, &status, /*transfer_only=*/true);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("--diagnostics"), std::string::npos);
  StartSession(uint64_t{1} << 62, v1::ELEMENT_TYPE_UNSPECIFIED, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(status.error_message().find("--max_chunked_bytes"), std::string::npos);
}

TEST_F(SessionProtocolTest, SessionsBeyondTheLimitAreRefusedUntilOneEnds) {
  ServerOptions options;
  options.sessions.max_sessions = 1;
  Start(options);
  const std::string first = StartSession(4);
  grpc::Status refused;
  StartSession(4, v1::ELEMENT_TYPE_UNSPECIFIED, &refused);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.error_message().find("--max_sessions"), std::string::npos);
  ASSERT_TRUE(End(first).ok());
  grpc::Status again;
  StartSession(4, v1::ELEMENT_TYPE_UNSPECIFIED, &again);
  EXPECT_TRUE(again.ok()) << again.error_message();
}

TEST_F(SessionProtocolTest, OpenSessionsShareTheSuggestedConnections) {
  ServerOptions options;
  options.sessions.transfer_streams = 8;
  Start(options);
  auto suggested = [&](uint64_t n, std::string* id) {
    v1::StartSortSessionResponse answer;
    *id = StartSession(n, v1::ELEMENT_TYPE_UNSPECIFIED, nullptr, false, &answer);
    return answer.suggested_connections();
  };
  const uint64_t large = 4 << 20;  // 16 MiB of keys: 8 connections alone
  std::vector<std::string> ids(4);
  EXPECT_EQ(suggested(large, &ids[0]), 8u);
  EXPECT_EQ(suggested(large, &ids[1]), 4u);   // 8 streams over 2 sessions
  EXPECT_EQ(suggested(large, &ids[2]), 2u);   // over 3
  EXPECT_EQ(suggested(100, &ids[3]), 1u);     // small: 1 whatever the share
  for (int i = 1; i < 4; ++i) ASSERT_TRUE(End(ids[i]).ok());
  std::string again;
  EXPECT_EQ(suggested(large, &again), 4u);    // back to 2 open
  ASSERT_TRUE(End(again).ok());
  ASSERT_TRUE(End(ids[0]).ok());
}

TEST_F(SessionProtocolTest, AnAbandonedSessionIsFreedAfterTheIdleTimeout) {
  ServerOptions options;
  options.sessions.idle_timeout = absl::Milliseconds(200);
  Start(options);
  const std::string id = StartSession(1000, v1::ELEMENT_TYPE_UINT64);
  ASSERT_TRUE(Upload({Part(id, v1::SESSION_ARRAY_KEYS, 0, std::vector<uint32_t>(500, 1))}).ok());
  EXPECT_EQ(Gauge("sortd_sort_sessions"), 1);
  EXPECT_GT(Gauge("sortd_inflight_bytes"), 0);
  // A scrape reads the registry before the gauges (test_server.h): a page
  // showing the expiry counted may predate the request's record, so both
  // are waited for.
  const char* const kExpiredRequest =
      R"(sortd_requests_total{code="DEADLINE_EXCEEDED",key_type="uint32",method="SortSession"})";
  const std::string text = ScrapeUntil(*server_, [&](const std::string& t) {
    return Sample(t, "sortd_sort_sessions_expired_total") == 1 && Sample(t, kExpiredRequest) == 1;
  });
  EXPECT_EQ(Sample(text, "sortd_sort_sessions_expired_total"), 1);
  EXPECT_EQ(Sample(text, "sortd_sort_sessions"), 0);
  EXPECT_EQ(Sample(text, "sortd_inflight_bytes"), 0);
  EXPECT_EQ(Sample(text, kExpiredRequest), 1);
  EXPECT_EQ(Finish(id).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(SessionProtocolTest, ACancelledUploadLeavesItsPartsMissingAndEndFreesTheMemory) {
  const std::string id = StartSession(1 << 20);
  {
    grpc::ClientContext ctx;
    grpc::ByteBuffer response;
    std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer(
        grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(channel_.get(), kUpload,
                                                                      &ctx, &response));
    ASSERT_TRUE(writer->Write(Part(id, v1::SESSION_ARRAY_KEYS, 0, std::vector<uint32_t>(1024, 7))));
    ctx.TryCancel();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  grpc::Status status = FinishOnceArrived(id);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("not received"), std::string::npos) << status.error_message();
  EXPECT_GT(Gauge("sortd_inflight_bytes"), 0);
  ASSERT_TRUE(End(id).ok());
  const std::string text = ScrapeUntil(*server_, [](const std::string& t) {
    return Sample(t, "sortd_inflight_bytes") == 0;
  });
  EXPECT_EQ(Sample(text, "sortd_inflight_bytes"), 0);
  EXPECT_EQ(Sample(text, "sortd_sort_sessions"), 0);
  EXPECT_EQ(Sample(text, R"(sortd_requests_total{code="CANCELLED",key_type="uint32",method="SortSession"})"),
            1);
}

TEST_F(SessionProtocolTest, AFailedPartFailsTheClientsSortAndTheSessionIsFreed) {
  ServerOptions options;
  std::atomic<int> parts{0};
  options.test_site_hook = [&](absl::string_view site) {
    return site == "session.part" && parts.fetch_add(1) == 5;  // the sixth part fails
  };
  Start(options);
  auto c = Connect(*server_, SessionOptions(3));
  const std::vector<uint32_t> keys = RandomKeys<uint32_t>(20000, 9);
  auto result = c->Sort<uint32_t>(keys);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted) << result.status();
  const std::string text = ScrapeUntil(*server_, [](const std::string& t) {
    return Sample(t, "sortd_sort_sessions") == 0 && Sample(t, "sortd_inflight_bytes") == 0;
  });
  EXPECT_EQ(Sample(text, "sortd_sort_sessions"), 0);
  EXPECT_EQ(Sample(text, "sortd_inflight_bytes"), 0);
}

TEST_F(SessionProtocolTest, TransferOnlyReturnsTheUploadUnsortedUnderDiagnostics) {
  ServerOptions options;
  options.enable_diagnostics = true;
  Start(options);
  const std::string id = StartSession(3, v1::ELEMENT_TYPE_UNSPECIFIED, nullptr, true);
  ASSERT_TRUE(Upload({Part(id, v1::SESSION_ARRAY_KEYS, 0, {3, 1, 2})}).ok());
  v1::FinishSortSessionResponse finished;
  ASSERT_TRUE(Finish(id, &finished).ok());
  EXPECT_EQ(finished.engine(), v1::ENGINE_UNSPECIFIED);
  std::vector<uint32_t> out;
  ASSERT_TRUE(Download(id, v1::SESSION_ARRAY_KEYS, 0, 0, &out).ok());
  EXPECT_EQ(out, (std::vector<uint32_t>{3, 1, 2}));
}

}  // namespace
}  // namespace sortd::testing
