// GPU worker (host memory -> GPU -> host memory): every key type and order,
// keys and argsort, sizes across staging-chunk boundaries, concurrent jobs
// on fewer slots than threads, pool reuse, and the out-of-pool outcome that
// leaves the host arrays untouched. Skips without a GPU.
#include "core/cuda/gpu_worker.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tests/gpu/radix_reference.h"

namespace sortd::cuda {
namespace {

using namespace sortd::cuda::testing;  // NOLINT: test helpers

std::unique_ptr<GpuWorker> MakeWorker(size_t chunk = 1 << 16, size_t max_pool = 0, int slots = 2) {
  GpuWorkerOptions o;
  o.slots = slots;
  o.staging_chunk_bytes = chunk;  // small: many chunks per job
  o.max_pool_bytes = max_pool;
  std::string error;
  auto w = GpuWorker::Create(o, &error);
  EXPECT_NE(w, nullptr) << error;
  return w;
}

template <typename T>
void CheckJob(GpuWorker& worker, const std::vector<T>& input, bool descending, bool indices,
              const std::string& what, bool prefer_merge = false) {
  std::vector<T> keys = input;
  std::vector<uint64_t> perm(indices ? input.size() : 0, ~uint64_t{0});
  GpuSortJob job;
  job.key_type = TypeOf<T>();
  job.descending = descending;
  job.num_items = keys.size();
  job.keys = keys.data();
  job.indices = indices ? perm.data() : nullptr;
  job.prefer_merge = prefer_merge;
  const GpuSortReport report = worker.Sort(job);
  ASSERT_EQ(report.outcome, GpuSortOutcome::kOk) << what << ": " << report.message;
  const std::vector<uint64_t> ref = ReferenceOrder(input, descending);
  for (size_t i = 0; i < input.size(); ++i) {
    ASSERT_EQ(std::memcmp(&keys[i], &input[ref[i]], sizeof(T)), 0) << what << " key at " << i;
    if (indices) ASSERT_EQ(perm[i], ref[i]) << what << " index at " << i;
  }
}

// A batch of arrays of the given lengths through SortBatch; every other
// array asks for its permutation; each array is checked on its own.
template <typename T>
void CheckBatch(GpuWorker& worker, const std::vector<size_t>& lengths, bool descending,
                uint64_t seed) {
  std::vector<std::vector<T>> inputs, outputs;
  std::vector<std::vector<uint64_t>> perms(lengths.size());
  for (size_t i = 0; i < lengths.size(); ++i) {
    inputs.push_back(std::is_floating_point_v<T> ? FloatSpecials<T>(lengths[i], seed + i)
                                                 : Random<T>(lengths[i], seed + i, 10));
    outputs.emplace_back(lengths[i]);
    if (i % 2 == 0) perms[i].assign(lengths[i], ~uint64_t{0});
  }
  std::vector<GpuBatchSegment> segments(lengths.size());
  for (size_t i = 0; i < lengths.size(); ++i) {
    segments[i].keys_in = inputs[i].data();
    segments[i].keys_out = outputs[i].data();
    segments[i].indices = i % 2 == 0 ? perms[i].data() : nullptr;
    segments[i].num_items = lengths[i];
  }
  GpuBatchJob job;
  job.key_type = TypeOf<T>();
  job.descending = descending;
  job.segments = segments.data();
  job.num_segments = segments.size();
  const GpuSortReport report = worker.SortBatch(job);
  ASSERT_EQ(report.outcome, GpuSortOutcome::kOk) << report.message;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const std::vector<uint64_t> ref = ReferenceOrder(inputs[i], descending);
    for (size_t k = 0; k < lengths[i]; ++k) {
      ASSERT_EQ(std::memcmp(&outputs[i][k], &inputs[i][ref[k]], sizeof(T)), 0)
          << "array " << i << " key at " << k;
      if (i % 2 == 0) ASSERT_EQ(perms[i][k], ref[k]) << "array " << i << " index at " << k;
    }
  }
}

template <typename T>
class GpuWorkerTest : public ::testing::Test {};
using KeyTypes = ::testing::Types<uint32_t, int32_t, float, uint64_t, int64_t, double>;
TYPED_TEST_SUITE(GpuWorkerTest, KeyTypes);

TYPED_TEST(GpuWorkerTest, BatchOfArraysAcrossChunkBoundariesEveryOrder) {
  SKIP_WITHOUT_GPU();
  auto worker = MakeWorker();  // 64 KiB staging chunks: the batch spans many
  std::vector<size_t> lengths = {0, 1, 1000, 33, 0, 20000, 5, 4096, 70000, 2};
  for (int i = 0; i < 300; ++i) lengths.push_back((i * 37) % 300);
  for (bool desc : {false, true}) CheckBatch<TypeParam>(*worker, lengths, desc, desc ? 7 : 3);
}

// Keys and indices in pinned host memory (sort sessions' buffers) move by
// DMA without staging; 8-byte positions go straight to the pinned indices.
TYPED_TEST(GpuWorkerTest, PinnedHostArraysSortByDirectDma) {
  SKIP_WITHOUT_GPU();
  auto worker = MakeWorker();
  for (bool desc : {false, true}) {
    const size_t n = 300001;
    const std::vector<TypeParam> input = std::is_floating_point_v<TypeParam>
                                             ? FloatSpecials<TypeParam>(n, 41)
                                             : Random<TypeParam>(n, 41, 1000);
    TypeParam* keys = nullptr;
    uint64_t* perm = nullptr;
    ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&keys), n * sizeof(TypeParam),
                            cudaHostAllocPortable),
              cudaSuccess);
    ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&perm), n * 8, cudaHostAllocPortable),
              cudaSuccess);
    std::memcpy(keys, input.data(), n * sizeof(TypeParam));
    GpuSortJob job;
    job.key_type = TypeOf<TypeParam>();
    job.descending = desc;
    job.num_items = n;
    job.keys = keys;
    job.indices = perm;
    const GpuSortReport report = worker->Sort(job);
    ASSERT_EQ(report.outcome, GpuSortOutcome::kOk) << report.message;
    const std::vector<uint64_t> ref = ReferenceOrder(input, desc);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::memcmp(&keys[i], &input[ref[i]], sizeof(TypeParam)), 0) << "key at " << i;
      ASSERT_EQ(perm[i], ref[i]) << "index at " << i;
    }
    cudaFreeHost(keys);
    cudaFreeHost(perm);
  }
}

TEST(GpuWorker, BatchOfManyTinyArraysAndEmptyBatch) {
  SKIP_WITHOUT_GPU();
  auto worker = MakeWorker(size_t{1} << 20);
  std::vector<size_t> lengths(20000);
  for (size_t i = 0; i < lengths.size(); ++i) lengths[i] = i % 70;
  CheckBatch<uint32_t>(*worker, lengths, false, 1);
  CheckBatch<double>(*worker, {}, true, 1);
  CheckBatch<int64_t>(*worker, {0, 0}, true, 1);
}

TEST(GpuWorker, BatchLargerThanThePoolIsRefusedUntouched) {
  SKIP_WITHOUT_GPU();
  auto worker = MakeWorker(1 << 16, size_t{8} << 20);
  std::vector<uint64_t> keys(size_t{2} << 20, 5), out(keys.size(), 9);
  GpuBatchSegment segment{keys.data(), out.data(), nullptr, keys.size()};
  GpuBatchJob job;
  job.key_type = RadixKeyType::kUint64;
  job.segments = &segment;
  job.num_segments = 1;
  const GpuSortReport report = worker->SortBatch(job);
  EXPECT_EQ(report.outcome, GpuSortOutcome::kNoMemory);
  EXPECT_EQ(out[0], 9u);
}

TYPED_TEST(GpuWorkerTest, EveryOrderKeysAndIndicesAcrossChunkBoundaries) {
  SKIP_WITHOUT_GPU();
  auto worker = MakeWorker();
  const size_t per_chunk = (1 << 16) / sizeof(TypeParam);
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, per_chunk - 1, per_chunk, 2 * per_chunk + 3,
                   5 * per_chunk + 1, (size_t{1} << 20) + 7}) {
    const auto keys = std::is_floating_point_v<TypeParam> ? FloatSpecials<TypeParam>(n, n)
                                                          : Random<TypeParam>(n, n);
    for (bool desc : {false, true}) {
      for (bool idx : {false, true}) {
        CheckJob(*worker, keys, desc, idx, "n=" + std::to_string(n));
      }
    }
  }
}

TEST(GpuWorker, ConcurrentJobsShareTwoSlotsAndReuseThePool) {
  SKIP_WITHOUT_GPU();
  auto worker = MakeWorker(size_t{1} << 20);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 4; ++r) {
        CheckJob(*worker, Random<uint32_t>(200000 + t * 1000 + r, t * 100 + r), t % 2 == 1, r % 2 == 0,
                 "thread " + std::to_string(t));
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(worker->in_flight(), 0);
  const size_t pool = worker->pool_bytes();
  EXPECT_GT(pool, 0u);
  // Same-size work again: buffers are reused, the pool does not grow.
  CheckJob(*worker, Random<uint32_t>(200000, 5), false, true, "again");
  EXPECT_EQ(worker->pool_bytes(), pool);
  EXPECT_TRUE(worker->healthy());
}

TEST(GpuWorker, JobLargerThanThePoolLeavesHostArraysUntouched) {
  SKIP_WITHOUT_GPU();
  auto worker = MakeWorker(1 << 16, /*max_pool=*/size_t{4} << 20);
  const auto input = Random<uint64_t>(1 << 20, 3);  // 8 MiB of keys: over the cap
  std::vector<uint64_t> keys = input;
  std::vector<uint64_t> perm(input.size(), 7);
  GpuSortJob job;
  job.key_type = RadixKeyType::kUint64;
  job.num_items = keys.size();
  job.keys = keys.data();
  job.indices = perm.data();
  const GpuSortReport report = worker->Sort(job);
  EXPECT_EQ(report.outcome, GpuSortOutcome::kNoMemory);
  EXPECT_NE(report.message.find("device memory"), std::string::npos) << report.message;
  EXPECT_EQ(keys, input);
  EXPECT_EQ(perm, std::vector<uint64_t>(input.size(), 7));
  EXPECT_TRUE(worker->healthy());
  // Small jobs still run within the cap.
  CheckJob(*worker, Random<uint32_t>(100000, 4), false, true, "small after refusal");
  EXPECT_LE(worker->pool_bytes(), size_t{4} << 20);
}

// A device error injected once at `step` (GpuWorkerOptions::fault_hook):
// the job reports `expected`, the worker stays healthy (the error is not
// sticky), and the next job sorts.
void ExpectInjectedErrorIsSurvived(const char* step, GpuSortOutcome expected) {
  GpuWorkerOptions o;
  o.staging_chunk_bytes = 1 << 16;
  std::atomic<int> injected{0};
  o.fault_hook = [&](const char* at) {
    if (std::string(at) != step || injected.fetch_add(1) > 0) return 0;
    return static_cast<int>(cudaErrorLaunchOutOfResources);
  };
  std::string error;
  auto worker = GpuWorker::Create(o, &error);
  ASSERT_NE(worker, nullptr) << error;
  const auto input = Random<uint32_t>(1 << 20, 11);
  std::vector<uint32_t> keys = input;
  std::vector<uint64_t> perm(input.size(), 7);
  GpuSortJob job;
  job.key_type = RadixKeyType::kUint32;
  job.num_items = keys.size();
  job.keys = keys.data();
  job.indices = perm.data();
  const GpuSortReport report = worker->Sort(job);
  EXPECT_EQ(injected.load(), 1) << "the fault was never asked for at " << step;
  EXPECT_EQ(report.outcome, expected) << report.message;
  EXPECT_NE(report.message.find("too many resources"), std::string::npos) << report.message;
  EXPECT_FALSE(report.device_lost);
  if (expected == GpuSortOutcome::kFailedIntact) {
    EXPECT_EQ(keys, input) << "an error before any output changed the caller's keys";
    EXPECT_EQ(perm, std::vector<uint64_t>(input.size(), 7));
  }
  EXPECT_TRUE(worker->healthy());
  CheckJob(*worker, input, true, true, std::string("after the error at ") + step);
}

TEST(GpuWorker, AnErrorBeforeOutputLeavesHostArraysIntactAndTheWorkerServes) {
  SKIP_WITHOUT_GPU();
  ExpectInjectedErrorIsSurvived("sort", GpuSortOutcome::kFailedIntact);
}

TEST(GpuWorker, AnErrorAfterOutputStartedIsReportedDirtyAndTheWorkerServes) {
  SKIP_WITHOUT_GPU();
  ExpectInjectedErrorIsSurvived("download", GpuSortOutcome::kFailedDirty);
}

TEST(GpuWorker, JobsThatFitThePoolWaitForMemoryInsteadOfLeaving) {
  SKIP_WITHOUT_GPU();
  // One 1 Mi-key argsort (~25 MiB of buffers) fits in 40 MiB, two do not:
  // concurrent jobs must take turns on the GPU, none may be refused.
  auto worker = MakeWorker(size_t{1} << 20, /*max_pool=*/size_t{40} << 20, /*slots=*/2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 3; ++r) CheckJob(*worker, Random<uint32_t>(1 << 20, t * 10 + r), false, true, "turns");
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(worker->pool_bytes(), size_t{40} << 20);
  EXPECT_TRUE(worker->healthy());
}

TYPED_TEST(GpuWorkerTest, ArgsortOnTheMergeSortEveryOrder) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  auto worker = MakeWorker();
  for (bool descending : {false, true}) {
    CheckJob(*worker, Random<T>(70001, 6, /*range_bits=*/9), descending, true, "merge argsort",
             /*prefer_merge=*/true);
  }
  CheckJob(*worker, Random<T>(3000, 7), false, false, "keys only stay on radix", true);
}

TYPED_TEST(GpuWorkerTest, LargerThanThePoolIsSortedInChunksAndMergedOnTheGpu) {
  SKIP_WITHOUT_GPU();
  using T = TypeParam;
  // 16 MiB pool: 1 Mi keys with indices need far more in one piece, so
  // the worker sorts 64 Ki-key chunks and merges 16 runs block by block.
  auto worker = MakeWorker(size_t{1} << 20, /*max_pool=*/size_t{16} << 20);
  const auto narrow = Random<T>((size_t{1} << 20) + 3, 8, /*range_bits=*/6);  // ties across runs
  CheckJob(*worker, narrow, false, true, "chunked, indices");
  CheckJob(*worker, narrow, true, true, "chunked, descending, indices");
  CheckJob(*worker, Random<T>((size_t{3} << 19) + 11, 9), false, false, "chunked, keys only");
  EXPECT_LE(worker->pool_bytes(), size_t{16} << 20);
  EXPECT_TRUE(worker->healthy());
}

TEST(GpuWorker, ChunkedFloatSpecialsKeepNaNPayloads) {
  SKIP_WITHOUT_GPU();
  auto worker = MakeWorker(size_t{1} << 20, /*max_pool=*/size_t{16} << 20);
  CheckJob(*worker, FloatSpecials<double>(size_t{1} << 20, 12), true, true, "double specials");
  CheckJob(*worker, FloatSpecials<float>(size_t{3} << 20, 13), false, false, "float specials");
}

std::vector<std::string> RandomStrings(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> v(n);
  for (std::string& s : v) {
    const size_t len = rng() % 40;
    for (size_t i = 0; i < len; ++i) s.push_back(static_cast<char>("ab\x00\xff"[rng() % 4]));
  }
  return v;
}

void CheckBytes(GpuWorker& worker, const std::vector<std::string>& strings, bool descending) {
  std::vector<std::string_view> views(strings.begin(), strings.end());
  std::vector<uint64_t> perm(strings.size(), ~uint64_t{0});
  GpuBytesJob job;
  job.descending = descending;
  job.num_items = views.size();
  job.keys = views.data();
  job.indices = perm.data();
  const GpuSortReport report = worker.ArgsortBytes(job);
  ASSERT_EQ(report.outcome, GpuSortOutcome::kOk) << report.message;
  std::vector<uint64_t> expected(strings.size());
  std::iota(expected.begin(), expected.end(), 0);
  std::stable_sort(expected.begin(), expected.end(), [&](uint64_t a, uint64_t b) {
    return descending ? strings[b] < strings[a] : strings[a] < strings[b];
  });
  EXPECT_EQ(perm, expected);
}

TEST(GpuWorker, ByteStringsAcrossStagingChunks) {
  SKIP_WITHOUT_GPU();
  auto worker = MakeWorker(1 << 16);  // 64 KiB chunks: strings straddle them
  const auto strings = RandomStrings(100003, 14);
  CheckBytes(*worker, strings, false);
  CheckBytes(*worker, strings, true);
  CheckBytes(*worker, {}, false);
  CheckBytes(*worker, {"", ""}, false);
}

TEST(GpuWorker, ByteStringsOverThePoolAreRefusedUntouched) {
  SKIP_WITHOUT_GPU();
  auto worker = MakeWorker(1 << 16, /*max_pool=*/size_t{1} << 20);
  const auto strings = RandomStrings(200000, 15);  // ~4 MiB of bytes
  std::vector<std::string_view> views(strings.begin(), strings.end());
  std::vector<uint64_t> perm(strings.size(), 5);
  GpuBytesJob job;
  job.num_items = views.size();
  job.keys = views.data();
  job.indices = perm.data();
  EXPECT_EQ(worker->ArgsortBytes(job).outcome, GpuSortOutcome::kNoMemory);
  EXPECT_EQ(perm, std::vector<uint64_t>(strings.size(), 5));
}

}  // namespace
}  // namespace sortd::cuda

namespace sortd::cuda {
namespace {

using namespace sortd::cuda::testing;  // NOLINT: test helpers

// Values as the radix payload (GpuSortJob::values): keys and values come
// back permuted together, stably, from pageable and from pinned memory.
template <typename K, typename V>
void CheckPairsJob(GpuWorker& worker, size_t n, bool descending, bool pinned, uint64_t seed,
                   bool presorted = false) {
  std::vector<K> input = Random<K>(n, seed, 6);  // 64 distinct keys: stability shows
  if (presorted) std::stable_sort(input.begin(), input.end(), Less<K>);
  const std::vector<V> values_in = Random<V>(n, seed + 1);
  K* keys = nullptr;
  V* values = nullptr;
  std::vector<K> keys_heap;
  std::vector<V> values_heap;
  if (pinned) {
    ASSERT_EQ(cudaMallocHost(&keys, n * sizeof(K)), cudaSuccess);
    ASSERT_EQ(cudaMallocHost(&values, n * sizeof(V)), cudaSuccess);
  } else {
    keys_heap.resize(n);
    values_heap.resize(n);
    keys = keys_heap.data();
    values = values_heap.data();
  }
  std::copy(input.begin(), input.end(), keys);
  std::copy(values_in.begin(), values_in.end(), values);
  GpuSortJob job;
  job.key_type = TypeOf<K>();
  job.descending = descending;
  job.num_items = n;
  job.keys = keys;
  job.values = values;
  job.value_bytes = sizeof(V);
  const GpuSortReport report = worker.Sort(job);
  ASSERT_EQ(report.outcome, GpuSortOutcome::kOk) << report.message;
  const std::vector<uint64_t> ref = ReferenceOrder(input, descending);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(std::memcmp(&keys[i], &input[ref[i]], sizeof(K)), 0) << "key at " << i;
    ASSERT_EQ(values[i], values_in[ref[i]]) << "value at " << i;
  }
  if (pinned) {
    cudaFreeHost(keys);
    cudaFreeHost(values);
  }
}

TEST(GpuWorkerPairs, ValuesOfFourAndEightBytesMoveWithTheirKeys) {
  SKIP_WITHOUT_GPU();
  auto worker = MakeWorker();
  for (bool pinned : {false, true}) {
    for (bool descending : {false, true}) {
      CheckPairsJob<uint32_t, uint32_t>(*worker, 300001, descending, pinned, 1);
      CheckPairsJob<int64_t, uint64_t>(*worker, 200003, descending, pinned, 2);
      CheckPairsJob<float, uint64_t>(*worker, 100000, descending, pinned, 3);
      CheckPairsJob<uint64_t, uint32_t>(*worker, 70000, descending, pinned, 4);
    }
  }
}

// Input already in order is left where it was uploaded and downloaded
// from there (keys, values, 4-byte positions widened, 8-byte positions to
// pinned memory); input in reverse order is reversed on the device.
TEST(GpuWorkerPairs, PresortedInputComesBackFromWhereItWasUploaded) {
  SKIP_WITHOUT_GPU();
  GpuWorkerOptions o;
  o.staging_chunk_bytes = 1 << 16;
  o.presorted_min_items = 0;  // every size the test uses
  std::string error;
  auto worker = GpuWorker::Create(o, &error);
  ASSERT_NE(worker, nullptr) << error;
  for (bool pinned : {false, true}) {
    for (bool descending : {false, true}) {
      CheckPairsJob<uint32_t, uint32_t>(*worker, 300001, descending, pinned, 5, true);
      CheckPairsJob<double, uint64_t>(*worker, 100000, descending, pinned, 6, true);
    }
  }
  auto sorted = Random<int64_t>(200003, 7);
  std::sort(sorted.begin(), sorted.end());
  for (bool descending : {false, true}) {
    for (bool indices : {false, true}) CheckJob(*worker, sorted, descending, indices, "presorted");
    // The report says the order was found (distinct keys: both directions).
    std::vector<int64_t> keys = sorted;
    GpuSortJob job;
    job.key_type = RadixKeyType::kInt64;
    job.descending = descending;
    job.num_items = keys.size();
    job.keys = keys.data();
    const GpuSortReport report = worker->Sort(job);
    ASSERT_EQ(report.outcome, GpuSortOutcome::kOk) << report.message;
    EXPECT_TRUE(report.presorted) << (descending ? "reversed" : "in order");
  }
  // Random input is not.
  std::vector<int64_t> random = Random<int64_t>(200003, 8);
  GpuSortJob job;
  job.key_type = RadixKeyType::kInt64;
  job.num_items = random.size();
  job.keys = random.data();
  const GpuSortReport report = worker->Sort(job);
  ASSERT_EQ(report.outcome, GpuSortOutcome::kOk) << report.message;
  EXPECT_FALSE(report.presorted);
}

TEST(GpuWorkerPairs, PairsOverThePoolAreRefusedUntouched) {
  SKIP_WITHOUT_GPU();
  auto worker = MakeWorker(1 << 16, /*max_pool=*/size_t{4} << 20);
  const auto input = Random<uint32_t>(1 << 20, 5);
  std::vector<uint32_t> keys = input;
  std::vector<uint32_t> values(input.size(), 9);
  GpuSortJob job;
  job.num_items = keys.size();
  job.keys = keys.data();
  job.values = values.data();
  job.value_bytes = 4;
  EXPECT_EQ(worker->Sort(job).outcome, GpuSortOutcome::kNoMemory);
  EXPECT_EQ(keys, input);
  EXPECT_EQ(values, std::vector<uint32_t>(input.size(), 9));
  job.value_bytes = 2;  // neither 4 nor 8
  EXPECT_EQ(worker->Sort(job).outcome, GpuSortOutcome::kFailedIntact);
  EXPECT_TRUE(worker->healthy());
}

// Device memory (what a CUDA IPC region is): sorted device to device, with
// indices or values on the device too; the host never touches it (a host
// read of device memory would fault).
TEST(GpuWorkerDevice, DeviceResidentKeysIndicesAndValuesSortInPlace) {
  SKIP_WITHOUT_GPU();
  auto worker = MakeWorker();
  const size_t n = 1 << 20;
  const auto input = Random<uint32_t>(n, 6, 1000);
  const auto values_in = Random<uint64_t>(n, 7);
  uint32_t* keys = nullptr;
  uint64_t* aux = nullptr;
  ASSERT_EQ(cudaMalloc(&keys, n * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&aux, n * 8), cudaSuccess);
  const std::vector<uint64_t> ref = ReferenceOrder(input, false);
  std::vector<uint32_t> got_keys(n);
  std::vector<uint64_t> got_aux(n);
  // Keys and indices on the device; with merge preferred, which would widen
  // positions on the host: a device job must not take that path.
  ASSERT_EQ(cudaMemcpy(keys, input.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  GpuSortJob job;
  job.num_items = n;
  job.keys = keys;
  job.indices = aux;
  job.prefer_merge = true;
  GpuSortReport report = worker->Sort(job);
  ASSERT_EQ(report.outcome, GpuSortOutcome::kOk) << report.message;
  ASSERT_EQ(cudaMemcpy(got_keys.data(), keys, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got_aux.data(), aux, n * 8, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(got_keys[i], input[ref[i]]) << i;
    ASSERT_EQ(got_aux[i], ref[i]) << i;
  }
  // Keys and values on the device.
  ASSERT_EQ(cudaMemcpy(keys, input.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(aux, values_in.data(), n * 8, cudaMemcpyHostToDevice), cudaSuccess);
  job = GpuSortJob();
  job.num_items = n;
  job.keys = keys;
  job.values = aux;
  job.value_bytes = 8;
  report = worker->Sort(job);
  ASSERT_EQ(report.outcome, GpuSortOutcome::kOk) << report.message;
  ASSERT_EQ(cudaMemcpy(got_keys.data(), keys, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got_aux.data(), aux, n * 8, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(got_keys[i], input[ref[i]]) << i;
    ASSERT_EQ(got_aux[i], values_in[ref[i]]) << i;
  }
  cudaFree(keys);
  cudaFree(aux);
}

TEST(GpuWorkerDevice, DeviceResidentKeysOverThePoolAreRefusedNotChunked) {
  SKIP_WITHOUT_GPU();
  auto worker = MakeWorker(1 << 16, /*max_pool=*/size_t{4} << 20);
  const size_t n = size_t{1} << 21;  // 8 MiB of keys: would be sorted in chunks from the host
  uint32_t* keys = nullptr;
  ASSERT_EQ(cudaMalloc(&keys, n * 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(keys, 0x5a, n * 4), cudaSuccess);
  GpuSortJob job;
  job.num_items = n;
  job.keys = keys;
  EXPECT_EQ(worker->Sort(job).outcome, GpuSortOutcome::kNoMemory);
  std::vector<uint32_t> after(n);
  ASSERT_EQ(cudaMemcpy(after.data(), keys, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(after, std::vector<uint32_t>(n, 0x5a5a5a5a));
  EXPECT_TRUE(worker->healthy());
  cudaFree(keys);
}

}  // namespace
}  // namespace sortd::cuda
