// Metrics recorded by a real in-process server for a known mix of requests,
// read back from the Prometheus registry; and the request log's rate limit.
#include "core/gpu_info.h"
#include "server/metrics/request_log.h"
#include "tests/service/test_server.h"

namespace sortd::testing {
namespace {

TEST(MetricsTest, CountsKnownRequestsBytesAndDurations) {
  auto server = StartServer();
  auto client = Connect(*server);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client->Sort<uint32_t>(std::vector<uint32_t>(10, 7)).ok());
  }
  grpc::ClientContext ctx;
  v1::SortResponse response;
  ASSERT_FALSE(client->stub().Sort(&ctx, v1::SortRequest(), &response).ok());
  ASSERT_TRUE((client->SortPairs<int64_t, float>(std::vector<int64_t>{3, 1},
                                                 std::vector<float>{1, 2})).ok());
  // A stream of 4 items, one invalid.
  grpc::ClientContext sctx;
  auto stream = client->stub().SortStream(&sctx);
  for (int i = 0; i < 4; ++i) {
    v1::SortRequest r;
    r.mutable_keys()->mutable_float64()->add_values(i);
    if (i == 3) r.set_order(static_cast<v1::SortOrder>(9));
    ASSERT_TRUE(stream->Write(r));
  }
  stream->WritesDone();
  while (stream->Read(&response)) {
  }
  ASSERT_TRUE(stream->Finish().ok());

  const std::string text = Scrape(*server);
  EXPECT_EQ(Sample(text, R"(sortd_requests_total{code="OK",key_type="uint32",method="Sort"})"), 3);
  EXPECT_EQ(Sample(text, R"(sortd_requests_total{code="INVALID_ARGUMENT",key_type="none",method="Sort"})"), 1);
  EXPECT_EQ(Sample(text, R"(sortd_requests_total{code="OK",key_type="int64",method="SortPairs"})"), 1);
  EXPECT_EQ(Sample(text, R"(sortd_requests_total{code="OK",key_type="float64",method="SortStream"})"), 3);
  EXPECT_EQ(Sample(text, R"(sortd_requests_total{code="INVALID_ARGUMENT",key_type="float64",method="SortStream"})"), 1);
  EXPECT_EQ(Sample(text, R"(sortd_bytes_received_total{method="Sort"})"), 3 * 40);
  EXPECT_EQ(Sample(text, R"(sortd_bytes_sent_total{method="Sort"})"), 3 * 40);
  EXPECT_EQ(Sample(text, R"(sortd_bytes_received_total{method="SortPairs"})"), 2 * 8 + 2 * 4);
  EXPECT_EQ(Sample(text, R"(sortd_bytes_received_total{method="SortStream"})"), 4 * 8);
  EXPECT_EQ(Sample(text, R"(sortd_keys_sorted_total{engine="cpu"})"), 3 * 10 + 2 + 3);
  EXPECT_EQ(Sample(text, R"(sortd_request_duration_seconds_count{engine="cpu",method="Sort"})"), 3);
  EXPECT_EQ(Sample(text, R"(sortd_request_duration_seconds_count{engine="none",method="Sort"})"), 1);
  EXPECT_EQ(Sample(text, R"(sortd_queue_duration_seconds_count{method="Sort"})"), 3);
  // Every sorted request is in exactly one launch; the batcher may have
  // put several into one (sequential calls here: usually one each).
  EXPECT_EQ(Sample(text, R"(sortd_batch_size_sum{engine="cpu"})"), 3 + 1 + 3);
  EXPECT_GE(Sample(text, R"(sortd_batch_size_count{engine="cpu"})"), 1);
  EXPECT_LE(Sample(text, R"(sortd_batch_size_count{engine="cpu"})"), 3 + 1 + 3);
  EXPECT_EQ(Sample(text, "sortd_inflight_requests"), 0);
  EXPECT_EQ(Sample(text, "sortd_inflight_bytes"), 0);
  // The GPUs this machine has (engine=cpu here, but the gauge reports what
  // is present: 0 on the development VMs and CI, 1 on the GPU host).
  EXPECT_EQ(Sample(text, "sortd_gpu_devices"), static_cast<double>(ListGpus().size()));
  EXPECT_NE(text.find("sortd_build_info{"), std::string::npos);
}

// Per-GPU series (issue #20): what one GPU's jobs record lands in its own
// kernel and transfer series, and GPUs out of range are dropped.
TEST(MetricsTest, GpuTimingsAreRecordedPerGpu) {
  auto registry = std::make_shared<prometheus::Registry>();
  MetricsOptions options;
  options.gpu_devices = 2;
  ServiceMetrics metrics(registry, options);
  metrics.RecordKernel(1, 0.002);
  metrics.RecordTransfer(1, /*host_to_device=*/true, 0.010);
  metrics.RecordTransfer(1, /*host_to_device=*/false, 0.020);
  metrics.RecordTransfer(0, /*host_to_device=*/true, 0.030);
  metrics.RecordTransfer(2, /*host_to_device=*/true, 0.040);  // no GPU 2: dropped
  metrics.SetDevicePoolBytes(1, 4096);
  const std::string text = prometheus::TextSerializer().Serialize(registry->Collect());
  EXPECT_EQ(Sample(text, R"(sortd_gpu_kernel_duration_seconds_count{gpu="1"})"), 1);
  EXPECT_EQ(Sample(text, R"(sortd_gpu_kernel_duration_seconds_count{gpu="0"})"), 0);
  EXPECT_EQ(Sample(text, R"(sortd_transfer_duration_seconds_count{direction="h2d",gpu="1"})"), 1);
  EXPECT_EQ(Sample(text, R"(sortd_transfer_duration_seconds_count{direction="d2h",gpu="1"})"), 1);
  EXPECT_EQ(Sample(text, R"(sortd_transfer_duration_seconds_count{direction="h2d",gpu="0"})"), 1);
  EXPECT_EQ(Sample(text, R"(sortd_transfer_duration_seconds_count{direction="d2h",gpu="0"})"), 0);
  EXPECT_DOUBLE_EQ(Sample(text, R"(sortd_transfer_duration_seconds_sum{direction="h2d",gpu="0"})"), 0.030);
  EXPECT_EQ(text.find(R"(gpu="2")"), std::string::npos);
  EXPECT_EQ(Sample(text, R"(sortd_device_pool_bytes{gpu="1"})"), 4096);
}

TEST(RequestLogTest, LogsFailuresAndSlowRequestsWithinTheRateLimit) {
  std::ostringstream out;
  RequestLogOptions options;
  options.slow_seconds = 0.5;
  options.lines_per_second = 2;
  const absl::Time start = absl::Now();
  RequestLog log(options, &out);
  log.Maybe("Sort", "fast-ok", absl::OkStatus(), 0.001);
  EXPECT_EQ(out.str(), "");
  log.Maybe("Sort", "slow-ok", absl::OkStatus(), 0.7);
  EXPECT_NE(out.str().find("slow Sort request_id=\"slow-ok\" code=OK"), std::string::npos) << out.str();
  for (int i = 0; i < 10; ++i) {
    log.Maybe("SortPairs", "bad-" + std::to_string(i),
              absl::InvalidArgumentError("values: required"), 0.001);
  }
  const std::string text = out.str();
  EXPECT_NE(text.find("failed SortPairs request_id=\"bad-0\" code=INVALID_ARGUMENT"), std::string::npos);
  EXPECT_NE(text.find("message=\"values: required\""), std::string::npos);
  int lines = 0;
  for (char c : text) lines += c == '\n';
  // A bucket of 2, plus what refilled meanwhile (2 per second; a stalled
  // machine may take a while over these calls).
  const int refilled = static_cast<int>(absl::ToDoubleSeconds(absl::Now() - start) * 2) + 1;
  EXPECT_LE(lines, 2 + refilled);
  EXPECT_EQ(static_cast<int>(log.suppressed_total()), 11 - lines);
}

TEST(RequestLogTest, ClientTextIsEscapedAndCut) {
  std::ostringstream out;
  RequestLog log(RequestLogOptions{}, &out);
  // A forged second line in the id, quotes in the message, and a long id.
  log.Maybe("Sort", "a\"\n2026-01-01T00:00:00.000Z sortd: forged", absl::InvalidArgumentError("x \"y\""),
            0.001);
  log.Maybe("Sort", std::string(5000, 'i'), absl::InvalidArgumentError("request_id: long"), 0.001);
  const std::string text = out.str();
  int lines = 0;
  for (char c : text) lines += c == '\n';
  EXPECT_EQ(lines, 2) << text;
  EXPECT_NE(text.find(R"(request_id="a\"\n2026)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(message="x \"y\"")"), std::string::npos) << text;
  EXPECT_NE(text.find(std::string(128, 'i') + "...(5000 bytes)\""), std::string::npos) << text;
  EXPECT_EQ(text.find(std::string(129, 'i')), std::string::npos);
}

}  // namespace
}  // namespace sortd::testing
