// Work held in flight by a gate (ServerOptions::test_site_hook blocking at
// "unary.run"), so that what these tests claim about in-flight work is
// observed, not assumed: a drain finishes a call that is provably running,
// and a call whose deadline passes while it waits in the queue is not
// sorted.
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "tests/service/gate.h"
#include "tests/service/test_server.h"

namespace sortd::testing {
namespace {

// Counts, without holding anything, the calls that reached `site`.
class SiteCounter {
 public:
  explicit SiteCounter(std::string site) : site_(std::move(site)) {}

  // Wraps `inner`: counts this site, passes every site on.
  std::function<bool(absl::string_view)> Hook(std::function<bool(absl::string_view)> inner) {
    return [this, inner = std::move(inner)](absl::string_view at) {
      if (at == site_) {
        std::lock_guard<std::mutex> lock(mu_);
        ++reached_;
        cv_.notify_all();
      }
      return inner(at);
    };
  }
  bool WaitFor(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(30), [&] { return reached_ >= n; });
  }

 private:
  const std::string site_;
  std::mutex mu_;
  std::condition_variable cv_;
  int reached_ = 0;
};

// A server whose unary calls stop at `gate` (no batching: every call takes
// the direct path through "unary.run"); `counter`, if given, sees every site.
std::unique_ptr<SortdServer> StartGated(Gate& gate, ServerOptions options = {},
                                        SiteCounter* counter = nullptr) {
  options.batching_mode = BatchingMode::kOff;
  options.test_site_hook = counter ? counter->Hook(gate.Hook()) : gate.Hook();
  return StartServer(options);
}

// Polls `probe` (a health check) until it fails or says NOT_SERVING, for
// up to ~6 s; its last answer.
absl::StatusOr<std::string> HealthOnceDraining(
    const std::function<absl::StatusOr<std::string>()>& probe) {
  absl::StatusOr<std::string> health;
  for (int i = 0; i < 3000; ++i) {
    health = probe();
    if (!health.ok() || *health == "NOT_SERVING") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return health;
}

TEST(GatedDrainTest, ShutdownFinishesACallThatIsRunning) {
  Gate gate("unary.run");
  ServerOptions options;
  options.drain_delay = absl::Seconds(3);  // health is observable while draining
  auto server = StartGated(gate, options);
  auto client = Connect(*server);
  auto observer = Connect(*server);
  ASSERT_TRUE(observer->Health().ok());

  std::vector<int64_t> keys = {5, -3, 9, 0, 7};
  auto call = std::async(std::launch::async, [&] { return client->Sort<int64_t>(keys); });
  ASSERT_TRUE(gate.WaitForArrivals(1)) << "the call never reached the worker";

  auto shutdown = std::async(std::launch::async, [&] { server->Shutdown(); });
  // The drain has begun while the call is held: health says so...
  absl::StatusOr<std::string> health = HealthOnceDraining([&] { return observer->Health(); });
  // (EXPECT, not ASSERT, until the gate is open: returning early would
  // leave the call held and the server waiting for it.)
  EXPECT_TRUE(health.ok() && *health == "NOT_SERVING") << health.status();
  // ...and neither the call nor the shutdown can have finished.
  EXPECT_EQ(call.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  EXPECT_EQ(shutdown.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);

  gate.Open();
  auto result = call.get();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->keys, (std::vector<int64_t>{-3, 0, 5, 7, 9}));
  shutdown.get();
}

// The connections stay open (new work refused) while a call admitted
// before the drain runs, and for drain_linger after it ends: gRPC's
// Shutdown would close a connection as soon as its last call ended, with
// the end of the response possibly still unread by its client
// (CallsInFlight; e2e SlowReaderAtSigterm shows the loss).
TEST(GatedDrainTest, ConnectionsStayOpenUntilTheCallsEndAndTheLingerPasses) {
  Gate gate("unary.run");
  ServerOptions options;
  options.drain_linger = absl::Milliseconds(300);
  auto server = StartGated(gate, options);
  auto client = Connect(*server);
  ASSERT_TRUE(client->Health().ok());

  std::vector<int64_t> keys = {5, -3, 9, 0, 7};
  auto call = std::async(std::launch::async, [&] { return client->Sort<int64_t>(keys); });
  ASSERT_TRUE(gate.WaitForArrivals(1)) << "the call never reached the worker";
  auto shutdown = std::async(std::launch::async, [&] { server->Shutdown(); });

  // A client connecting after the drain began (no --drain_delay) still
  // reaches the server and hears NOT_SERVING: gRPC's Shutdown, which closes
  // the listener, has not run while the call is in flight.
  absl::StatusOr<std::string> health =
      HealthOnceDraining([&] { return Connect(*server)->Health(); });
  EXPECT_TRUE(health.ok() && *health == "NOT_SERVING") << health.status();
  EXPECT_EQ(shutdown.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);

  // The call can only end after the gate opens, and the drain ends at
  // least the linger after the call: a lower bound whatever the scheduling.
  const auto opened = std::chrono::steady_clock::now();
  gate.Open();
  auto result = call.get();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->keys, (std::vector<int64_t>{-3, 0, 5, 7, 9}));
  shutdown.get();
  EXPECT_GE(std::chrono::steady_clock::now() - opened, std::chrono::milliseconds(300));
}

TEST(GatedDeadlineTest, ACallWhoseDeadlinePassesInTheQueueIsNotSorted) {
  // One worker, held by a first call: the second waits in the queue until
  // its deadline passes, then must be dropped, not sorted.
  Gate gate("unary.run");
  SiteCounter cancelled_calls("unary.cancelled");
  ServerOptions options;
  options.worker_threads = 1;
  auto server = StartGated(gate, options, &cancelled_calls);
  auto client = Connect(*server);

  auto first = std::async(std::launch::async,
                          [&] { return client->Sort<uint32_t>(std::vector<uint32_t>{2, 1}); });
  ASSERT_TRUE(gate.WaitForArrivals(1)) << "the first call never reached the worker";

  v1::SortRequest late;
  for (uint32_t k : {9, 8, 7}) late.mutable_keys()->mutable_uint32()->add_values(k);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  v1::SortResponse response;
  // The request reaches the server (admitted, queued behind the gate)...
  EXPECT_EQ(client->stub().Sort(&ctx, late, &response).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  // The client gives up at its deadline; the server learns of it a moment
  // later. The worker is freed only once the server has seen it.
  EXPECT_TRUE(cancelled_calls.WaitFor(1)) << "the server never saw the late call cancelled";
  gate.Open();
  ASSERT_TRUE(first.get().ok());

  // ...and once the worker is free it is dropped: only the first call's two
  // keys were sorted, and the late one is counted as cancelled.
  // Waits for the late call to be counted, not for the in-flight gauge to
  // reach zero: a worker releases admission before it reports the call, so
  // the gauge can read zero while the count is still to come.
  const std::string cancelled =
      R"(sortd_requests_total{code="CANCELLED",key_type="uint32",method="Sort"})";
  const std::string text =
      ScrapeUntil(*server, [&](const std::string& t) { return Sample(t, cancelled) >= 1; });
  EXPECT_EQ(Sample(text, "sortd_inflight_requests"), 0);
  EXPECT_EQ(Sample(text, R"(sortd_keys_sorted_total{engine="cpu"})"), 2);
  EXPECT_EQ(Sample(text, cancelled), 1);
  EXPECT_EQ(Sample(text, R"(sortd_requests_total{code="OK",key_type="uint32",method="Sort"})"), 1);
}

// With the admission queue off (--max_queued_waits=0), the old contract:
// refused at once.
TEST(GatedLimitsTest, MaxQueuedRequestsRefusesTheNextCallWhileOneIsRunningWithoutAQueue) {
  Gate gate("unary.run");
  ServerOptions options;
  options.max_queued_requests = 1;
  options.admission_queue.max_waiting_requests = 0;
  auto server = StartGated(gate, options);
  auto client = Connect(*server);
  auto first = std::async(std::launch::async,
                          [&] { return client->Sort<uint32_t>(std::vector<uint32_t>{2, 1}); });
  ASSERT_TRUE(gate.WaitForArrivals(1)) << "the first call never reached the worker";
  // One request is admitted and held: the next is refused at once.
  v1::SortRequest second;
  second.mutable_keys()->mutable_uint32()->add_values(1);
  grpc::ClientContext ctx;
  v1::SortResponse response;
  grpc::Status s = client->stub().Sort(&ctx, second, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("--max_queued_requests"), std::string::npos) << s.error_message();
  gate.Open();
  auto done = first.get();
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->keys, (std::vector<uint32_t>{1, 2}));
  // The slot is free again.
  auto third = client->Sort<uint32_t>(std::vector<uint32_t>{3, 1, 2});
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(third->keys, (std::vector<uint32_t>{1, 2, 3}));
}


v1::SortRequest StreamRequest(const std::string& id, std::vector<uint32_t> keys) {
  v1::SortRequest request;
  request.set_request_id(id);
  for (uint32_t k : keys) request.mutable_keys()->mutable_uint32()->add_values(k);
  return request;
}

// Polls /metrics until `series` reaches `want` (bounded); its last value.
double WaitForSample(SortdServer& server, const std::string& series, double want) {
  return Sample(
      ScrapeUntil(server, [&](const std::string& t) { return Sample(t, series) >= want; }), series);
}

TEST(GatedStreamTest, AStreamStopsReadingAtMaxStreamPendingAndAnswersEverythingAfter) {
  Gate gate("stream.run");
  ServerOptions options;
  options.worker_threads = 4;
  options.limits.max_stream_pending = 2;
  auto server = StartGated(gate, options);
  OpenOnExit open_on_exit(gate);
  auto client = Connect(*server);

  grpc::ClientContext ctx;
  auto stream = client->stub().SortStream(&ctx);
  constexpr int kRequests = 6;
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(stream->Write(StreamRequest("r" + std::to_string(i), {9u + i, 1u + i, 5u + i})));
  }
  ASSERT_TRUE(stream->WritesDone());
  ASSERT_TRUE(gate.WaitForArrivals(2)) << "the first two requests never ran";
  // Two are held; the other four wait, unread, in the transport. For a
  // while (bounded), no third request is admitted or run, though four
  // workers are idle.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_EQ(Sample(Scrape(*server), "sortd_inflight_requests"), 2);
    ASSERT_EQ(gate.arrived(), 2);
  }
  gate.Open();
  std::map<std::string, std::vector<uint32_t>> answers;
  v1::SortResponse response;
  while (stream->Read(&response)) {
    ASSERT_FALSE(response.has_error()) << response.error().message();
    const auto& v = response.keys().uint32().values();
    answers[response.request_id()] = {v.begin(), v.end()};
  }
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_EQ(answers.size(), size_t{kRequests});
  for (int i = 0; i < kRequests; ++i) {
    EXPECT_EQ(answers["r" + std::to_string(i)], (std::vector<uint32_t>{1u + i, 5u + i, 9u + i}));
  }
}

TEST(GatedStreamTest, ACancelledStreamCountsItsRequestsCancelledAndReleasesThem) {
  Gate gate("stream.run");
  SiteCounter cancels("stream.cancelled");
  ServerOptions options;
  options.worker_threads = 2;
  auto server = StartGated(gate, options, &cancels);
  OpenOnExit open_on_exit(gate);
  auto client = Connect(*server);

  grpc::ClientContext ctx;
  auto stream = client->stub().SortStream(&ctx);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(stream->Write(StreamRequest("c" + std::to_string(i), {2, 1})));
  // Two run (held at the gate), the third waits for a worker.
  ASSERT_TRUE(gate.WaitForArrivals(2));
  ASSERT_EQ(WaitForSample(*server, "sortd_inflight_requests", 3), 3);
  ctx.TryCancel();
  ASSERT_TRUE(cancels.WaitFor(1)) << "the server never saw the stream cancelled";
  gate.Open();
  v1::SortResponse response;
  while (stream->Read(&response)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // Sorted or not, none of the three reached the client: all are counted
  // CANCELLED, none OK, and admission is free again.
  const std::string cancelled =
      R"(sortd_requests_total{code="CANCELLED",key_type="uint32",method="SortStream"})";
  EXPECT_EQ(WaitForSample(*server, cancelled, 3), 3);
  // A request is counted when it is delivered, and released when its
  // response is dropped a moment later: waits for the release too.
  const std::string text = ScrapeUntil(
      *server, [](const std::string& t) { return Sample(t, "sortd_inflight_requests") == 0; });
  EXPECT_EQ(Sample(text, "sortd_inflight_requests"), 0);
  EXPECT_EQ(Sample(text, R"(sortd_requests_total{code="OK",key_type="uint32",method="SortStream"})"),
            -1);
}

}  // namespace
}  // namespace sortd::testing
