// The GPU engine behind the real service (in-process server): every
// numeric type and order through Sort (with and without indices) and
// SortPairs gives exactly the CPU engine's answer, on the radix core and
// (small argsorts) on the merge sort; byte strings on the GPU merge sort
// match the CPU engine; small arrays stay on the CPU; an array over the
// device pool is sorted in chunks and merged on the GPU, and one too large
// even for that falls back to the CPU and is counted;
// GPU timings reach the metrics; with batching, small requests from many
// clients are sorted together by the segmented kernel and still give the
// CPU engine's answer one by one. Skips without a GPU. These servers serve
// GPU 0 alone (GpuEngineOptions::devices) so that what they count holds on
// hosts with several; the TwoGpus tests, which skip with fewer, take every
// GPU: both share the work, and one that fails leaves the other serving.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/gpu_engine.h"
#include "core/gpu_info.h"
#include "core/host_memory.h"
#include "server/wire/chunked_upload.h"
#include "tests/service/test_server.h"

namespace sortd::testing {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (ListGpus().empty()) GTEST_SKIP() << "no GPU visible"

constexpr size_t kMinKeys = 5000;
// Pinned (not the flag's default, which follows measurements): argsorts
// below it take the merge sort.
constexpr size_t kMergeArgsortMaxKeys = size_t{1} << 17;

std::unique_ptr<SortdServer> StartEngine(EngineChoice engine, size_t pool_bytes = 0,
                                         BatchingMode batching = BatchingMode::kOff) {
  ServerOptions options;
  options.batching_mode = batching;
  options.listen_address = "127.0.0.1:0";
  options.metrics_listen = "";
  options.dispatcher.engine = engine;
  options.dispatcher.gpu.min_keys = kMinKeys;
  options.dispatcher.gpu.merge_argsort_max_keys = kMergeArgsortMaxKeys;
  options.dispatcher.gpu.max_pool_bytes = pool_bytes;
  options.dispatcher.gpu.staging_chunk_bytes = 1 << 16;  // many pipeline steps
  options.dispatcher.gpu.devices = {0};
  auto server = SortdServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

// A client that sends every array as one message (no sort sessions, which
// the client takes from 1 MiB): for tests of the unary path's dispatch.
std::unique_ptr<client::SortClient> ConnectUnary(const SortdServer& server) {
  client::ClientOptions options;
  options.session_min_bytes = 0;
  return Connect(server, options);
}

double Metric(SortdServer& server, const std::string& series) {
  return Sample(Scrape(server), series);
}

template <typename T>
std::vector<T> RandomKeys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  for (T& x : v) {
    const uint64_t bits = rng();
    if constexpr (std::is_floating_point_v<T>) {
      x = static_cast<T>(static_cast<int64_t>(bits) % 100000) * T(0.5);  // duplicates, +-0
    } else {
      x = static_cast<T>(bits % 1000003);  // duplicates: stability matters
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    v[0] = std::numeric_limits<T>::quiet_NaN();
    v[n / 2] = -std::numeric_limits<T>::infinity();
    v[n / 3] = -T(0);
  }
  return v;
}

template <typename T>
bool BitsEqual(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <typename T>
class GpuServiceTest : public ::testing::Test {};
using KeyTypes = ::testing::Types<uint32_t, int32_t, float, uint64_t, int64_t, double>;
TYPED_TEST_SUITE(GpuServiceTest, KeyTypes);

TYPED_TEST(GpuServiceTest, SameAnswerAsTheCpuEngine) {
  SKIP_WITHOUT_GPU();
  auto gpu = StartEngine(EngineChoice::kAuto);
  auto cpu = StartEngine(EngineChoice::kCpu);
  auto gpu_client = Connect(*gpu);
  auto cpu_client = Connect(*cpu);
  // Above --gpu_merge_argsort_max_keys: argsorts take the radix core too.
  const auto keys = RandomKeys<TypeParam>(600007, sizeof(TypeParam));
  std::vector<uint32_t> values(keys.size());
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<uint32_t>(i * 7);
  for (v1::SortOrder order : {v1::SORT_ORDER_ASCENDING, v1::SORT_ORDER_DESCENDING}) {
    for (bool indices : {false, true}) {
      auto g = gpu_client->Sort<TypeParam>(keys, order, indices);
      auto c = cpu_client->Sort<TypeParam>(keys, order, indices);
      ASSERT_TRUE(g.ok()) << g.status();
      ASSERT_TRUE(c.ok()) << c.status();
      EXPECT_EQ(g->engine, v1::ENGINE_GPU_RADIX);
      EXPECT_EQ(c->engine, v1::ENGINE_CPU);
      EXPECT_TRUE(BitsEqual(g->keys, c->keys)) << "order " << order;
      EXPECT_EQ(g->indices, c->indices) << "order " << order;
    }
    auto gp = gpu_client->SortPairs<TypeParam, uint32_t>(keys, values, order);
    auto cp = cpu_client->SortPairs<TypeParam, uint32_t>(keys, values, order);
    ASSERT_TRUE(gp.ok()) << gp.status();
    ASSERT_TRUE(cp.ok()) << cp.status();
    EXPECT_EQ(gp->engine, v1::ENGINE_GPU_RADIX);
    EXPECT_TRUE(BitsEqual(gp->keys, cp->keys));
    EXPECT_EQ(gp->values, cp->values);
  }
}

TYPED_TEST(GpuServiceTest, SmallArgsortsRunOnTheMergeSortWithTheCpuAnswer) {
  SKIP_WITHOUT_GPU();
  auto gpu = StartEngine(EngineChoice::kAuto);
  auto cpu = StartEngine(EngineChoice::kCpu);
  auto gpu_client = Connect(*gpu);
  auto cpu_client = Connect(*cpu);
  const auto keys = RandomKeys<TypeParam>(70001, sizeof(TypeParam) + 1);
  for (v1::SortOrder order : {v1::SORT_ORDER_ASCENDING, v1::SORT_ORDER_DESCENDING}) {
    auto g = gpu_client->Sort<TypeParam>(keys, order, /*indices=*/true);
    auto c = cpu_client->Sort<TypeParam>(keys, order, /*indices=*/true);
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(g->engine, v1::ENGINE_GPU_MERGE);
    EXPECT_TRUE(BitsEqual(g->keys, c->keys)) << "order " << order;
    EXPECT_EQ(g->indices, c->indices) << "order " << order;
  }
}

TYPED_TEST(GpuServiceTest, OverThePoolIsSortedInChunksAndMergedOnTheGpu) {
  SKIP_WITHOUT_GPU();
  auto gpu = StartEngine(EngineChoice::kAuto, /*pool_bytes=*/size_t{16} << 20);
  auto cpu = StartEngine(EngineChoice::kCpu);
  auto gpu_client = Connect(*gpu);
  auto cpu_client = Connect(*cpu);
  const auto keys = RandomKeys<TypeParam>((size_t{1} << 20) + 5, 40 + sizeof(TypeParam));
  auto g = gpu_client->Sort<TypeParam>(keys, v1::SORT_ORDER_DESCENDING, /*indices=*/true);
  auto c = cpu_client->Sort<TypeParam>(keys, v1::SORT_ORDER_DESCENDING, /*indices=*/true);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(g->engine, v1::ENGINE_GPU_RADIX);
  EXPECT_TRUE(BitsEqual(g->keys, c->keys));
  EXPECT_EQ(g->indices, c->indices);
  EXPECT_EQ(Metric(*gpu, "sortd_gpu_fallbacks_total{gpu=\"0\",reason=\"memory\"}"), 0);
}

std::vector<std::string> RandomStrings(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> v(n);
  for (std::string& s : v) {
    const size_t len = rng() % 24;
    for (size_t i = 0; i < len; ++i) s.push_back(static_cast<char>("ab\x00\x80\xff"[rng() % 5]));
  }
  return v;
}

TEST(GpuService, ByteStringsOnTheGpuMergeSortMatchTheCpuEngine) {
  SKIP_WITHOUT_GPU();
  auto gpu = StartEngine(EngineChoice::kAuto);
  auto cpu = StartEngine(EngineChoice::kCpu);
  auto gpu_client = Connect(*gpu);
  auto cpu_client = Connect(*cpu);
  const auto keys = RandomStrings(40000, 31);  // above --gpu_min_bytes_keys
  std::vector<uint32_t> values(keys.size());
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<uint32_t>(i * 3);
  for (v1::SortOrder order : {v1::SORT_ORDER_ASCENDING, v1::SORT_ORDER_DESCENDING}) {
    auto g = gpu_client->Sort<std::string>(keys, order, /*indices=*/true);
    auto c = cpu_client->Sort<std::string>(keys, order, /*indices=*/true);
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(g->engine, v1::ENGINE_GPU_MERGE);
    EXPECT_EQ(g->keys, c->keys);
    EXPECT_EQ(g->indices, c->indices);
    auto gp = gpu_client->SortPairs<std::string, uint32_t>(keys, values, order);
    auto cp = cpu_client->SortPairs<std::string, uint32_t>(keys, values, order);
    ASSERT_TRUE(gp.ok()) << gp.status();
    ASSERT_TRUE(cp.ok()) << cp.status();
    EXPECT_EQ(gp->engine, v1::ENGINE_GPU_MERGE);
    EXPECT_EQ(gp->values, cp->values);
  }
  // Fewer strings than the threshold stay on the CPU.
  auto small = gpu_client->Sort<std::string>(RandomStrings(100, 32));
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->engine, v1::ENGINE_CPU);
}

// Small requests from 8 concurrent clients, every type, both orders, with
// and without indices, and pairs: batched on the GPU (segmented kernel),
// bit for bit the CPU engine's answers.
TYPED_TEST(GpuServiceTest, BatchedSmallRequestsMatchTheCpuEngine) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  auto gpu = StartEngine(EngineChoice::kAuto, 0, BatchingMode::kAuto);
  auto cpu = StartEngine(EngineChoice::kCpu);
  const size_t longest = sizeof(T) == 4 ? 16384 : 8192;  // the kernel's shared-memory bins
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto gpu_client = Connect(*gpu);
      auto cpu_client = Connect(*cpu);
      std::mt19937_64 rng(t);
      for (int i = 0; i < 12; ++i) {
        const size_t n = i == 0 ? longest : i == 1 ? 0 : rng() % (i < 6 ? 300 : longest);
        const auto keys = RandomKeys<T>(std::max<size_t>(n, 1), rng()) ;
        const std::vector<T> input(keys.begin(), keys.begin() + n);
        const v1::SortOrder order = rng() % 2 ? v1::SORT_ORDER_DESCENDING : v1::SORT_ORDER_ASCENDING;
        if (i % 3 == 2) {
          std::vector<uint64_t> values(n);
          for (size_t k = 0; k < n; ++k) values[k] = k * 11;
          auto g = gpu_client->SortPairs<T, uint64_t>(input, values, order);
          auto c = cpu_client->SortPairs<T, uint64_t>(input, values, order);
          ASSERT_TRUE(g.ok()) << g.status();
          ASSERT_TRUE(c.ok()) << c.status();
          EXPECT_EQ(g->engine, v1::ENGINE_GPU_SEGMENTED);
          EXPECT_TRUE(BitsEqual(g->keys, c->keys)) << "pairs n=" << n;
          EXPECT_EQ(g->values, c->values) << "pairs n=" << n;
          continue;
        }
        const bool indices = i % 2;
        auto g = gpu_client->Sort<T>(input, order, indices);
        auto c = cpu_client->Sort<T>(input, order, indices);
        ASSERT_TRUE(g.ok()) << g.status();
        ASSERT_TRUE(c.ok()) << c.status();
        EXPECT_EQ(g->engine, v1::ENGINE_GPU_SEGMENTED);
        EXPECT_TRUE(BitsEqual(g->keys, c->keys)) << "n=" << n << " order " << order;
        EXPECT_EQ(g->indices, c->indices) << "n=" << n << " order " << order;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(Metric(*gpu, "sortd_batch_size_sum{engine=\"gpu_segmented\"}"), 8 * 12);
  EXPECT_GT(Metric(*gpu, "sortd_gpu_kernel_duration_seconds_count{gpu=\"0\"}"), 0);
  // Past the batch limit the radix engine takes over.
  auto client = Connect(*gpu);
  auto large = client->Sort<T>(RandomKeys<T>(kMinKeys * 20, 5));
  ASSERT_TRUE(large.ok());
  EXPECT_EQ(large->engine, v1::ENGINE_GPU_RADIX);
}

TEST(GpuService, SmallArraysStayOnTheCpuAndGpuTimingsReachMetrics) {
  SKIP_WITHOUT_GPU();
  auto server = StartEngine(EngineChoice::kAuto);
  auto client = Connect(*server);
  auto small = client->Sort<uint32_t>(RandomKeys<uint32_t>(kMinKeys - 1, 1));
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->engine, v1::ENGINE_CPU);
  auto large = client->Sort<uint32_t>(RandomKeys<uint32_t>(kMinKeys, 2));
  ASSERT_TRUE(large.ok());
  EXPECT_EQ(large->engine, v1::ENGINE_GPU_RADIX);
  EXPECT_EQ(Metric(*server, "sortd_gpu_kernel_duration_seconds_count{gpu=\"0\"}"), 1);
  EXPECT_EQ(Metric(*server, "sortd_transfer_duration_seconds_count{direction=\"h2d\",gpu=\"0\"}"), 1);
  EXPECT_GT(Metric(*server, "sortd_device_pool_bytes{gpu=\"0\"}"), 0);
}

// Unpinned thresholds follow the profile of the GPU's tuning: arrays from
// its min_keys on the GPU, argsorts above the radix single-launch size and
// below its merge limit on the merge sort, the rest on the radix core.
TEST(GpuService, UnpinnedThresholdsFollowTheGpusProfile) {
  SKIP_WITHOUT_GPU();
  const GpuDispatchProfile profile = GpuDispatchProfileOfDevice(/*device=*/0);
  for (EngineChoice engine : {EngineChoice::kAuto, EngineChoice::kGpu}) {
    ServerOptions options;
    options.batching_mode = BatchingMode::kOff;  // small requests to the engines, not the batcher
    options.listen_address = "127.0.0.1:0";
    options.metrics_listen = "";
    options.dispatcher.engine = engine;
    options.dispatcher.gpu.devices = {0};
    auto server = SortdServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    auto client = ConnectUnary(**server);
    auto engine_of = [&](size_t n, bool indices) {
      auto r = client->Sort<uint32_t>(RandomKeys<uint32_t>(n, n), v1::SORT_ORDER_ASCENDING, indices);
      EXPECT_TRUE(r.ok()) << r.status();
      return r.ok() ? r->engine : v1::ENGINE_UNSPECIFIED;
    };
    if (engine == EngineChoice::kAuto) {
      EXPECT_EQ(engine_of(profile.min_keys - 1, false), v1::ENGINE_CPU);
      EXPECT_EQ(engine_of(profile.min_keys, false), v1::ENGINE_GPU_RADIX);
    } else {
      EXPECT_EQ(engine_of(kGpuRadixSingleLaunchMaxKeys, true), v1::ENGINE_GPU_RADIX);
      EXPECT_EQ(engine_of(kGpuRadixSingleLaunchMaxKeys + 1, true), v1::ENGINE_GPU_MERGE);
    }
    EXPECT_EQ(engine_of(profile.merge_argsort_max_keys - 1, true), v1::ENGINE_GPU_MERGE);
    EXPECT_EQ(engine_of(profile.merge_argsort_max_keys, true), v1::ENGINE_GPU_RADIX);
  }
}

TEST(GpuService, EngineGpuSendsEverySizeToTheGpu) {
  SKIP_WITHOUT_GPU();
  auto server = StartEngine(EngineChoice::kGpu);
  auto client = Connect(*server);
  auto r = client->Sort<int32_t>(std::vector<int32_t>{3, -1, 2});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->engine, v1::ENGINE_GPU_RADIX);
  EXPECT_EQ(r->keys, (std::vector<int32_t>{-1, 2, 3}));
}

// SortChunked uploads that announce their length hold their keys in the
// server's pinned pool (the sessions' buffers), which the engine copies by
// DMA: the column is pinned, and the whole path still sorts right.
TEST(GpuService, AnnouncedChunkedKeysLieInPinnedMemoryAndSortOnTheGpu) {
  SKIP_WITHOUT_GPU();
  HostMemoryPool pool(/*pin=*/true, /*min_pinned_bytes=*/size_t{1} << 20,
                      /*keep_bytes=*/size_t{1} << 30);
  AdmissionControl admission(/*max_bytes=*/uint64_t{1} << 32, /*max_requests=*/8);
  ChunkedUpload upload(/*max_bytes=*/size_t{1} << 30, &admission, 0, &pool);
  v1::SortChunkedRequest header;
  header.mutable_header()->set_total_keys(1 << 20);
  ASSERT_TRUE(upload.Accept(header).ok());
  v1::SortChunkedRequest chunk;
  for (int i = 0; i < (1 << 20); ++i) chunk.mutable_chunk()->mutable_keys()->mutable_uint32()->add_values(i);
  ASSERT_TRUE(upload.Accept(chunk).ok());
  EXPECT_TRUE(upload.keys().pinned());
  EXPECT_GE(pool.pinned_in_use(), size_t{4} << 20);

  auto server = StartEngine(EngineChoice::kGpu);
  client::ClientOptions options;
  options.session_min_bytes = 0;  // past the message limit: SortChunked
  options.max_message_bytes = 8 << 20;  // 12 MiB of keys do not fit
  auto client = Connect(*server, options);
  const auto keys = RandomKeys<uint32_t>(size_t{3} << 20, 17);
  auto r = client->Sort<uint32_t>(keys, v1::SORT_ORDER_ASCENDING, true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->engine, v1::ENGINE_GPU_RADIX);
  std::vector<uint32_t> want = keys;
  std::stable_sort(want.begin(), want.end());
  EXPECT_EQ(r->keys, want);
  for (size_t i = 0; i < keys.size(); i += 997) ASSERT_EQ(r->keys[i], keys[r->indices[i]]);
  EXPECT_EQ(Metric(*server, R"(sortd_requests_total{code="OK",key_type="uint32",method="SortChunked"})"), 1);
  // The server's own upload held its keys in the pool (no sessions here):
  // the block comes back to it, idle, once the call is done.
  for (int i = 0; i < 2000 && server->host_memory().pinned_idle() < keys.size() * 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GE(server->host_memory().pinned_idle(), keys.size() * 4);
}

// The clients ask for coded keys by default from 1 MiB; on this host the
// server (--key_encoding=auto) grants it for 32-bit keys sorted on the GPU
// and declines 64-bit ones: what crossed the wire says which, and both
// sorts are right.
TEST(GpuService, DefaultClientGetsCoded32BitKeysFromTheGpuAndRaw64BitOnes) {
  SKIP_WITHOUT_GPU();
  auto server = StartEngine(EngineChoice::kGpu);
  auto client = Connect(*server);
  const std::string sent = R"(sortd_bytes_sent_total{method="SortSession"})";
  const std::string ok32 = R"(sortd_requests_total{code="OK",key_type="uint32",method="SortSession"})";
  const std::string ok64 = R"(sortd_requests_total{code="OK",key_type="uint64",method="SortSession"})";
  // A session is counted when it ends, which may follow the answer.
  auto counted = [&](const std::string& series) {
    return Sample(ScrapeUntil(*server, [&](const std::string& t) { return Sample(t, series) == 1; }),
                  sent);
  };
  const auto keys32 = RandomKeys<uint32_t>(size_t{1} << 22, 31);
  double before = std::max(0.0, Metric(*server, sent));  // -1: no session yet
  auto r32 = client->Sort<uint32_t>(keys32);
  ASSERT_TRUE(r32.ok()) << r32.status();
  std::vector<uint32_t> want32 = keys32;
  std::sort(want32.begin(), want32.end());
  EXPECT_EQ(r32->keys, want32);
  const double coded = counted(ok32) - before;
  EXPECT_GT(coded, 0);
  EXPECT_LT(coded, 0.7 * keys32.size() * 4);

  const auto keys64 = RandomKeys<uint64_t>(size_t{1} << 21, 32);
  before = Sample(Scrape(*server), sent);
  auto r64 = client->Sort<uint64_t>(keys64);
  ASSERT_TRUE(r64.ok()) << r64.status();
  std::vector<uint64_t> want64 = keys64;
  std::sort(want64.begin(), want64.end());
  EXPECT_EQ(r64->keys, want64);
  EXPECT_EQ(counted(ok64) - before, keys64.size() * 8.0);
}

TEST(GpuService, OverThePoolFallsBackToTheCpuAndIsCounted) {
  SKIP_WITHOUT_GPU();
  auto server = StartEngine(EngineChoice::kAuto, /*pool_bytes=*/size_t{1} << 20);
  auto client = Connect(*server);
  const auto keys = RandomKeys<uint64_t>(1 << 18, 9);  // 2 MiB of keys
  auto r = client->Sort<uint64_t>(keys, v1::SORT_ORDER_ASCENDING, true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->engine, v1::ENGINE_CPU);
  EXPECT_TRUE(std::is_sorted(r->keys.begin(), r->keys.end()));
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(r->keys[i], keys[r->indices[i]]);
  EXPECT_EQ(Metric(*server, "sortd_gpu_fallbacks_total{gpu=\"0\",reason=\"memory\"}"), 1);
  // The server keeps serving on the GPU what fits.
  auto small = client->Sort<uint32_t>(RandomKeys<uint32_t>(20000, 3));
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->engine, v1::ENGINE_GPU_RADIX);
}

// Sort sessions reach the GPU like any other large sort, copied to the
// device as their parts arrive (counted): keys, pairs (values sorted on the
// device) and indices, checked against the CPU engine's answer; and an
// array over the device pool still sorts (after the upload, on the CPU,
// counted once as a fallback).
TEST(GpuService, SortSessionsSortOnTheGpuAndOverThePool) {
  SKIP_WITHOUT_GPU();
  client::ClientOptions options;
  options.session_min_bytes = 1;
  options.connections = 4;
  auto gpu = StartEngine(EngineChoice::kAuto);
  auto cpu = StartEngine(EngineChoice::kCpu);
  auto gpu_client = Connect(*gpu, options);
  auto cpu_client = Connect(*cpu, options);
  const auto keys = RandomKeys<float>(1 << 22, 21);
  auto g = gpu_client->Sort<float>(keys, v1::SORT_ORDER_DESCENDING, /*indices=*/true);
  auto c = cpu_client->Sort<float>(keys, v1::SORT_ORDER_DESCENDING, /*indices=*/true);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(g->engine, v1::ENGINE_GPU_RADIX);
  // Bit for bit (the keys hold a NaN, which == never matches).
  ASSERT_EQ(g->keys.size(), c->keys.size());
  EXPECT_EQ(std::memcmp(g->keys.data(), c->keys.data(), g->keys.size() * sizeof(float)), 0);
  EXPECT_EQ(g->indices, c->indices);
  const auto pkeys = RandomKeys<uint64_t>(1 << 21, 22);
  const auto pvalues = RandomKeys<uint32_t>(1 << 21, 23);
  auto gp = gpu_client->SortPairs<uint64_t, uint32_t>(pkeys, pvalues);
  auto cp = cpu_client->SortPairs<uint64_t, uint32_t>(pkeys, pvalues);
  ASSERT_TRUE(gp.ok()) << gp.status();
  ASSERT_TRUE(cp.ok()) << cp.status();
  EXPECT_EQ(gp->engine, v1::ENGINE_GPU_RADIX);
  EXPECT_EQ(gp->keys, cp->keys);
  EXPECT_EQ(gp->values, cp->values);
  EXPECT_EQ(Metric(*gpu, "sortd_sort_sessions_sorted_arriving_total"), 2);
  EXPECT_EQ(Metric(*cpu, "sortd_sort_sessions_sorted_arriving_total"), 0);

  auto small_pool = StartEngine(EngineChoice::kAuto, /*pool_bytes=*/size_t{1} << 20);
  auto small_client = Connect(*small_pool, options);
  const auto big = RandomKeys<uint32_t>(1 << 20, 24);  // 4 MiB of keys, 1 MiB pool
  auto r = small_client->Sort<uint32_t>(big);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<uint32_t> expected = big;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(r->keys, expected);
  EXPECT_EQ(Metric(*small_pool, "sortd_gpu_fallbacks_total{gpu=\"0\",reason=\"memory\"}"), 1);
  EXPECT_EQ(Metric(*small_pool, "sortd_sort_sessions_sorted_arriving_total"), 0);
}

// One GPU has one arriving slot: a session started and left waiting for
// its parts holds it, so a second session sorts after its upload (still on
// the GPU, still right); ending the first lets the slot go, and the next
// session takes its parts as they arrive again.
TEST(GpuService, AWaitingSessionHoldsTheArrivingSlotUntilItEnds) {
  SKIP_WITHOUT_GPU();
  client::ClientOptions options;
  options.session_min_bytes = 1;
  options.connections = 2;
  auto server = StartEngine(EngineChoice::kAuto);
  auto client = Connect(*server, options);
  v1::StartSortSessionRequest start;
  start.set_key_type(v1::ELEMENT_TYPE_UINT32);
  start.set_total_keys(1 << 20);
  v1::StartSortSessionResponse started;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(client->stub().StartSortSession(&ctx, start, &started).ok());
  }
  const auto keys = RandomKeys<uint32_t>(1 << 20, 31);
  std::vector<uint32_t> expected = keys;
  std::sort(expected.begin(), expected.end());
  auto second = client->Sort<uint32_t>(keys);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->engine, v1::ENGINE_GPU_RADIX);
  EXPECT_EQ(second->keys, expected);
  EXPECT_EQ(Metric(*server, "sortd_sort_sessions_sorted_arriving_total"), 0);

  v1::EndSortSessionRequest end;
  end.set_session_id(started.session_id());
  v1::EndSortSessionResponse ended;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(client->stub().EndSortSession(&ctx, end, &ended).ok());
  }
  auto third = client->Sort<uint32_t>(keys);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(third->keys, expected);
  EXPECT_EQ(Metric(*server, "sortd_sort_sessions_sorted_arriving_total"), 1);
  EXPECT_EQ(Metric(*server, R"(sortd_requests_total{code="CANCELLED",key_type="uint32",method="SortSession"})"), 1);
}

// A server on a free port, without batching, that sorts from kMinKeys keys
// on the GPU: the fault tests' setup.
ServerOptions UnbatchedAutoOptions() {
  ServerOptions options;
  options.batching_mode = BatchingMode::kOff;
  options.listen_address = "127.0.0.1:0";
  options.metrics_listen = "";
  options.dispatcher.engine = EngineChoice::kAuto;
  options.dispatcher.gpu.min_keys = kMinKeys;
  options.dispatcher.gpu.devices = {0};
  return options;
}

// Sorts 40000 random u32 keys (from `seed`) through `client`, checks the
// answer and returns the engine that sorted it (unspecified on failure).
v1::Engine SortChecked(client::SortClient& client, uint64_t seed) {
  const auto keys = RandomKeys<uint32_t>(40000, seed);
  auto r = client.Sort<uint32_t>(keys);
  EXPECT_TRUE(r.ok()) << r.status();
  auto expected = keys;
  std::sort(expected.begin(), expected.end());
  if (r.ok()) EXPECT_EQ(r->keys, expected);
  return r.ok() ? r->engine : v1::ENGINE_UNSPECIFIED;
}

// A device error injected once at `step` of a radix sort
// (GpuEngineOptions::fault_hook; not sticky, as a launch failure is not).
std::unique_ptr<SortdServer> StartWithOneFault(const char* step, std::atomic<int>* injected) {
  ServerOptions options = UnbatchedAutoOptions();
  options.dispatcher.gpu.merge_argsort_max_keys = 0;  // argsorts on the radix core
  options.dispatcher.gpu.fault_hook = [step = std::string(step), injected](int, const char* at) {
    if (step != at || injected->fetch_add(1) > 0) return 0;
    return 701;  // cudaErrorLaunchOutOfResources
  };
  auto server = SortdServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

TEST(GpuService, AGpuErrorBeforeOutputFallsBackToTheCpuAndIsCounted) {
  SKIP_WITHOUT_GPU();
  std::atomic<int> injected{0};
  auto server = StartWithOneFault("sort", &injected);
  auto client = ConnectUnary(*server);
  const auto keys = RandomKeys<uint64_t>(1 << 18, 21);
  auto r = client->Sort<uint64_t>(keys, v1::SORT_ORDER_ASCENDING, true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(injected.load(), 1);
  EXPECT_EQ(r->engine, v1::ENGINE_CPU);
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(r->keys[i], keys[r->indices[i]]);
  EXPECT_TRUE(std::is_sorted(r->keys.begin(), r->keys.end()));
  EXPECT_EQ(Metric(*server, "sortd_gpu_fallbacks_total{gpu=\"0\",reason=\"error\"}"), 1);
  // The GPU recovered: the next request sorts there.
  auto next = client->Sort<uint32_t>(RandomKeys<uint32_t>(20000, 3));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->engine, v1::ENGINE_GPU_RADIX);
}

// Three CUDA errors in a row take the GPU out of rotation: the next request
// sorts on the CPU without trying it; after the cooldown (a clock the test
// moves) it gets the next job on probation, which succeeds and brings it
// back (issue #20; core/gpu_rotation.h).
TEST(GpuService, AGpuFailingThreeTimesLeavesTheRotationAndComesBackAfterTheCooldown) {
  SKIP_WITHOUT_GPU();
  std::atomic<int> injected{0};
  auto now = std::make_shared<std::atomic<int64_t>>(1000);  // seconds
  ServerOptions options = UnbatchedAutoOptions();
  options.dispatcher.gpu.rotation.failures_to_bench = 3;
  options.dispatcher.gpu.rotation.first_cooldown = absl::Seconds(10);
  options.dispatcher.gpu.clock = [now] { return absl::FromUnixSeconds(now->load()); };
  options.dispatcher.gpu.fault_hook = [&injected](int, const char* at) {
    if (std::string(at) != "sort" || injected.fetch_add(1) >= 3) return 0;
    return 701;  // cudaErrorLaunchOutOfResources: not sticky
  };
  auto started = SortdServer::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  auto& server = *started;
  auto client = Connect(*server);
  auto sort_once = [&](uint64_t seed) { return SortChecked(*client, seed); };
  EXPECT_EQ(Metric(*server, "sortd_gpu_in_rotation{gpu=\"0\"}"), 1);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(sort_once(40 + i), v1::ENGINE_CPU) << i;
  EXPECT_EQ(injected.load(), 3);
  EXPECT_EQ(Metric(*server, "sortd_gpu_fallbacks_total{gpu=\"0\",reason=\"error\"}"), 3);
  EXPECT_EQ(Metric(*server, "sortd_gpu_in_rotation{gpu=\"0\"}"), 0);
  // Out: the GPU is not even tried (no fault hook call, no fallback counted).
  now->fetch_add(9);
  EXPECT_EQ(sort_once(50), v1::ENGINE_CPU);
  EXPECT_EQ(injected.load(), 3);
  EXPECT_EQ(Metric(*server, "sortd_gpu_fallbacks_total{gpu=\"0\",reason=\"error\"}"), 3);
  // Cooldown over: the probe runs on the GPU, succeeds, and it is back.
  now->fetch_add(1);
  EXPECT_EQ(sort_once(51), v1::ENGINE_GPU_RADIX);
  EXPECT_EQ(Metric(*server, "sortd_gpu_in_rotation{gpu=\"0\"}"), 1);
  EXPECT_EQ(sort_once(52), v1::ENGINE_GPU_RADIX);
}

// Every visible GPU, no batching, radix from kMinKeys keys.
ServerOptions AllGpusOptions() {
  ServerOptions options = UnbatchedAutoOptions();
  options.dispatcher.gpu.devices.clear();
  return options;
}

#define SKIP_WITHOUT_TWO_GPUS() \
  if (ListGpus().size() < 2) GTEST_SKIP() << "fewer than two GPUs visible"

// Sorts from 8 client threads at once (their own arrays, each answer
// compared with its own request's sort) spread over both GPUs: each ran
// kernels and holds pool memory.
TEST(GpuServiceTwoGpus, ConcurrentSortsUseBothGpus) {
  SKIP_WITHOUT_TWO_GPUS();
  auto started = SortdServer::Start(AllGpusOptions());
  ASSERT_TRUE(started.ok()) << started.status();
  auto& server = *started;
  constexpr int kThreads = 8, kSortsEach = 4;
  std::atomic<int> wrong{0}, off_gpu{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto client = Connect(*server);
      for (int i = 0; i < kSortsEach; ++i) {
        const auto keys = RandomKeys<uint32_t>((1 << 20) + 17 * t + i, 100 * t + i);
        auto r = client->Sort<uint32_t>(keys);
        auto expected = keys;
        std::sort(expected.begin(), expected.end());
        if (!r.ok() || r->keys != expected) ++wrong;
        if (r.ok() && r->engine != v1::ENGINE_GPU_RADIX) ++off_gpu;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(off_gpu.load(), 0);
  const double gpu0 = Metric(*server, "sortd_gpu_kernel_duration_seconds_count{gpu=\"0\"}");
  const double gpu1 = Metric(*server, "sortd_gpu_kernel_duration_seconds_count{gpu=\"1\"}");
  EXPECT_EQ(gpu0 + gpu1, kThreads * kSortsEach);
  EXPECT_GT(gpu0, 0);
  EXPECT_GT(gpu1, 0);
  EXPECT_GT(Metric(*server, "sortd_device_pool_bytes{gpu=\"0\"}"), 0);
  EXPECT_GT(Metric(*server, "sortd_device_pool_bytes{gpu=\"1\"}"), 0);
}

// GPU 1 fails every sort (an injected, non-sticky launch error): its jobs
// fall back to the CPU (answers still right) until it leaves the rotation;
// then every sort runs on GPU 0. The rotation's clock stands still, so GPU
// 1 is not probed again during the test.
TEST(GpuServiceTwoGpus, AFailingGpuLeavesTheOtherServing) {
  SKIP_WITHOUT_TWO_GPUS();
  ServerOptions options = AllGpusOptions();
  options.dispatcher.gpu.rotation.failures_to_bench = 3;
  options.dispatcher.gpu.clock = [] { return absl::FromUnixSeconds(1000); };
  std::atomic<int> injected{0};
  options.dispatcher.gpu.fault_hook = [&injected](int device, const char* at) {
    if (device != 1 || std::string(at) != "sort") return 0;
    ++injected;
    return 701;  // cudaErrorLaunchOutOfResources: not sticky
  };
  auto started = SortdServer::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  auto& server = *started;
  auto client = Connect(*server);
  auto sort_once = [&](uint64_t seed) { return SortChecked(*client, seed); };
  // Until GPU 1 is out (placement sends it every other job when both idle).
  int sorts = 0;
  while (Metric(*server, "sortd_gpu_in_rotation{gpu=\"1\"}") == 1 && sorts < 20) sort_once(200 + sorts++);
  EXPECT_EQ(Metric(*server, "sortd_gpu_in_rotation{gpu=\"1\"}"), 0) << "after " << sorts << " sorts";
  EXPECT_EQ(injected.load(), 3);
  EXPECT_EQ(Metric(*server, "sortd_gpu_fallbacks_total{gpu=\"1\",reason=\"error\"}"), 3);
  EXPECT_EQ(Metric(*server, "sortd_gpu_in_rotation{gpu=\"0\"}"), 1);
  const double gpu0_before = Metric(*server, "sortd_gpu_kernel_duration_seconds_count{gpu=\"0\"}");
  for (int i = 0; i < 6; ++i) EXPECT_EQ(sort_once(300 + i), v1::ENGINE_GPU_RADIX) << i;
  EXPECT_EQ(Metric(*server, "sortd_gpu_kernel_duration_seconds_count{gpu=\"0\"}"), gpu0_before + 6);
  EXPECT_EQ(injected.load(), 3);  // GPU 1 not tried while out
}

TEST(GpuService, AGpuErrorAfterOutputStartedFailsTheRequestAndTheServerServes) {
  SKIP_WITHOUT_GPU();
  std::atomic<int> injected{0};
  auto server = StartWithOneFault("download", &injected);
  auto client = ConnectUnary(*server);
  auto r = client->Sort<uint64_t>(RandomKeys<uint64_t>(1 << 18, 22));
  EXPECT_EQ(injected.load(), 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal) << r.status();
  EXPECT_NE(r.status().message().find("GPU 0"), std::string::npos) << r.status();
  EXPECT_EQ(Metric(*server, R"(sortd_requests_total{code="INTERNAL",key_type="uint64",method="Sort"})"), 1);
  auto next = client->Sort<uint32_t>(RandomKeys<uint32_t>(20000, 3));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->engine, v1::ENGINE_GPU_RADIX);
  EXPECT_TRUE(std::is_sorted(next->keys.begin(), next->keys.end()));
}

}  // namespace
}  // namespace sortd::testing

namespace sortd::testing {
namespace {

// A system region on a server with a GPU: the server pins it, and keys and
// pairs in it are sorted on the GPU (by DMA to and from the region) with
// the CPU engine's answer. Pairs that do not fit the pool fall back to the
// CPU, also with the same answer.
TEST(GpuRegionTest, PinnedSystemRegionsSortOnTheGpuLikeTheCpu) {
  SKIP_WITHOUT_GPU();
  for (size_t pool : {size_t{0}, size_t{8} << 20}) {
    ServerOptions options;
    options.listen_address = "127.0.0.1:0";
    options.metrics_listen = "";
    options.dispatcher.engine = EngineChoice::kGpu;
    options.dispatcher.gpu.min_keys = kMinKeys;
    options.dispatcher.gpu.max_pool_bytes = pool;
    options.regions.allow_system = true;
    auto started = SortdServer::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    auto server = std::move(*started);
    auto c = Connect(*server);
    const size_t n = size_t{1} << 20;
    auto region = client::SharedRegion::Create(*c, "gpu", n * 16);
    ASSERT_TRUE(region.ok()) << region.status();
    EXPECT_TRUE((*region)->pinned());
    const auto keys_in = RandomKeys<uint64_t>(n, 21);
    const auto values_in = RandomKeys<uint64_t>(n, 22);
    auto k = (*region)->span<uint64_t>(n);
    auto v = (*region)->span<uint64_t>(n, n * 8);
    std::copy(keys_in.begin(), keys_in.end(), k.begin());
    std::copy(values_in.begin(), values_in.end(), v.begin());
    auto engine = c->SortPairsInRegion(**region, k, v, v1::SORT_ORDER_DESCENDING);
    ASSERT_TRUE(engine.ok()) << engine.status();
    EXPECT_EQ(*engine, pool == 0 ? v1::ENGINE_GPU_RADIX : v1::ENGINE_CPU) << "pool " << pool;
    // The CPU engine's answer for the same pairs.
    auto cpu = Connect(*server)->SortPairs<uint64_t, uint64_t>(keys_in, values_in,
                                                              v1::SORT_ORDER_DESCENDING);
    ASSERT_TRUE(cpu.ok());
    EXPECT_TRUE(std::equal(k.begin(), k.end(), cpu->keys.begin()));
    EXPECT_TRUE(std::equal(v.begin(), v.end(), cpu->values.begin()));
    // Keys alone, in place.
    std::copy(keys_in.begin(), keys_in.end(), k.begin());
    engine = c->SortInRegion(**region, k);
    ASSERT_TRUE(engine.ok()) << engine.status();
    std::vector<uint64_t> want = keys_in;
    std::sort(want.begin(), want.end());
    EXPECT_TRUE(std::equal(k.begin(), k.end(), want.begin()));
  }
}

}  // namespace
}  // namespace sortd::testing
