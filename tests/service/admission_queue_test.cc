// The admission queue through the real service: a request that fits the
// limits but not the moment waits (unary, sort sessions and SortChunked
// before their uploads), leaves on its deadline or cancellation holding
// nothing, is refused at once when it can never fit or the queue is full
// (with gRPC's retry hint), small requests pass queued large ones, and the
// clients retry busy refusals. Work is held in flight at "unary.run" and
// every wait is on observed state (the server's own gauges).
#include <algorithm>
#include <condition_variable>
#include <future>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/service/test_server.h"

namespace sortd::testing {
namespace {

// Sorts of kKeys uint32 keys reserve 8 bytes a key (the request and the
// response); the limit lets one run, not two.
constexpr size_t kKeys = 100000;
constexpr uint64_t kLimit = 1000000;

// Holds the first call that reaches "unary.run" until Release(); later
// calls pass (so that small requests can run beside the held one).
class HoldFirst {
 public:
  std::function<bool(absl::string_view)> Hook() {
    return [this](absl::string_view at) {
      if (at != "unary.run") return false;
      std::unique_lock<std::mutex> lock(mu_);
      if (held_) return false;
      held_ = true;
      cv_.notify_all();
      cv_.wait(lock, [this] { return released_; });
      return false;
    };
  }
  bool WaitHeld() {
    std::unique_lock<std::mutex> lock(mu_);
    const bool held = cv_.wait_for(lock, std::chrono::seconds(30), [this] { return held_; });
    if (!held) released_ = true;
    return held;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  bool released_ = false;
};

// Releases the held call when the test leaves (declare after the server).
struct ReleaseOnExit {
  HoldFirst& hold;
  ~ReleaseOnExit() { hold.Release(); }
};

ServerOptions QueuedOptions(HoldFirst& hold) {
  ServerOptions options;
  options.batching_mode = BatchingMode::kOff;
  options.max_inflight_bytes = kLimit;
  options.admission_queue.bypass_bytes = 1024;
  options.admission_queue.poll = absl::Milliseconds(2);
  options.test_site_hook = hold.Hook();
  return options;
}

std::vector<uint32_t> Keys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> keys(n);
  for (uint32_t& k : keys) k = static_cast<uint32_t>(rng());
  return keys;
}

std::vector<uint32_t> Sorted(std::vector<uint32_t> keys) {
  std::sort(keys.begin(), keys.end());
  return keys;
}

v1::SortRequest SortRequestOf(const std::vector<uint32_t>& keys) {
  v1::SortRequest request;
  *request.mutable_keys()->mutable_uint32()->mutable_values() = {keys.begin(), keys.end()};
  return request;
}

std::string Trailer(const grpc::ClientContext& ctx, const std::string& key) {
  const auto& trailers = ctx.GetServerTrailingMetadata();
  auto it = trailers.find(key);
  return it == trailers.end() ? "" : std::string(it->second.data(), it->second.size());
}

const char kWaiting[] = "sortd_admission_waiting_requests";
std::string Refusals(const std::string& reason) {
  return "sortd_admission_refusals_total{reason=\"" + reason + "\"}";
}

// Starts a server, holds one kKeys sort in flight and returns its future.
struct HeldServer {
  explicit HeldServer(ServerOptions options) : server(StartServer(std::move(options))) {}
  std::unique_ptr<SortdServer> server;
  std::future<absl::StatusOr<client::SortResult<uint32_t>>> held;
  std::unique_ptr<client::SortClient> held_client;
  const std::vector<uint32_t> held_keys = Keys(kKeys, 1);
  void Hold(HoldFirst& hold) {
    held_client = Connect(*server);
    held = std::async(std::launch::async, [this] {
      return held_client->Sort<uint32_t>(absl::MakeConstSpan(held_keys));
    });
    ASSERT_TRUE(hold.WaitHeld()) << "the first call never reached the worker";
  }
  void ExpectHeldExact() {
    auto done = held.get();
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->keys, Sorted(held_keys));
  }
};

TEST(AdmissionQueueServiceTest, ABurstOverTheLimitWaitsAndEveryAnswerIsItsOwnSort) {
  HoldFirst hold;
  HeldServer s(QueuedOptions(hold));
  ReleaseOnExit release{hold};
  s.Hold(hold);
  constexpr int kWaiters = 4;
  std::vector<std::vector<uint32_t>> inputs;
  std::vector<std::unique_ptr<client::SortClient>> clients;
  std::vector<std::future<absl::StatusOr<client::SortResult<uint32_t>>>> calls;
  for (int i = 0; i < kWaiters; ++i) {
    inputs.push_back(Keys(kKeys, 100 + i));
    clients.push_back(Connect(*s.server));
  }
  for (int i = 0; i < kWaiters; ++i) {
    calls.push_back(std::async(std::launch::async, [&, i] {
      return clients[i]->Sort<uint32_t>(absl::MakeConstSpan(inputs[i]));
    }));
  }
  // All four wait (none refused) while the first holds the limit.
  std::string text = ScrapeUntil(*s.server, [](const std::string& t) {
    return Sample(t, kWaiting) == kWaiters;
  });
  EXPECT_EQ(Sample(text, kWaiting), kWaiters);
  EXPECT_EQ(Sample(text, "sortd_admission_waiting_bytes"), kWaiters * 8.0 * kKeys);
  EXPECT_EQ(Sample(text, "sortd_admission_waiting_held_bytes"), kWaiters * 4.0 * kKeys);
  EXPECT_EQ(Sample(text, "sortd_inflight_bytes"), 8.0 * kKeys);
  hold.Release();
  s.ExpectHeldExact();
  for (int i = 0; i < kWaiters; ++i) {
    auto done = calls[i].get();
    ASSERT_TRUE(done.ok()) << "caller " << i << ": " << done.status();
    EXPECT_EQ(done->keys, Sorted(inputs[i])) << "caller " << i;
  }
  text = ScrapeUntil(*s.server, [](const std::string& t) {
    return Sample(t, "sortd_inflight_bytes") == 0;
  });
  EXPECT_EQ(Sample(text, kWaiting), 0);
  EXPECT_EQ(Sample(text, Refusals("queue_full")), 0);
  EXPECT_EQ(Sample(text, R"(sortd_requests_total{code="OK",key_type="uint32",method="Sort"})"),
            kWaiters + 1);
  // The waits are in the queue histogram: every call was timed from arrival.
  EXPECT_EQ(Sample(text, R"(sortd_queue_duration_seconds_count{method="Sort"})"), kWaiters + 1);
}

TEST(AdmissionQueueServiceTest, ADeadlineThatPassesInTheQueueFreesEverything) {
  HoldFirst hold;
  HeldServer s(QueuedOptions(hold));
  ReleaseOnExit release{hold};
  s.Hold(hold);
  auto c = Connect(*s.server);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  v1::SortResponse response;
  const grpc::Status status = c->stub().Sort(&ctx, SortRequestOf(Keys(kKeys, 2)), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  // The server's copy of the deadline is a transit later than the
  // client's, whose cancellation can reach the server first: either way
  // the waiter leaves once.
  auto left = [](const std::string& t) {
    return Sample(t, Refusals("deadline")) + Sample(t, Refusals("cancelled"));
  };
  std::string text = ScrapeUntil(*s.server, [&](const std::string& t) {
    return left(t) == 1 && Sample(t, kWaiting) == 0;
  });
  EXPECT_EQ(left(text), 1);
  EXPECT_EQ(Sample(text, kWaiting), 0);
  EXPECT_EQ(Sample(text, "sortd_admission_waiting_held_bytes"), 0);
  EXPECT_EQ(Sample(text, "sortd_inflight_bytes"), 8.0 * kKeys);  // the held call alone
  hold.Release();
  s.ExpectHeldExact();
  // The late call was never sorted.
  text = ScrapeUntil(*s.server, [](const std::string& t) {
    return Sample(t, "sortd_inflight_bytes") == 0;
  });
  EXPECT_EQ(Sample(text, R"(sortd_keys_sorted_total{engine="cpu"})"), kKeys);
}

TEST(AdmissionQueueServiceTest, ACallCancelledInTheQueueLeavesIt) {
  HoldFirst hold;
  HeldServer s(QueuedOptions(hold));
  ReleaseOnExit release{hold};
  s.Hold(hold);
  auto c = Connect(*s.server);
  grpc::ClientContext ctx;
  v1::SortResponse response;
  const v1::SortRequest request = SortRequestOf(Keys(kKeys, 3));
  auto call = std::async(std::launch::async, [&] { return c->stub().Sort(&ctx, request, &response); });
  ScrapeUntil(*s.server, [](const std::string& t) { return Sample(t, kWaiting) == 1; });
  ctx.TryCancel();
  EXPECT_EQ(call.get().error_code(), grpc::StatusCode::CANCELLED);
  const std::string text = ScrapeUntil(*s.server, [](const std::string& t) {
    return Sample(t, Refusals("cancelled")) == 1 && Sample(t, kWaiting) == 0;
  });
  EXPECT_EQ(Sample(text, Refusals("cancelled")), 1);
  EXPECT_EQ(Sample(text, kWaiting), 0);
  EXPECT_EQ(Sample(text, "sortd_inflight_bytes"), 8.0 * kKeys);
  hold.Release();
  s.ExpectHeldExact();
}

TEST(AdmissionQueueServiceTest, ARequestThatCanNeverFitFailsAtOnceAndIsNotRetried) {
  HoldFirst hold;
  ServerOptions options = QueuedOptions(hold);
  auto server = StartServer(options);
  ReleaseOnExit release{hold};
  auto c = Connect(*server);  // its default service config retries busy refusals
  grpc::ClientContext ctx;
  v1::SortResponse response;
  const grpc::Status status = c->stub().Sort(&ctx, SortRequestOf(Keys(2 * kKeys, 4)), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(status.error_message().find("can never run"), std::string::npos)
      << status.error_message();
  EXPECT_EQ(Trailer(ctx, "grpc-retry-pushback-ms"), "-1");
  const std::string text = Scrape(*server);
  EXPECT_EQ(Sample(text, Refusals("too_large")), 1);  // one attempt: not retried
  EXPECT_EQ(
      Sample(text,
             R"(sortd_requests_total{code="RESOURCE_EXHAUSTED",key_type="uint32",method="Sort"})"),
      1);
}

TEST(AdmissionQueueServiceTest, AFullQueueRefusesWithItsStateAndARetryHint) {
  HoldFirst hold;
  ServerOptions options = QueuedOptions(hold);
  options.admission_queue.max_waiting_requests = 1;
  HeldServer s(options);
  ReleaseOnExit release{hold};
  s.Hold(hold);
  auto waiter = Connect(*s.server);
  const std::vector<uint32_t> keys = Keys(kKeys, 5);
  auto waiting = std::async(std::launch::async,
                            [&] { return waiter->Sort<uint32_t>(absl::MakeConstSpan(keys)); });
  ScrapeUntil(*s.server, [](const std::string& t) { return Sample(t, kWaiting) == 1; });
  client::ClientOptions no_retry;
  no_retry.retry_busy = false;
  auto c = Connect(*s.server, no_retry);
  grpc::ClientContext ctx;
  v1::SortResponse response;
  const grpc::Status status = c->stub().Sort(&ctx, SortRequestOf(Keys(kKeys, 6)), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(status.error_message().find("admission queue is full"), std::string::npos)
      << status.error_message();
  EXPECT_NE(status.error_message().find("waiting: 1 requests"), std::string::npos)
      << status.error_message();
  const std::string pushback = Trailer(ctx, "grpc-retry-pushback-ms");
  ASSERT_FALSE(pushback.empty());
  EXPECT_GE(std::stoi(pushback), 50);
  hold.Release();
  s.ExpectHeldExact();
  auto done = waiting.get();
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->keys, Sorted(keys));
}

TEST(AdmissionQueueServiceTest, SmallRequestsRunWhileLargeOnesWait) {
  HoldFirst hold;
  HeldServer s(QueuedOptions(hold));
  ReleaseOnExit release{hold};
  s.Hold(hold);
  auto large_client = Connect(*s.server);
  const std::vector<uint32_t> large = Keys(kKeys, 7);
  auto waiting = std::async(std::launch::async, [&] {
    return large_client->Sort<uint32_t>(absl::MakeConstSpan(large));
  });
  ScrapeUntil(*s.server, [](const std::string& t) { return Sample(t, kWaiting) == 1; });
  auto small_client = Connect(*s.server);
  for (int i = 0; i < 20; ++i) {
    const std::vector<uint32_t> small = Keys(16, 1000 + i);
    auto done = small_client->Sort<uint32_t>(absl::MakeConstSpan(small));
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->keys, Sorted(small));
  }
  // The large one is still waiting: the small ones went past it.
  EXPECT_EQ(Sample(Scrape(*s.server), kWaiting), 1);
  hold.Release();
  s.ExpectHeldExact();
  auto done = waiting.get();
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->keys, Sorted(large));
}

TEST(AdmissionQueueServiceTest, ASortSessionWaitsHoldingNothingAndThenSortsExactly) {
  HoldFirst hold;
  HeldServer s(QueuedOptions(hold));
  ReleaseOnExit release{hold};
  s.Hold(hold);
  client::ClientOptions session;
  session.session_min_bytes = 1;
  session.part_bytes = 16 << 10;
  auto c = Connect(*s.server, session);
  // 4 bytes of keys and 4 of the CPU sort's scratch a key: fits alone.
  const std::vector<uint32_t> keys = Keys(kKeys, 8);
  std::vector<uint32_t> out(keys.size());
  auto call = std::async(std::launch::async, [&] {
    return c->SortInto<uint32_t>(absl::MakeConstSpan(keys), absl::MakeSpan(out));
  });
  const std::string text = ScrapeUntil(*s.server, [](const std::string& t) {
    return Sample(t, kWaiting) == 1;
  });
  EXPECT_EQ(Sample(text, kWaiting), 1);
  EXPECT_EQ(Sample(text, "sortd_admission_waiting_bytes"), 8.0 * kKeys);
  EXPECT_EQ(Sample(text, "sortd_admission_waiting_held_bytes"), 0);
  EXPECT_EQ(Sample(text, "sortd_sort_sessions"), 0);  // not opened: no upload yet
  hold.Release();
  s.ExpectHeldExact();
  auto engine = call.get();
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ(out, Sorted(keys));
}

TEST(AdmissionQueueServiceTest, ASortChunkedUploadWaitsAtItsFirstChunk) {
  HoldFirst hold;
  ServerOptions options = QueuedOptions(hold);
  // SortChunked holds 16 bytes a key (keys, their copy, the permutation).
  options.max_inflight_bytes = 2 * kLimit;
  options.limits.chunk_response_bytes = 64 << 10;  // within the client's messages
  HeldServer s(options);
  ReleaseOnExit release{hold};
  s.Hold(hold);
  client::ClientOptions chunked;
  chunked.session_min_bytes = 0;             // no sessions
  chunked.max_message_bytes = 256 << 10;     // 400 KB of keys: SortChunked
  chunked.chunk_bytes = 64 << 10;
  auto c = Connect(*s.server, chunked);
  const std::vector<uint32_t> keys = Keys(kKeys, 9);
  auto call = std::async(std::launch::async, [&] {
    return c->Sort<uint32_t>(absl::MakeConstSpan(keys));
  });
  const std::string text = ScrapeUntil(*s.server, [](const std::string& t) {
    return Sample(t, kWaiting) == 1;
  });
  EXPECT_EQ(Sample(text, kWaiting), 1);
  EXPECT_EQ(Sample(text, "sortd_admission_waiting_bytes"), 16.0 * kKeys);
  // One chunk arrived, no more: the upload waits holding it alone.
  EXPECT_GT(Sample(text, "sortd_admission_waiting_held_bytes"), 0);
  EXPECT_LE(Sample(text, "sortd_admission_waiting_held_bytes"), 70 << 10);
  hold.Release();
  s.ExpectHeldExact();
  auto done = call.get();
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->keys, Sorted(keys));
}

TEST(AdmissionQueueServiceTest, ClientsRetryBusyRefusalsUnlessToldNotTo) {
  HoldFirst hold;
  ServerOptions options = QueuedOptions(hold);
  options.admission_queue.max_waiting_requests = 0;  // refuse at once, with a hint
  HeldServer s(options);
  ReleaseOnExit release{hold};
  s.Hold(hold);
  client::ClientOptions no_retry;
  no_retry.retry_busy = false;
  auto refused = Connect(*s.server, no_retry)->Sort<uint32_t>(absl::MakeConstSpan(Keys(kKeys, 10)));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Sample(Scrape(*s.server), Refusals("queue_full")), 1);
  // The default client retries after the hint: once its first attempt is
  // refused, the held call finishes and a retry gets through.
  auto c = Connect(*s.server);
  const std::vector<uint32_t> keys = Keys(kKeys, 11);
  auto call = std::async(std::launch::async,
                         [&] { return c->Sort<uint32_t>(absl::MakeConstSpan(keys)); });
  ScrapeUntil(*s.server, [](const std::string& t) { return Sample(t, Refusals("queue_full")) >= 2; });
  hold.Release();
  s.ExpectHeldExact();
  auto done = call.get();
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->keys, Sorted(keys));
  EXPECT_GE(Sample(Scrape(*s.server), Refusals("queue_full")), 2);
}

}  // namespace
}  // namespace sortd::testing
