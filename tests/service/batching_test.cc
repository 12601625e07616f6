// The dynamic batcher behind the service (CPU engine, --batching=on): a
// flood of mixed unary requests verified one by one, concurrent requests of
// one kind sharing launches, SortStream ids matched, a full batch launching
// before its delay, a request whose deadline passes mid-batch not holding
// its batch-mates back, and queue overflow answered with RESOURCE_EXHAUSTED.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>

#include "server/grpc/service_context.h"
#include "tests/service/test_server.h"

namespace sortd::testing {
namespace {

ServerOptions BatchingOptions(absl::Duration delay, size_t queue = 65536) {
  ServerOptions options;
  options.batching_mode = BatchingMode::kOn;
  options.batching.max_delay = delay;
  options.batching.max_queued_requests = queue;
  options.worker_threads = 4;
  return options;
}

// Stable reference permutation of `keys` (integers: no float rules needed).
template <typename T>
std::vector<uint64_t> StableOrder(const std::vector<T>& keys, bool descending) {
  std::vector<uint64_t> idx(keys.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](uint64_t a, uint64_t b) {
    return descending ? keys[b] < keys[a] : keys[a] < keys[b];
  });
  return idx;
}

template <typename T>
void CheckSort(client::SortClient& client, const std::vector<T>& keys, bool descending,
               bool indices, const std::string& what) {
  auto result = client.Sort(absl::MakeConstSpan(keys),
                            descending ? v1::SORT_ORDER_DESCENDING : v1::SORT_ORDER_ASCENDING,
                            indices);
  ASSERT_TRUE(result.ok()) << what << ": " << result.status();
  const std::vector<uint64_t> order = StableOrder(keys, descending);
  ASSERT_EQ(result->keys.size(), keys.size()) << what;
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(result->keys[i], keys[order[i]]) << what << " at " << i;
    if (indices) ASSERT_EQ(result->indices[i], order[i]) << what << " index at " << i;
  }
  EXPECT_EQ(result->engine, v1::ENGINE_CPU) << what;
}

TEST(BatchingTest, FloodOfMixedRequestsVerifiedOneByOneInFewerLaunches) {
  auto server = StartServer(BatchingOptions(absl::Milliseconds(2)));
  ASSERT_NE(server, nullptr);
  constexpr int kThreads = 16, kPerThread = 40;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto client = Connect(*server);
      std::mt19937_64 rng(t);
      for (int i = 0; i < kPerThread; ++i) {
        const std::string what = "thread " + std::to_string(t) + " request " + std::to_string(i);
        const size_t n = rng() % 3 == 0 ? 0 : rng() % 3000;
        const bool descending = rng() % 2;
        const bool indices = rng() % 2;
        switch (i % 4) {
          case 0: {
            std::vector<uint32_t> keys(n);
            for (auto& k : keys) k = rng() % 50;  // many equal keys: stability shows
            CheckSort(*client, keys, descending, indices, what);
            break;
          }
          case 1: {
            std::vector<int64_t> keys(n);
            for (auto& k : keys) k = static_cast<int64_t>(rng() % 100) - 50;
            CheckSort(*client, keys, descending, indices, what);
            break;
          }
          case 2: {
            std::vector<int32_t> keys(n);
            for (auto& k : keys) k = static_cast<int32_t>(rng());
            CheckSort(*client, keys, descending, indices, what);
            break;
          }
          default: {  // pairs: values follow their keys, stably
            std::vector<uint64_t> keys(n);
            std::vector<std::string> values(n);
            for (size_t k = 0; k < n; ++k) {
              keys[k] = rng() % 20;
              values[k] = "v" + std::to_string(k);
            }
            auto result = client->SortPairs(absl::MakeConstSpan(keys), absl::MakeConstSpan(values),
                                            descending ? v1::SORT_ORDER_DESCENDING
                                                       : v1::SORT_ORDER_ASCENDING);
            ASSERT_TRUE(result.ok()) << what << ": " << result.status();
            const std::vector<uint64_t> order = StableOrder(keys, descending);
            for (size_t k = 0; k < n; ++k) {
              ASSERT_EQ(result->keys[k], keys[order[k]]) << what;
              ASSERT_EQ(result->values[k], values[order[k]]) << what;
            }
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  const std::string page = Scrape(*server);
  const double launches = Sample(page, "sortd_batch_size_count{engine=\"cpu\"}");
  const double requests = Sample(page, "sortd_batch_size_sum{engine=\"cpu\"}");
  EXPECT_EQ(requests, kThreads * kPerThread);
  // Clients drift across the queues (type x order x indices) as they verify
  // answers, so how many share a launch depends on the machine's load; some
  // do. ConcurrentRequestsOfOneKindShareALaunch pins the batching ratio.
  EXPECT_LT(launches, requests) << page;
}

TEST(BatchingTest, ConcurrentRequestsOfOneKindShareALaunch) {
  // A window long enough that 16 released-together clients land in it even
  // on a loaded CI machine; each round is one queue's worth of requests.
  auto server = StartServer(BatchingOptions(absl::Milliseconds(250)));
  ASSERT_NE(server, nullptr);
  constexpr int kClients = 16, kRounds = 3;
  std::vector<std::unique_ptr<client::SortClient>> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.push_back(Connect(*server));
    ASSERT_TRUE(clients.back()->Health().ok());  // connected before the rounds
  }
  for (int round = 0; round < kRounds; ++round) {
    std::atomic<int> ready{0}, ok{0};
    std::vector<std::thread> threads;
    for (int c = 0; c < kClients; ++c) {
      threads.emplace_back([&, c] {
        std::vector<int32_t> keys(100);
        std::iota(keys.rbegin(), keys.rend(), c * 1000 + round);
        ++ready;
        while (ready.load() < kClients) std::this_thread::yield();
        auto result = clients[c]->Sort(absl::MakeConstSpan(keys));
        // Its own keys, sorted: another request's output would not match.
        std::vector<int32_t> want = keys;
        std::sort(want.begin(), want.end());
        if (result.ok() && result->keys == want) ++ok;
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(ok.load(), kClients) << "round " << round;
  }
  const std::string page = Scrape(*server);
  const double launches = Sample(page, "sortd_batch_size_count{engine=\"cpu\"}");
  const double requests = Sample(page, "sortd_batch_size_sum{engine=\"cpu\"}");
  EXPECT_EQ(requests, kClients * kRounds);
  EXPECT_LE(launches, kRounds * 4) << page;  // 48 requests, at most 12 launches
}

TEST(BatchingTest, SortStreamAnswersEveryIdBatchedOrNot) {
  ServerOptions options = BatchingOptions(absl::Microseconds(200));
  options.batching.max_request_keys = 500;  // larger requests take the pool path
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  auto client = Connect(*server);
  grpc::ClientContext ctx;
  auto stream = client->stub().SortStream(&ctx);
  std::map<std::string, std::vector<float>> expected;
  std::mt19937 rng(3);
  constexpr int kRequests = 600;
  for (int i = 0; i < kRequests; ++i) {
    v1::SortRequest request;
    request.set_request_id("id-" + std::to_string(i));
    request.set_order(i % 2 ? v1::SORT_ORDER_DESCENDING : v1::SORT_ORDER_ASCENDING);
    std::vector<float> keys(i % 7 == 0 ? 2000 : rng() % 400);
    for (float& k : keys) k = static_cast<float>(rng() % 1000) - 500.0f;
    request.mutable_keys()->mutable_float32()->mutable_values()->Add(keys.begin(), keys.end());
    std::sort(keys.begin(), keys.end());
    if (i % 2) std::reverse(keys.begin(), keys.end());
    expected[request.request_id()] = keys;
    ASSERT_TRUE(stream->Write(request));
  }
  stream->WritesDone();
  std::map<std::string, int> seen;
  v1::SortResponse response;
  while (stream->Read(&response)) {
    ++seen[response.request_id()];
    ASSERT_FALSE(response.has_error()) << response.error().message();
    const auto& got = response.keys().float32().values();
    EXPECT_EQ(std::vector<float>(got.begin(), got.end()), expected[response.request_id()])
        << response.request_id();
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(seen.size(), static_cast<size_t>(kRequests));
  for (const auto& [id, count] : seen) EXPECT_EQ(count, 1) << id;
}

TEST(BatchingTest, FullBatchLaunchesBeforeItsDelay) {
  ServerOptions options = BatchingOptions(absl::Seconds(30));
  options.batching.max_cpu_batch_keys = 4000;
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  // Four 1000-key requests fill a 4000-key batch: it launches at once, far
  // before the 30 s delay (the calls' 10 s deadline would fail otherwise).
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      client::ClientOptions copts;
      copts.timeout = absl::Seconds(10);
      auto client = Connect(*server, copts);
      std::vector<uint32_t> keys(1000);
      std::iota(keys.rbegin(), keys.rend(), t);
      auto result = client->Sort(absl::MakeConstSpan(keys));
      std::vector<uint32_t> want = keys;
      std::sort(want.begin(), want.end());
      if (result.ok() && result->keys == want) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 4);
}

TEST(BatchingTest, InlineRequestsNeverWaitForABatch) {
  // A 30 s batch delay with no batch ever filling: only the inline path
  // (<= 100 keys) answers within the calls' 10 s deadline - unary Sort,
  // SortPairs and SortStream items alike, each sorted correctly.
  ServerOptions options = BatchingOptions(absl::Seconds(30));
  options.inline_max_keys = 100;
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  client::ClientOptions copts;
  copts.timeout = absl::Seconds(10);
  auto client = Connect(*server, copts);
  std::vector<uint64_t> keys(100);
  std::iota(keys.rbegin(), keys.rend(), uint64_t{5});
  auto sorted = client->Sort(absl::MakeConstSpan(keys), v1::SORT_ORDER_ASCENDING, true);
  ASSERT_TRUE(sorted.ok()) << sorted.status();
  std::vector<uint64_t> want = keys;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(sorted->keys, want);
  std::vector<uint64_t> want_indices(100);
  std::iota(want_indices.rbegin(), want_indices.rend(), uint64_t{0});  // input was descending
  EXPECT_EQ(sorted->indices, want_indices);
  EXPECT_EQ(sorted->engine, v1::ENGINE_CPU);
  std::vector<float> pair_keys = {2.5f, -1.0f, 2.5f, 0.0f};
  std::vector<int64_t> values = {0, 1, 2, 3};
  auto pairs = client->SortPairs(absl::MakeConstSpan(pair_keys), absl::MakeConstSpan(values));
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_EQ(pairs->values, (std::vector<int64_t>{1, 3, 0, 2}));  // stable

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = client->stub().SortStream(&ctx);
  for (int i = 0; i < 50; ++i) {
    v1::SortRequest request;
    request.set_request_id(std::to_string(i));
    for (int k = 0; k <= i; ++k) request.mutable_keys()->mutable_int32()->add_values(i - k);
    ASSERT_TRUE(stream->Write(request));
  }
  stream->WritesDone();
  int answered = 0;
  v1::SortResponse response;
  while (stream->Read(&response)) {
    ASSERT_FALSE(response.has_error()) << response.error().message();
    // Request i held i, i-1, ..., 0: its answer is 0..i.
    const auto& got = response.keys().int32().values();
    std::vector<int32_t> want(std::stoul(response.request_id()) + 1);
    std::iota(want.begin(), want.end(), 0);
    EXPECT_EQ(std::vector<int32_t>(got.begin(), got.end()), want) << response.request_id();
    ++answered;
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(answered, 50);
  // Inline requests are accounted like any other: queue time observed, a
  // launch of one each.
  const std::string page = Scrape(*server);
  EXPECT_EQ(Sample(page, "sortd_queue_duration_seconds_count{method=\"Sort\"}"), 1) << page;
  EXPECT_EQ(Sample(page, "sortd_queue_duration_seconds_count{method=\"SortPairs\"}"), 1);
  EXPECT_EQ(Sample(page, "sortd_queue_duration_seconds_count{method=\"SortStream\"}"), 50);
  EXPECT_EQ(Sample(page, "sortd_batch_size_count{engine=\"cpu\"}"), 52);
  EXPECT_EQ(Sample(page, "sortd_batch_size_sum{engine=\"cpu\"}"), 52);
}

TEST(BatchingTest, InlineThresholdZeroMeansNeverEvenForEmptyRequests) {
  DispatcherOptions dispatcher_options;
  dispatcher_options.engine = EngineChoice::kCpu;
  auto dispatcher = Dispatcher::Create(dispatcher_options);
  ASSERT_TRUE(dispatcher.ok()) << dispatcher.status();
  ServiceContext context;
  context.dispatcher = dispatcher->get();
  context.inline_max_keys = 0;
  EXPECT_FALSE(context.SortsInline(DataType::kUint32, 0));
  EXPECT_FALSE(context.SortsInline(DataType::kUint32, 1));
  context.inline_max_keys = 100;
  EXPECT_TRUE(context.SortsInline(DataType::kUint32, 0));
  EXPECT_TRUE(context.SortsInline(DataType::kFloat64, 100));
  EXPECT_FALSE(context.SortsInline(DataType::kUint32, 101));
  EXPECT_FALSE(context.SortsInline(DataType::kBytes, 10));
  EXPECT_FALSE(context.SortsInline(std::nullopt, 10));
}

// Counts the calls that reached a test site (nothing is held).
class SiteCount {
 public:
  explicit SiteCount(std::string site) : site_(std::move(site)) {}
  std::function<bool(absl::string_view)> Hook() {
    return [this](absl::string_view at) {
      if (at == site_) {
        std::lock_guard<std::mutex> lock(mu_);
        ++reached_;
        cv_.notify_all();
      }
      return false;
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

TEST(BatchingTest, ExpiredRequestDoesNotHoldItsBatchMatesBack) {
  // A batch launches when it holds 7 keys, or after 60 s. A 3-key request
  // waits in the queue until its deadline passes; a 4-key request then
  // fills the batch: the two share one launch by construction (alone, the
  // 4-key request would wait the full 60 s, past its 20 s deadline). The
  // expired one is dropped at launch and its batch-mate is sorted.
  ServerOptions options = BatchingOptions(absl::Seconds(60));
  options.batching.max_cpu_batch_keys = 7;
  SiteCount cancels("unary.cancelled");
  options.test_site_hook = cancels.Hook();
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  {
    client::ClientOptions copts;
    copts.timeout = absl::Milliseconds(250);  // expires while its batch waits
    auto impatient = Connect(*server, copts);
    std::vector<int32_t> keys = {3, 1, 2};
    auto expired = std::async(std::launch::async,
                              [&] { return impatient->Sort(absl::MakeConstSpan(keys)).status(); });
    // Queued (admitted) before its deadline, then expired.
    const std::string queued = ScrapeUntil(
        *server, [](const std::string& t) { return Sample(t, "sortd_inflight_requests") >= 1; });
    EXPECT_EQ(Sample(queued, "sortd_inflight_requests"), 1)
        << "the request never reached the queue";
    const absl::Status status = expired.get();
    EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  }
  // The server has seen it cancelled, and it is still queued: admitted, and
  // not yet answered (a dropped request is counted when its batch launches).
  ASSERT_TRUE(cancels.WaitFor(1)) << "the server never saw the expired request cancelled";
  const std::string cancelled =
      R"(sortd_requests_total{code="CANCELLED",key_type="int32",method="Sort"})";
  std::string page = Scrape(*server);
  EXPECT_EQ(Sample(page, "sortd_inflight_requests"), 1) << page;
  EXPECT_EQ(Sample(page, cancelled), -1) << page;

  client::ClientOptions copts;
  copts.timeout = absl::Seconds(20);
  auto client = Connect(*server, copts);
  std::vector<int32_t> keys = {9, -4, 7, 0};
  auto result = client->Sort(absl::MakeConstSpan(keys));  // fills the batch
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->keys, (std::vector<int32_t>{-4, 0, 7, 9}));

  // One launch, with one live request; the expired one counted CANCELLED
  // and never sorted: only the batch-mate's 4 keys were.
  page = ScrapeUntil(*server, [&](const std::string& t) {
    return Sample(t, cancelled) >= 1 && Sample(t, "sortd_inflight_requests") == 0;
  });
  EXPECT_EQ(Sample(page, cancelled), 1) << page;
  EXPECT_EQ(Sample(page, R"(sortd_requests_total{code="OK",key_type="int32",method="Sort"})"), 1);
  EXPECT_EQ(Sample(page, "sortd_batch_size_count{engine=\"cpu\"}"), 1) << page;
  EXPECT_EQ(Sample(page, "sortd_batch_size_sum{engine=\"cpu\"}"), 1) << page;
  EXPECT_EQ(Sample(page, R"(sortd_keys_sorted_total{engine="cpu"})"), 4) << page;
  // The server keeps serving (a full batch again: 7 keys).
  std::vector<int32_t> seven = {6, 5, 4, 3, 2, 1, 0};
  auto again = client->Sort(absl::MakeConstSpan(seven));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->keys, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6}));
}

TEST(BatchingTest, QueueOverflowIsResourceExhaustedPerRequest) {
  auto server = StartServer(BatchingOptions(absl::Seconds(3), /*queue=*/4));
  ASSERT_NE(server, nullptr);
  auto client = Connect(*server);
  grpc::ClientContext ctx;
  auto stream = client->stub().SortStream(&ctx);
  for (int i = 0; i < 12; ++i) {
    v1::SortRequest request;
    request.set_request_id(std::to_string(i));
    request.mutable_keys()->mutable_uint64()->add_values(12 - i);
    request.mutable_keys()->mutable_uint64()->add_values(i);
    ASSERT_TRUE(stream->Write(request));
  }
  stream->WritesDone();
  int sorted = 0, exhausted = 0;
  v1::SortResponse response;
  while (stream->Read(&response)) {
    if (response.has_error()) {
      EXPECT_EQ(response.error().code(), static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED));
      EXPECT_NE(response.error().message().find("batch queue full"), std::string::npos)
          << response.error().message();
      ++exhausted;
    } else {
      // Request i held {12 - i, i}.
      const uint64_t i = std::stoul(response.request_id());
      const auto& got = response.keys().uint64().values();
      EXPECT_EQ(std::vector<uint64_t>(got.begin(), got.end()),
                (std::vector<uint64_t>{std::min(i, 12 - i), std::max(i, 12 - i)}))
          << response.request_id();
      ++sorted;
    }
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(sorted + exhausted, 12);
  // All 12 arrive within the 3 s window: 4 wait, the others are refused.
  EXPECT_EQ(sorted, 4);
  EXPECT_EQ(exhausted, 8);
}

TEST(BatchingTest, ParseBatchingMode) {
  EXPECT_EQ(*ParseBatchingMode("auto"), BatchingMode::kAuto);
  EXPECT_EQ(*ParseBatchingMode("on"), BatchingMode::kOn);
  EXPECT_EQ(*ParseBatchingMode("off"), BatchingMode::kOff);
  EXPECT_FALSE(ParseBatchingMode("sometimes").ok());
}

}  // namespace
}  // namespace sortd::testing
