// Same-host regions through the service (RegionService, region references
// in Sort/SortPairs/SortStream): every answer is compared with the
// reference sort of its own input; every bad reference gets its status.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "client/shared_region.h"
#include "server/regions/regions.h"
#include "tests/service/gate.h"
#include "tests/service/test_server.h"

namespace sortd::testing {
namespace {

using client::RegionRef;
using client::RegionSort;
using client::SharedMemory;
using client::SharedRegion;

ServerOptions WithRegions(uint64_t max_regions = 64) {
  ServerOptions options;
  options.regions.allow_system = true;
  options.regions.max_regions = max_regions;
  return options;
}

// A server whose region sorts stop at `gate` once they hold their regions
// (the "region.resolved" test site), before they touch them.
std::unique_ptr<SortdServer> StartHeldAtResolve(Gate& gate) {
  ServerOptions options = WithRegions();
  options.test_site_hook = gate.Hook();
  return StartServer(options);
}

template <typename T>
std::vector<T> RandomKeys(size_t n, uint64_t seed, int distinct = 0) {
  std::mt19937_64 rng(seed);
  std::vector<T> keys(n);
  for (T& k : keys) {
    const uint64_t bits = distinct > 0 ? rng() % distinct : rng();
    if constexpr (std::is_floating_point_v<T>) {
      k = static_cast<T>(static_cast<int64_t>(bits % 2000001) - 1000000) / T(7);
    } else {
      k = static_cast<T>(bits);
    }
  }
  return keys;
}

// The stable permutation of `keys` in `order` (descending: reverse order of
// distinct keys, equal keys in input order).
template <typename T>
std::vector<uint64_t> StablePermutation(const std::vector<T>& keys, bool descending) {
  std::vector<uint64_t> perm(keys.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](uint64_t a, uint64_t b) {
    return descending ? keys[b] < keys[a] : keys[a] < keys[b];
  });
  return perm;
}

template <typename T>
std::vector<T> Gathered(const std::vector<T>& in, const std::vector<uint64_t>& perm) {
  std::vector<T> out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = in[perm[i]];
  return out;
}

template <typename T>
std::vector<T> Read(const SharedRegion& region, size_t n, size_t offset = 0) {
  auto span = region.span<T>(n, offset);
  return {span.begin(), span.end()};
}

template <typename T>
class RegionKeyTypeTest : public ::testing::Test {};
using KeyTypes = ::testing::Types<uint32_t, int32_t, float, uint64_t, int64_t, double>;
TYPED_TEST_SUITE(RegionKeyTypeTest, KeyTypes);

TYPED_TEST(RegionKeyTypeTest, SortsInPlaceAndOutOfPlaceWithIndicesBothWays) {
  using T = TypeParam;
  auto server = StartServer(WithRegions());
  auto c = Connect(*server);
  const size_t n = 50000;  // past the inline and batching sizes
  auto region = SharedRegion::Create(*c, "keys", n * sizeof(T) * 2 + n * 8);
  ASSERT_TRUE(region.ok()) << region.status();
  const v1::ElementType type = client::ElementTypeOf<T>();
  for (bool descending : {false, true}) {
    const std::vector<T> input = RandomKeys<T>(n, 7 + descending, /*distinct=*/1000);
    const std::vector<uint64_t> perm = StablePermutation(input, descending);
    const v1::SortOrder order = descending ? v1::SORT_ORDER_DESCENDING : v1::SORT_ORDER_ASCENDING;
    // In place, indices in the response.
    std::memcpy((*region)->data(), input.data(), n * sizeof(T));
    RegionSort sort;
    sort.keys = {"keys", 0, n, type};
    sort.order = order;
    sort.return_indices = true;
    std::vector<uint64_t> indices;
    auto engine = c->SortRegion(sort, &indices);
    ASSERT_TRUE(engine.ok()) << engine.status();
    EXPECT_EQ(*engine, v1::ENGINE_CPU);
    EXPECT_EQ(Read<T>(**region, n), Gathered(input, perm));
    EXPECT_EQ(indices, perm);
    // Out of place, indices into the region: the input stays as it was.
    std::memcpy((*region)->data(), input.data(), n * sizeof(T));
    sort.keys_out = RegionRef{"keys", n * sizeof(T), n, type};
    sort.indices_out = RegionRef{"keys", 2 * n * sizeof(T), n, v1::ELEMENT_TYPE_UINT64};
    indices.clear();
    engine = c->SortRegion(sort, &indices);
    ASSERT_TRUE(engine.ok()) << engine.status();
    EXPECT_TRUE(indices.empty());
    EXPECT_EQ(Read<T>(**region, n), input);
    EXPECT_EQ(Read<T>(**region, n, n * sizeof(T)), Gathered(input, perm));
    EXPECT_EQ(Read<uint64_t>(**region, n, 2 * n * sizeof(T)), perm);
  }
}

TEST(RegionTest, SortPairsMovesValuesOfFourAndEightBytes) {
  auto server = StartServer(WithRegions());
  auto c = Connect(*server);
  const size_t n = 40000;
  auto region = SharedRegion::Create(*c, "pairs", n * 4 + n * 8 + n * 4 + n * 8);
  ASSERT_TRUE(region.ok()) << region.status();
  const std::vector<uint32_t> keys = RandomKeys<uint32_t>(n, 3, /*distinct=*/64);
  const std::vector<uint64_t> values8 = RandomKeys<uint64_t>(n, 4);
  const std::vector<float> values4 = RandomKeys<float>(n, 5);
  const std::vector<uint64_t> perm = StablePermutation(keys, false);
  // In place, 8-byte values.
  auto k = (*region)->span<uint32_t>(n);
  auto v = (*region)->span<uint64_t>(n, n * 4);
  std::copy(keys.begin(), keys.end(), k.begin());
  std::copy(values8.begin(), values8.end(), v.begin());
  auto engine = c->SortPairsInRegion(**region, k, v);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ(Read<uint32_t>(**region, n), Gathered(keys, perm));
  EXPECT_EQ(Read<uint64_t>(**region, n, n * 4), Gathered(values8, perm));
  // Out of place, 4-byte values: keys and values go to their out slices.
  std::copy(keys.begin(), keys.end(), k.begin());
  auto v4 = (*region)->span<float>(n, n * 12);
  std::copy(values4.begin(), values4.end(), v4.begin());
  RegionSort sort;
  sort.keys = {"pairs", 0, n, v1::ELEMENT_TYPE_UINT32};
  sort.values = RegionRef{"pairs", n * 12, n, v1::ELEMENT_TYPE_FLOAT32};
  sort.keys_out = RegionRef{"pairs", n * 16, n, v1::ELEMENT_TYPE_UINT32};
  sort.values_out = RegionRef{"pairs", n * 4, n, v1::ELEMENT_TYPE_FLOAT32};
  engine = c->SortRegion(sort);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ(Read<uint32_t>(**region, n), keys);
  EXPECT_EQ(Read<float>(**region, n, n * 12), values4);
  EXPECT_EQ(Read<uint32_t>(**region, n, n * 16), Gathered(keys, perm));
  EXPECT_EQ(Read<float>(**region, n, n * 4), Gathered(values4, perm));
}

TEST(RegionTest, SmallRequestsAndStreamsSortTheirOwnSlices) {
  auto server = StartServer(WithRegions());
  auto c = Connect(*server);
  const size_t n = 1000, requests = 64;  // inline and batchable sizes
  auto region = SharedRegion::Create(*c, "small", n * 4 * requests);
  ASSERT_TRUE(region.ok()) << region.status();
  std::vector<std::vector<uint32_t>> inputs;
  for (size_t r = 0; r < requests; ++r) {
    inputs.push_back(RandomKeys<uint32_t>(n, 100 + r));
    std::copy(inputs[r].begin(), inputs[r].end(), (*region)->span<uint32_t>(n, r * n * 4).begin());
  }
  // Half unary, half over one SortStream.
  for (size_t r = 0; r < requests / 2; ++r) {
    ASSERT_TRUE(c->SortInRegion(**region, (*region)->span<uint32_t>(n, r * n * 4)).ok());
  }
  grpc::ClientContext ctx;
  auto stream = c->stub().SortStream(&ctx);
  for (size_t r = requests / 2; r < requests; ++r) {
    v1::SortRequest request;
    request.set_request_id(std::to_string(r));
    auto* slice = request.mutable_keys_region();
    slice->set_region("small");
    slice->set_offset(r * n * 4);
    slice->set_count(n);
    slice->set_type(v1::ELEMENT_TYPE_UINT32);
    ASSERT_TRUE(stream->Write(request));
  }
  stream->WritesDone();
  v1::SortResponse response;
  size_t answered = 0;
  while (stream->Read(&response)) {
    EXPECT_FALSE(response.has_error()) << response.error().message();
    EXPECT_FALSE(response.has_keys());
    ++answered;
  }
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_EQ(answered, requests / 2);
  for (size_t r = 0; r < requests; ++r) {
    std::vector<uint32_t> want = inputs[r];
    std::sort(want.begin(), want.end());
    EXPECT_EQ(Read<uint32_t>(**region, n, r * n * 4), want) << "request " << r;
  }
}

// Sends a Sort with `mutate` applied to a valid in-place reference to the
// 1024 u32 keys of region "r" (8 KiB), expecting `code` and `field` in the
// message; the server answers a valid sort afterwards.
void ExpectRefused(client::SortClient& c, std::function<void(v1::SortRequest&)> mutate,
                   grpc::StatusCode code, const std::string& field) {
  v1::SortRequest request;
  auto* keys = request.mutable_keys_region();
  keys->set_region("r");
  keys->set_count(1024);
  keys->set_type(v1::ELEMENT_TYPE_UINT32);
  mutate(request);
  grpc::ClientContext ctx;
  v1::SortResponse response;
  const grpc::Status status = c.stub().Sort(&ctx, request, &response);
  EXPECT_EQ(status.error_code(), code) << field << ": " << status.error_message();
  EXPECT_NE(status.error_message().find(field), std::string::npos) << status.error_message();
}

TEST(RegionTest, BadReferencesAreRefusedNamingTheField) {
  auto server = StartServer(WithRegions());
  auto c = Connect(*server);
  auto memory = SharedMemory::Create(8192);
  ASSERT_TRUE(memory.ok());
  const std::string key = memory->shm_key();
  ASSERT_TRUE(c->RegisterSystemRegion("r", key, 8192).ok());
  ASSERT_TRUE(c->RegisterSystemRegion("alias", key, 8192).ok());  // the same memory
  const auto kInvalid = grpc::StatusCode::INVALID_ARGUMENT;
  ExpectRefused(*c, [](auto& r) { r.mutable_keys_region()->set_region("nope"); },
                grpc::StatusCode::NOT_FOUND, "keys_region.region");
  ExpectRefused(*c, [](auto& r) { r.mutable_keys_region()->set_offset(2); }, kInvalid,
                "keys_region.offset");
  ExpectRefused(*c, [](auto& r) { r.mutable_keys_region()->set_count(2049); }, kInvalid,
                "keys_region");
  ExpectRefused(*c, [](auto& r) { r.mutable_keys_region()->set_count(uint64_t{1} << 62); },
                kInvalid, "keys_region");
  ExpectRefused(*c, [](auto& r) { r.mutable_keys_region()->set_offset(~uint64_t{0} - 3); },
                kInvalid, "keys_region");
  ExpectRefused(*c, [](auto& r) { r.mutable_keys_region()->set_type(v1::ELEMENT_TYPE_UNSPECIFIED); },
                kInvalid, "keys_region.type");
  ExpectRefused(*c, [](auto& r) { r.mutable_keys()->mutable_uint32()->add_values(1); }, kInvalid,
                "keys:");
  ExpectRefused(
      *c,
      [](auto& r) {  // overlaps the keys through the other name
        auto* out = r.mutable_keys_out_region();
        *out = r.keys_region();
        out->set_region("alias");
        out->set_offset(4);
      },
      kInvalid, "keys_out_region");
  ExpectRefused(
      *c,
      [](auto& r) {
        auto* out = r.mutable_keys_out_region();
        *out = r.keys_region();
        out->set_type(v1::ELEMENT_TYPE_INT32);
        out->set_offset(4096);
      },
      kInvalid, "keys_out_region.type");
  ExpectRefused(
      *c,
      [](auto& r) {
        r.set_return_indices(true);
        auto* idx = r.mutable_indices_region();
        idx->set_region("r");
        idx->set_offset(4096);
        idx->set_count(512);
        idx->set_type(v1::ELEMENT_TYPE_UINT64);
      },
      kInvalid, "indices_region.count");
  ExpectRefused(
      *c,
      [](auto& r) {
        r.mutable_keys_region()->set_count(256);
        r.set_return_indices(true);
        auto* idx = r.mutable_indices_region();
        idx->set_region("r");
        idx->set_offset(4096);
        idx->set_count(256);
        idx->set_type(v1::ELEMENT_TYPE_INT64);
      },
      kInvalid, "indices_region.type");
  ExpectRefused(
      *c,
      [](auto& r) {
        auto* idx = r.mutable_indices_region();
        idx->set_region("r");
        idx->set_count(1024);
        idx->set_type(v1::ELEMENT_TYPE_UINT64);
      },
      kInvalid, "indices_region");
  // Still serving: a valid sort of the same region.
  auto span = absl::MakeSpan(reinterpret_cast<uint32_t*>(memory->data()), 1024);
  for (size_t i = 0; i < span.size(); ++i) span[i] = static_cast<uint32_t>(span.size() - i);
  RegionSort sort;
  sort.keys = {"r", 0, 1024, v1::ELEMENT_TYPE_UINT32};
  ASSERT_TRUE(c->SortRegion(sort).ok());
  EXPECT_TRUE(std::is_sorted(span.begin(), span.end()));
  EXPECT_EQ(span[0], 1u);
}

TEST(RegionTest, RegistrationChecksNamesObjectsAndLimits) {
  auto server = StartServer(WithRegions(/*max_regions=*/2));
  auto c = Connect(*server);
  auto memory = SharedMemory::Create(1 << 16);
  ASSERT_TRUE(memory.ok());
  auto code = [](const absl::Status& s) { return s.code(); };
  EXPECT_EQ(code(c->RegisterSystemRegion("a", "/sortd-no-such-object", 4096).status()),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(code(c->RegisterSystemRegion("bad name", memory->shm_key(), 4096).status()),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(c->RegisterSystemRegion("a", "/../etc/passwd", 4096).status()),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(c->RegisterSystemRegion("a", memory->shm_key(), (1 << 16) + 1).status()),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(c->RegisterSystemRegion("a", memory->shm_key(), 4096, 100).status()),
            absl::StatusCode::kInvalidArgument);  // offset not page aligned
  ASSERT_TRUE(c->RegisterSystemRegion("a", memory->shm_key(), 4096).ok());
  EXPECT_EQ(code(c->RegisterSystemRegion("a", memory->shm_key(), 4096).status()),
            absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(c->RegisterSystemRegion("b", memory->shm_key(), 4096, 4096).ok());
  EXPECT_EQ(code(c->RegisterSystemRegion("c", memory->shm_key(), 4096).status()),
            absl::StatusCode::kResourceExhausted);
  auto listed = c->ListRegions();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[1].name(), "b");
  EXPECT_EQ((*listed)[1].shm_key(), memory->shm_key());
  EXPECT_EQ((*listed)[1].kind(), v1::REGION_KIND_SYSTEM);
  EXPECT_EQ(code(c->UnregisterRegion("zzz")), absl::StatusCode::kNotFound);
  ASSERT_TRUE(c->UnregisterRegion("a").ok());
  EXPECT_TRUE(c->RegisterSystemRegion("c", memory->shm_key(), 4096).ok());
  // CUDA regions are off on this server.
  char handle[64] = {};
  EXPECT_EQ(code(c->RegisterCudaRegion("g", handle, 0, 4096)), absl::StatusCode::kFailedPrecondition);
}

TEST(RegionTest, RegionsOffRefusesEveryRegionCall) {
  auto server = StartServer();  // no --shared_memory
  auto c = Connect(*server);
  auto memory = SharedMemory::Create(4096);
  ASSERT_TRUE(memory.ok());
  const absl::Status registered = c->RegisterSystemRegion("a", memory->shm_key(), 4096).status();
  EXPECT_EQ(registered.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(registered.message().find("--shared_memory"), std::string::npos) << registered;
  EXPECT_EQ(c->ListRegions().status().code(), absl::StatusCode::kFailedPrecondition);
  RegionSort sort;
  sort.keys = {"a", 0, 16, v1::ELEMENT_TYPE_UINT32};
  EXPECT_EQ(c->SortRegion(sort).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(RegionTest, ARegionUnregisteredDuringASortStaysMappedUntilItEnds) {
  // The sort stops once it holds its region, before it reads it.
  Gate gate("region.resolved");
  auto server = StartHeldAtResolve(gate);
  OpenOnExit open(gate);
  auto c = Connect(*server);
  const size_t n = 100000;
  const std::vector<uint32_t> input = RandomKeys<uint32_t>(n, 9);
  std::vector<uint32_t> result(n);
  std::future<absl::Status> sorted;
  {
    auto memory = SharedMemory::Create(n * 4);
    ASSERT_TRUE(memory.ok());
    std::memcpy(memory->data(), input.data(), n * 4);
    ASSERT_TRUE(c->RegisterSystemRegion("held", memory->shm_key(), n * 4).ok());
    // A second name for the same object, so the result can be read after.
    ASSERT_TRUE(c->RegisterSystemRegion("reader", memory->shm_key(), n * 4).ok());
    sorted = std::async(std::launch::async, [&] {
      RegionSort sort;
      sort.keys = {"held", 0, n, v1::ELEMENT_TYPE_UINT32};
      return c->SortRegion(sort).status();
    });
    ASSERT_TRUE(gate.WaitForArrivals(1));
    ASSERT_TRUE(c->UnregisterRegion("held").ok());
    auto listed = c->ListRegions();
    ASSERT_TRUE(listed.ok());
    ASSERT_EQ(listed->size(), 1u);
    EXPECT_EQ((*listed)[0].name(), "reader");
  }  // this process unmaps and unlinks its side: only the server's mappings remain
  gate.Open();
  ASSERT_TRUE(sorted.get().ok());  // sorted through the mapping of a name already gone
  RegionSort copy;  // read it back through the other name: out of place into... itself
  std::vector<uint32_t> want = input;
  std::sort(want.begin(), want.end());
  // The other name maps the same pages: sorting them again changes nothing,
  // and a SortRegion with indices shows the order is already the identity.
  copy.keys = {"reader", 0, n, v1::ELEMENT_TYPE_UINT32};
  copy.return_indices = true;
  std::vector<uint64_t> indices;
  ASSERT_TRUE(c->SortRegion(copy, &indices).ok());
  std::vector<uint64_t> identity(n);
  std::iota(identity.begin(), identity.end(), 0);
  // Equal keys keep their order, so an already sorted array has the
  // identity permutation: the held sort really sorted the shared pages.
  EXPECT_EQ(indices, identity);
  EXPECT_TRUE(c->UnregisterRegion("reader").ok());
}

// Shrinks the shm object `key` to `bytes` from outside (as a client could).
void Truncate(const std::string& key, off_t bytes) {
  const int fd = shm_open(key.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, bytes), 0);
  close(fd);
}

TEST(RegionTest, AShrunkObjectIsRefusedAndTheServerLives) {
  auto server = StartServer(WithRegions());
  auto c = Connect(*server);
  // Large spans: the object's size is read before the sort, which never
  // starts. Small spans: the CPU sort touches the lost pages, the guard
  // catches the fault, the sort fails.
  for (size_t count : {size_t{100000}, size_t{1000}}) {
    auto memory = SharedMemory::Create(1 << 20);
    ASSERT_TRUE(memory.ok());
    const std::string name = "shrunk" + std::to_string(count);
    ASSERT_TRUE(c->RegisterSystemRegion(name, memory->shm_key(), 1 << 20).ok());
    Truncate(memory->shm_key(), 4096);
    RegionSort sort;
    sort.keys = {name, 8192, count, v1::ELEMENT_TYPE_UINT32};
    const absl::Status status = c->SortRegion(sort).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << count << ": " << status;
    EXPECT_NE(status.message().find("shrunk"), std::string::npos) << status;
    // After a fault the region is refused whatever the span; after a size
    // check alone, a span within what is left still sorts.
    sort.keys = {name, 0, 16, v1::ELEMENT_TYPE_UINT32};
    const bool faulted = count * 4 < Region::kStatBytes;
    EXPECT_EQ(c->SortRegion(sort).status().code(),
              faulted ? absl::StatusCode::kFailedPrecondition : absl::StatusCode::kOk);
    EXPECT_EQ(c->Health().value_or(""), "SERVING");
    EXPECT_TRUE(c->UnregisterRegion(name).ok());
  }
}

TEST(RegionTest, AnObjectShrunkDuringASortFailsThatSortNotTheServer) {
  // The sort holds its region at the gate; the object shrinks; the sort
  // then touches pages that are gone (SIGBUS, caught by the guard).
  Gate gate("region.resolved");
  auto server = StartHeldAtResolve(gate);
  OpenOnExit open(gate);
  auto c = Connect(*server);
  const size_t n = 1 << 18;
  auto memory = SharedMemory::Create(n * 4);
  ASSERT_TRUE(memory.ok());
  const std::vector<uint32_t> input = RandomKeys<uint32_t>(n, 12);
  std::memcpy(memory->data(), input.data(), n * 4);
  ASSERT_TRUE(c->RegisterSystemRegion("doomed", memory->shm_key(), n * 4).ok());
  auto sorted = std::async(std::launch::async, [&] {
    RegionSort sort;
    sort.keys = {"doomed", 0, n, v1::ELEMENT_TYPE_UINT32};
    return c->SortRegion(sort).status();
  });
  ASSERT_TRUE(gate.WaitForArrivals(1));
  Truncate(memory->shm_key(), 0);
  gate.Open();
  const absl::Status status = sorted.get();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  // The region stays refused; others still sort.
  RegionSort again;
  again.keys = {"doomed", 0, 16, v1::ELEMENT_TYPE_UINT32};
  EXPECT_EQ(c->SortRegion(again).status().code(), absl::StatusCode::kFailedPrecondition);
  auto fine = SharedRegion::Create(*c, "fine", 4096);
  ASSERT_TRUE(fine.ok());
  auto keys = (*fine)->span<uint32_t>(1024);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = static_cast<uint32_t>(keys.size() - i);
  ASSERT_TRUE(c->SortInRegion(**fine, keys).ok());
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_TRUE(c->UnregisterRegion("doomed").ok());
}

// Holds one call at a time at `site` until the test has done something
// (here: unregistered the region the call holds); every other call passes.
class Turnstile {
 public:
  explicit Turnstile(std::string site) : site_(std::move(site)) {}
  std::function<bool(absl::string_view)> Hook() {
    return [this](absl::string_view at) {
      if (at != site_) return false;
      std::unique_lock<std::mutex> lock(mu_);
      ++passed_;
      if (!armed_) return false;
      armed_ = false;
      const int ticket = ++held_;
      cv_.notify_all();
      // Bounded: a failing test never leaves a call held.
      cv_.wait_for(lock, std::chrono::seconds(30), [&] { return released_ >= ticket; });
      return false;
    };
  }
  // Arms the turnstile and waits (bounded) until the next call is held.
  bool HoldNext() {
    std::unique_lock<std::mutex> lock(mu_);
    armed_ = true;
    const int want = held_ + 1;
    return cv_.wait_for(lock, std::chrono::seconds(30), [&] { return held_ >= want; });
  }
  // Lets every held call go on.
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = false;
    released_ = held_;
    cv_.notify_all();
  }
  int passed() {
    std::lock_guard<std::mutex> lock(mu_);
    return passed_;
  }

 private:
  const std::string site_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;
  int held_ = 0;      // calls held so far
  int released_ = 0;  // calls let go so far
  int passed_ = 0;    // calls that reached the site
};

TEST(RegionTest, SortsRacingUnregisterEitherSortOrFailNotFound) {
  // Four sorters loop over their own slices of one region while the test
  // unregisters and re-registers it. Each round provably has both outcomes:
  // one sort holds the region (stopped at "region.resolved") when the
  // unregister lands, and must still sort exactly; a sort sent while the
  // name is gone must fail NOT_FOUND. The sorters' own answers, whenever
  // they land, must be one or the other, never a wrong order or another
  // error.
  Turnstile turnstile("region.resolved");
  ServerOptions options = WithRegions();
  options.test_site_hook = turnstile.Hook();
  auto server = StartServer(options);
  auto c = Connect(*server);
  const size_t n = 1 << 16;
  auto memory = SharedMemory::Create(n * 4 * 4);
  ASSERT_TRUE(memory.ok());
  ASSERT_TRUE(c->RegisterSystemRegion("race", memory->shm_key(), n * 16).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> sorted{0}, not_found{0}, other{0};
  std::vector<std::thread> sorters;
  for (int t = 0; t < 4; ++t) {
    sorters.emplace_back([&, t] {
      auto keys = absl::MakeSpan(reinterpret_cast<uint32_t*>(memory->data()) + t * n, n);
      for (int round = 0; !stop.load() && round < 100000; ++round) {
        const std::vector<uint32_t> input = RandomKeys<uint32_t>(n, t * 1000 + round);
        std::copy(input.begin(), input.end(), keys.begin());
        RegionSort sort;
        sort.keys = {"race", uint64_t(t) * n * 4, n, v1::ELEMENT_TYPE_UINT32};
        const absl::Status status = c->SortRegion(sort).status();
        if (status.ok()) {
          std::vector<uint32_t> want = input;
          std::sort(want.begin(), want.end());
          if (std::equal(want.begin(), want.end(), keys.begin())) {
            ++sorted;
          } else {
            ++other;
          }
        } else if (status.code() == absl::StatusCode::kNotFound) {
          ++not_found;
        } else {
          ++other;
        }
      }
    });
  }
  constexpr int kRounds = 10;
  int held_across_unregister = 0, refused_while_gone = 0;
  for (int i = 0; i < kRounds; ++i) {
    // A sorter's call holds the region, stopped before it reads it...
    if (!turnstile.HoldNext()) {
      ADD_FAILURE() << "round " << i << ": no sort reached the region";
      break;
    }
    // ...when the name goes away under it.
    const absl::Status unregistered = c->UnregisterRegion("race");
    // While the name is gone, a new sort of it is refused, never run (the
    // refusal comes before the test site: it passes no turnstile).
    RegionSort probe;
    probe.keys = {"race", 0, 16, v1::ELEMENT_TYPE_UINT32};
    const absl::Status refused = c->SortRegion(probe).status();
    turnstile.Release();
    EXPECT_TRUE(unregistered.ok()) << unregistered;
    if (unregistered.ok()) ++held_across_unregister;
    EXPECT_EQ(refused.code(), absl::StatusCode::kNotFound) << refused;
    if (refused.code() == absl::StatusCode::kNotFound) ++refused_while_gone;
    const absl::Status registered =
        c->RegisterSystemRegion("race", memory->shm_key(), n * 16).status();
    if (!registered.ok()) {
      ADD_FAILURE() << "round " << i << ": " << registered;
      break;
    }
  }
  turnstile.Release();  // also after a failed round: nothing stays armed or held
  stop = true;
  for (auto& t : sorters) t.join();
  EXPECT_EQ(held_across_unregister, kRounds);
  EXPECT_EQ(refused_while_gone, kRounds);
  EXPECT_EQ(other.load(), 0);
  // Every call that got hold of the region (the held ones among them)
  // sorted its slice exactly: none of them failed.
  EXPECT_EQ(sorted.load(), turnstile.passed());
  EXPECT_GE(sorted.load(), kRounds);
  EXPECT_EQ(c->Health().value_or(""), "SERVING");
}

TEST(RegionTest, MetricsCountRegionsBytesAndRequests) {
  auto server = StartServer(WithRegions());
  auto c = Connect(*server);
  auto region = SharedRegion::Create(*c, "m", 8192);
  ASSERT_TRUE(region.ok());
  auto keys = (*region)->span<uint32_t>(100);
  ASSERT_TRUE(c->SortInRegion(**region, keys).ok());
  ASSERT_TRUE(c->SortInRegion(**region, keys).ok());
  const std::string text = Scrape(*server);
  EXPECT_EQ(Sample(text, "sortd_shm_regions{kind=\"system\"}"), 1);
  EXPECT_EQ(Sample(text, "sortd_shm_registered_bytes{kind=\"system\"}"), 8192);
  EXPECT_EQ(Sample(text, "sortd_shm_requests_total{kind=\"system\"}"), 2);
  EXPECT_EQ(Sample(text, "sortd_shm_regions{kind=\"cuda\"}"), 0);
  region->reset();  // unregisters
  EXPECT_EQ(Sample(Scrape(*server), "sortd_shm_regions{kind=\"system\"}"), 0);
}

TEST(RegionPeerTest, OnlyUnixSocketsAndLoopbackAreSameHost) {
  EXPECT_TRUE(IsSameHostPeer("unix:/run/sortd/sortd.sock"));
  EXPECT_TRUE(IsSameHostPeer("ipv4:127.0.0.1:5555"));
  EXPECT_TRUE(IsSameHostPeer("ipv6:[::1]:5555"));
  EXPECT_TRUE(IsSameHostPeer("ipv6:%5B::1%5D:5555"));
  EXPECT_FALSE(IsSameHostPeer("ipv4:10.0.0.7:5555"));
  EXPECT_FALSE(IsSameHostPeer("ipv6:[2001:db8::1]:5555"));
  EXPECT_FALSE(IsSameHostPeer("ipv4:128.0.0.1:1"));
  // --shared_memory_peers=unix: the socket only.
  EXPECT_TRUE(IsSameHostPeer("unix:/run/sortd/sortd.sock", /*unix_socket_only=*/true));
  EXPECT_FALSE(IsSameHostPeer("ipv4:127.0.0.1:5555", /*unix_socket_only=*/true));
  EXPECT_FALSE(IsSameHostPeer("ipv6:[::1]:5555", /*unix_socket_only=*/true));
  RegionLimits limits;
  EXPECT_TRUE(ParseSharedMemoryKinds("cuda,system", &limits).ok());
  EXPECT_TRUE(limits.allow_cuda && limits.allow_system);
  EXPECT_TRUE(ParseSharedMemoryKinds("none", &limits).ok());
  EXPECT_FALSE(limits.allow_cuda || limits.allow_system);
  EXPECT_FALSE(ParseSharedMemoryKinds("system,gpu", &limits).ok());
}

}  // namespace
}  // namespace sortd::testing
