// Limits (message size, in-flight bytes) and the SIGTERM drain sequence.
#include <chrono>
#include <future>
#include <thread>

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>

#include "core/gpu_info.h"
#include "tests/service/gate.h"
#include "tests/service/test_server.h"

namespace sortd::testing {
namespace {

TEST(LimitsTest, OversizeMessageIsResourceExhaustedAndServerStaysHealthy) {
  ServerOptions options;
  options.max_message_bytes = 1 << 20;
  auto server = StartServer(options);
  client::ClientOptions copts;
  copts.max_message_bytes = 64 << 20;  // the client would send it
  auto client = Connect(*server, copts);
  v1::SortRequest request;
  request.mutable_keys()->mutable_uint32()->mutable_values()->Resize(1 << 19, 7);  // 2 MiB
  grpc::ClientContext ctx;
  v1::SortResponse response;
  grpc::Status status = client->stub().Sort(&ctx, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  auto health = client->Health();
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(*health, "SERVING");
  EXPECT_EQ(CpuKeysSorted(*server), 0);  // refused, not sorted
}

TEST(LimitsTest, RequestOverInflightLimitIsResourceExhausted) {
  ServerOptions options;
  options.max_inflight_bytes = 4096;
  auto server = StartServer(options);
  auto client = Connect(*server);
  std::vector<uint64_t> keys(1000, 1);  // 8000 bytes in, 8000 out
  auto r = client->Sort<uint64_t>(keys);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("max_inflight_bytes"), std::string::npos);
  EXPECT_EQ(CpuKeysSorted(*server), 0);  // refused by admission, not sorted
  auto small = client->Sort<uint64_t>(std::vector<uint64_t>{2, 1});
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->keys, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(CpuKeysSorted(*server), 2);
}

TEST(DrainTest, ShutdownRefusesNewWorkAndFinishesInFlightStreams) {
  // A stream's request is held at the worker ("stream.run") when the drain
  // begins: provably in flight. While it is held, new work (a unary call,
  // and a new request on the same stream) is refused UNAVAILABLE and the
  // drain cannot end; once released, the held request is answered exactly
  // and the stream ends OK.
  Gate gate("stream.run");
  ServerOptions options;
  options.batching_mode = BatchingMode::kOff;  // every request through the pool
  // No drain_delay: the held request alone keeps the drain (and the
  // listener, for the observer) open while the checks below run.
  options.test_site_hook = gate.Hook();
  auto server = StartServer(options);
  OpenOnExit open_on_exit(gate);
  auto client = Connect(*server);
  auto observer = Connect(*server);
  // Connected before the drain: a first call after it could find the
  // listener closed on a slow machine.
  auto before = observer->Health();
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(*before, "SERVING");

  // A stream opened before the drain, with one request held in flight.
  grpc::ClientContext stream_ctx;
  stream_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = client->stub().SortStream(&stream_ctx);
  v1::SortRequest request;
  request.set_request_id("before");
  for (uint32_t k : {3, 1, 2}) request.mutable_keys()->mutable_uint32()->add_values(k);
  ASSERT_TRUE(stream->Write(request));
  ASSERT_TRUE(gate.WaitForArrivals(1)) << "the request never reached a worker";

  auto shutdown = std::async(std::launch::async, [&] { server->Shutdown(); });
  // Wait for the drain to begin (observed, not slept for).
  absl::StatusOr<std::string> health;
  for (int i = 0; i < 1000; ++i) {
    health = observer->Health();
    if (!health.ok() || *health == "NOT_SERVING") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // (EXPECT until the gate is open: an early return would leave the
  // request held; OpenOnExit covers a failed ASSERT as well.)
  EXPECT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(health.value_or(""), "NOT_SERVING");
  auto refused = observer->Sort<uint32_t>(std::vector<uint32_t>{1});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();

  // New work on the stream is refused, answered while "before" is held.
  v1::SortRequest during;
  during.set_request_id("during");
  during.mutable_keys()->mutable_uint32()->add_values(1);
  EXPECT_TRUE(stream->Write(during));
  v1::SortResponse response;
  EXPECT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.request_id(), "during");
  EXPECT_TRUE(response.has_error());
  EXPECT_EQ(response.error().code(), static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  // The held request keeps the drain from ending.
  EXPECT_EQ(gate.arrived(), 1);
  EXPECT_EQ(shutdown.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);

  gate.Open();
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.request_id(), "before");
  ASSERT_FALSE(response.has_error()) << response.error().message();
  const auto& got = response.keys().uint32().values();
  EXPECT_EQ(std::vector<uint32_t>(got.begin(), got.end()), (std::vector<uint32_t>{1, 2, 3}));
  stream->WritesDone();
  EXPECT_FALSE(stream->Read(&response));
  EXPECT_TRUE(stream->Finish().ok());  // the stream itself ends cleanly
  shutdown.get();
}

// The drain waits for the sortd calls in flight when it began before it
// calls gRPC's Shutdown, but not for gRPC's own calls: a health Watch lasts
// as long as its client, and waiting for it would hold every drain to its
// timeout with the listener open. (Clients with client-side health checks
// end their watch at the GOAWAY that gRPC's Shutdown sends.)
TEST(DrainTest, AnOpenHealthWatchDoesNotDelayGrpcShutdown) {
  ServerOptions options;
  options.drain_timeout = absl::Seconds(60);
  auto server = StartServer(options);
  auto channel = grpc::CreateChannel(Target(*server), grpc::InsecureChannelCredentials());
  grpc::GenericStub generic(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  auto watch = generic.PrepareCall(&ctx, "/grpc.health.v1.Health/Watch", &cq);
  // One step of the call at a time.
  auto step = [&](auto start) {
    void* tag = nullptr;
    bool ok = false;
    start(reinterpret_cast<void*>(1));
    return cq.Next(&tag, &ok) && ok;
  };
  grpc::ByteBuffer request(nullptr, 0);  // HealthCheckRequest{service: ""}
  grpc::ByteBuffer status;
  ASSERT_TRUE(step([&](void* tag) { watch->StartCall(tag); }));
  ASSERT_TRUE(step([&](void* tag) { watch->Write(request, tag); }));
  ASSERT_TRUE(step([&](void* tag) { watch->WritesDone(tag); }));
  ASSERT_TRUE(step([&](void* tag) { watch->Read(&status, tag); }))
      << "the watch is open on the server once it has answered";

  auto shutdown = std::async(std::launch::async, [&] { server->Shutdown(); });
  // gRPC's Shutdown closes the listener: a new client cannot connect. Well
  // within drain_timeout; a drain that counted the watch would keep the
  // listener open for all 60 s of it.
  absl::StatusOr<std::string> health;
  const auto start = std::chrono::steady_clock::now();
  do {
    health = Connect(*server)->Health();
  } while (health.ok() && std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
  EXPECT_FALSE(health.ok()) << "a new connection still reached the server: " << *health;

  // Cancelling the watch ends the last call, and gRPC's Shutdown returns.
  ctx.TryCancel();
  while (step([&](void* tag) { watch->Read(&status, tag); })) {
  }
  grpc::Status finished;
  step([&](void* tag) { watch->Finish(&finished, tag); });
  shutdown.get();
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
}

// A Start() that fails part-way returns its error and cleans up without
// crashing: a port that cannot be bound, and --engine=gpu without a GPU.
TEST(StartTest, FailuresReturnAnErrorAndCleanUp) {
  auto options = [](const char* listen, const char* metrics, EngineChoice engine) {
    ServerOptions o;
    o.listen_address = listen;
    o.metrics_listen = metrics;
    o.dispatcher.engine = engine;
    return o;
  };
  auto s = SortdServer::Start(options("256.0.0.1:1", "", EngineChoice::kCpu));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable) << s.status();

  auto m = SortdServer::Start(options("127.0.0.1:0", "256.0.0.1:1", EngineChoice::kCpu));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("metrics_listen"), std::string::npos) << m.status();

  // --engine=gpu: refused without a GPU; with one (the GPU host) it starts.
  auto g = SortdServer::Start(options("127.0.0.1:0", "", EngineChoice::kGpu));
  if (ListGpus().empty()) {
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), absl::StatusCode::kFailedPrecondition) << g.status();
    EXPECT_NE(g.status().message().find("engine=gpu"), std::string::npos) << g.status();
  } else {
    EXPECT_TRUE(g.ok()) << g.status();
  }
}

}  // namespace
}  // namespace sortd::testing
