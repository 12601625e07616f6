// DiagnosticsService: absent unless enabled; Echo returns the payload and
// request_id unchanged; EchoStream answers every request, in order.
#include <grpcpp/grpcpp.h>

#include <thread>

#include "absl/time/clock.h"

#include "tests/service/test_server.h"

namespace sortd::testing {
namespace {

v1::SortRequest Request(int n, const std::string& id) {
  v1::SortRequest r;
  for (int i = 0; i < n; ++i) r.mutable_keys()->mutable_float64()->add_values(n - i + 0.5);
  r.set_request_id(id);
  return r;
}

std::unique_ptr<SortdServer> StartWithDiagnostics(ServerOptions options = {}) {
  options.enable_diagnostics = true;
  return StartServer(options);
}

std::unique_ptr<v1::DiagnosticsService::Stub> DiagnosticsStub(const SortdServer& server) {
  return v1::DiagnosticsService::NewStub(
      grpc::CreateChannel(Target(server), grpc::InsecureChannelCredentials()));
}

TEST(DiagnosticsTest, UnimplementedUnlessEnabled) {
  auto server = StartServer();
  auto stub = DiagnosticsStub(*server);
  grpc::ClientContext ctx;
  v1::SortResponse response;
  EXPECT_EQ(stub->Echo(&ctx, Request(3, "a"), &response).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

TEST(DiagnosticsTest, EchoReturnsThePayloadUnsorted) {
  auto server = StartWithDiagnostics();
  auto stub = DiagnosticsStub(*server);
  const v1::SortRequest request = Request(1000, "id-7");
  grpc::ClientContext ctx;
  v1::SortResponse response;
  ASSERT_TRUE(stub->Echo(&ctx, request, &response).ok());
  EXPECT_EQ(response.keys().SerializeAsString(), request.keys().SerializeAsString());
  EXPECT_EQ(response.request_id(), "id-7");
  EXPECT_EQ(response.engine(), v1::ENGINE_UNSPECIFIED);
}

TEST(DiagnosticsTest, EchoStreamAnswersEveryRequestInOrder) {
  auto server = StartWithDiagnostics();
  auto stub = DiagnosticsStub(*server);
  grpc::ClientContext ctx;
  auto stream = stub->EchoStream(&ctx);
  constexpr int kRequests = 500;  // more than the server's read-ahead window
  std::thread writer([&] {
    for (int i = 0; i < kRequests; ++i) ASSERT_TRUE(stream->Write(Request(i % 50, std::to_string(i))));
    stream->WritesDone();
  });
  v1::SortResponse response;
  int received = 0;
  while (stream->Read(&response)) {
    EXPECT_EQ(response.request_id(), std::to_string(received));
    EXPECT_EQ(response.keys().float64().values_size(), received % 50);
    ++received;
  }
  writer.join();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(received, kRequests);
}

TEST(DiagnosticsTest, RefusesEchoWhileDraining) {
  ServerOptions options;
  options.drain_delay = absl::Seconds(5);  // listener stays open meanwhile
  auto server = StartWithDiagnostics(options);
  auto stub = DiagnosticsStub(*server);
  {
    grpc::ClientContext ctx;
    v1::SortResponse response;
    ASSERT_TRUE(stub->Echo(&ctx, Request(3, "before"), &response).ok());
  }
  std::thread shutdown([&] { server->Shutdown(); });
  // Until the drain begins Echo still succeeds; wait for it (observed).
  grpc::Status status;
  for (int i = 0; i < 1000; ++i) {
    grpc::ClientContext ctx;
    v1::SortResponse response;
    status = stub->Echo(&ctx, Request(3, "during"), &response);
    if (!status.ok()) break;
    absl::SleepFor(absl::Milliseconds(2));
  }
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(status.error_message().find("draining"), std::string::npos) << status.error_message();
  grpc::ClientContext sctx;
  auto stream = stub->EchoStream(&sctx);
  stream->WritesDone();
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  shutdown.join();
}

}  // namespace
}  // namespace sortd::testing
