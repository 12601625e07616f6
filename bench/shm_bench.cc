// Same-host regions against the other ways a user on the server's host can
// sort, through a running sortd (started with --shared_memory=system,cuda),
// in one run on one machine:
//   - keys (and keys + values) in a system region: RPC issued to response;
//   - keys in a CUDA IPC region (device memory of this process);
//   - the same keys through gRPC payloads (the client's default path for
//     large arrays: a sort session) and, optionally, SortChunked;
//   - the in-process baseline a CuPy/PyTorch user has: copy to the GPU, CUB
//     sort, copy back (pinned and pageable host memory);
//   - 4 KiB requests: Sort requests per second with inline payloads and
//     with a region, from the same number of threads.
// With --clients=N it measures only N clients sorting system regions at
// once (issue #20: how the GPUs of one sortd scale once gRPC payloads are
// out of the way; scripts/gpu-host/multi_gpu.sh).
// Every sort is checked (order, and a checksum of the keys or key/value
// pairs). Run it through scripts/gpu-host/shm_bench.sh.
//
//   sortd_shm_bench --target=unix:/tmp/sortd.sock --log2_keys=28 --repeat=5
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "bench/shm_bench_cuda.h"
#include "client/sortd_client.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "sortd address (unix:PATH or loopback)");
ABSL_FLAG(int, log2_keys, 28, "keys per large sort (2^28 u32 = 1 GiB)");
ABSL_FLAG(int, repeat, 5, "runs per large case (best and median reported)");
ABSL_FLAG(bool, grpc, true, "also sort the same keys through gRPC payloads (session path)");
ABSL_FLAG(bool, chunked, false, "also through SortChunked (one stream; slow)");
ABSL_FLAG(bool, cuda, true, "CUDA IPC case and the in-process CUB baseline (needs a GPU)");
ABSL_FLAG(int, small_threads, 16, "threads for the 4 KiB request rate");
ABSL_FLAG(double, small_seconds, 3, "seconds per 4 KiB rate measurement");
ABSL_FLAG(int, clients, 0,
          "only this: N clients (a connection and a system region each) sorting at once, --repeat rounds");

namespace {

using Clock = std::chrono::steady_clock;
using sortd::client::RegionRef;
using sortd::client::RegionSort;
using sortd::client::SharedRegion;
using sortd::client::SortClient;
namespace v1 = sortd::v1;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

// Order-independent fingerprint of keys (and of key/value pairs).
uint64_t Fingerprint(const uint32_t* keys, const uint32_t* values, size_t n) {
  uint64_t sum = 0;
  for (size_t i = 0; i < n; ++i) {
    sum += Mix(keys[i] * 0x9e3779b97f4a7c15ULL + (values ? values[i] + 1 : 0));
  }
  return sum;
}

bool Sorted(const uint32_t* keys, size_t n) { return std::is_sorted(keys, keys + n); }

struct Times {
  std::vector<double> seconds;
  double best() const { return *std::min_element(seconds.begin(), seconds.end()); }
  double median() const {
    std::vector<double> s = seconds;
    std::sort(s.begin(), s.end());
    return s[s.size() / 2];
  }
};

void Row(const std::string& what, const Times& t, double baseline = 0) {
  std::printf("| %-44s | %9.1f | %9.1f |", what.c_str(), t.best() * 1e3, t.median() * 1e3);
  if (baseline > 0) std::printf(" %6.2fx |", t.best() / baseline);
  std::printf("\n");
  std::fflush(stdout);
}

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "sortd_shm_bench: %s\n", why.c_str());
  std::exit(1);
}

std::vector<uint32_t> RandomU32(size_t n, uint64_t seed) {
  std::vector<uint32_t> v(n);
  const size_t threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937 rng(static_cast<uint32_t>(seed * 131 + t));
      for (size_t i = n / threads * t; i < (t + 1 == threads ? n : n / threads * (t + 1)); ++i) {
        v[i] = rng();
      }
    });
  }
  for (auto& th : pool) th.join();
  return v;
}

// Sorts through `sort` `repeat` times, refilling the inputs before each
// run (untimed) and checking every result.
template <typename Refill, typename Sort, typename Check>
Times Measure(int repeat, Refill refill, Sort sort, Check check) {
  Times t;
  for (int r = 0; r < repeat; ++r) {
    refill();
    const auto start = Clock::now();
    sort();
    t.seconds.push_back(Since(start));
    check();
  }
  return t;
}

// Sort requests per second from `threads` threads for `seconds`, each
// thread with its own connection; `one(thread_index, client)` sends one.
template <typename One>
double Rate(const std::string& target, int threads, double seconds, One one) {
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> done{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      grpc::ChannelArguments args = sortd::client::MakeChannelArguments({});
      args.SetInt("sortd.bench.thread", t);  // a connection per thread
      SortClient client(grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args),
                        {});
      uint64_t mine = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        one(t, client);
        ++mine;
      }
      done += mine;
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : pool) th.join();
  return done.load() / seconds;
}

// N clients, each with its own connection and system region of n keys,
// sort at the same time. A round refills every region (untimed), starts
// every client's sort at once and ends with the last response; its rate is
// N * n keys over the round's time. Every result is checked.
int RunConcurrent(const std::string& target, size_t n, int clients, int rounds,
                  const std::vector<uint32_t>& keys_in, uint64_t keys_print) {
  std::vector<std::unique_ptr<SortClient>> connections;
  std::vector<std::unique_ptr<SharedRegion>> regions;
  for (int c = 0; c < clients; ++c) {
    grpc::ChannelArguments args = sortd::client::MakeChannelArguments({});
    args.SetInt("sortd.bench.client", c);  // a connection per client
    connections.push_back(std::make_unique<SortClient>(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args),
        sortd::client::ClientOptions{}));
    auto region = SharedRegion::Create(*connections.back(), absl::StrCat("shm-bench-client-", c), n * 4);
    if (!region.ok()) Die("region: " + region.status().ToString());
    regions.push_back(std::move(*region));
  }
  // fn(c) on one thread per client; returns when all are done.
  auto each = [&](auto fn) {
    std::vector<std::thread> pool;
    for (int c = 0; c < clients; ++c) pool.emplace_back([&, c] { fn(c); });
    for (auto& th : pool) th.join();
  };
  std::printf("%d clients at once, %zu u32 keys (%.0f MiB) each in a system region (%s)\n\n", clients, n,
              n * 4 / 1048576.0, regions[0]->pinned() ? "pinned" : "not pinned");
  std::printf("| round | seconds | GB/s of keys sorted | slowest client ms | fastest ms |\n|---|---|---|---|---|\n");
  std::vector<double> rates;
  for (int r = 0; r < rounds; ++r) {
    each([&](int c) { std::memcpy(regions[c]->data(), keys_in.data(), n * 4); });
    std::vector<double> took(clients);
    const auto start = Clock::now();
    each([&](int c) {
      const auto mine = Clock::now();
      RegionSort sort;
      sort.keys = RegionRef{regions[c]->name(), 0, n, v1::ELEMENT_TYPE_UINT32};
      auto engine = connections[c]->SortRegion(sort);
      if (!engine.ok()) Die("region sort: " + engine.status().ToString());
      took[c] = Since(mine);
    });
    const double seconds = Since(start);
    each([&](int c) {
      const auto* k = reinterpret_cast<const uint32_t*>(regions[c]->data());
      if (!Sorted(k, n) || Fingerprint(k, nullptr, n) != keys_print) Die("client result wrong");
    });
    rates.push_back(clients * n * 4 / seconds / 1e9);
    std::printf("| %d | %.3f | %.2f | %.1f | %.1f |\n", r + 1, seconds, rates.back(),
                *std::max_element(took.begin(), took.end()) * 1e3,
                *std::min_element(took.begin(), took.end()) * 1e3);
    std::fflush(stdout);
  }
  std::sort(rates.begin(), rates.end());
  std::printf("\nconcurrent regions: %d clients, median %.2f GB/s, best %.2f GB/s\n", clients,
              rates[rates.size() / 2], rates.back());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string target = absl::GetFlag(FLAGS_target);
  const size_t n = size_t{1} << absl::GetFlag(FLAGS_log2_keys);
  const int repeat = absl::GetFlag(FLAGS_repeat);
  const size_t bytes = n * 4;
  auto connected = SortClient::Connect(target);
  if (!connected.ok()) Die(connected.status().ToString());
  SortClient& client = **connected;

  const std::vector<uint32_t> keys_in = RandomU32(n, 1);
  const std::vector<uint32_t> values_in = RandomU32(n, 2);
  const uint64_t keys_print = Fingerprint(keys_in.data(), nullptr, n);
  const uint64_t pairs_print = Fingerprint(keys_in.data(), values_in.data(), n);
  if (absl::GetFlag(FLAGS_clients) > 0) {
    return RunConcurrent(target, n, absl::GetFlag(FLAGS_clients), repeat, keys_in, keys_print);
  }
  std::printf("sortd_shm_bench: %zu u32 keys (%.0f MiB), target %s, best of %d\n\n", n,
              bytes / 1048576.0, target.c_str(), repeat);
  std::printf("| case | best ms | median ms | vs local pinned |\n|---|---|---|---|\n");

  // The in-process baseline first: what the service is compared with.
  double local_pinned = 0;
  const bool cuda = absl::GetFlag(FLAGS_cuda) && sortd::bench::CudaAvailable();
  auto check_keys = [&](const uint32_t* k, const uint32_t* v) {
    if (!Sorted(k, n)) Die("result not sorted");
    if (Fingerprint(k, v, n) != (v ? pairs_print : keys_print)) Die("result is not a permutation");
  };
  if (cuda) {
    std::string error;
    auto* pinned_keys = static_cast<uint32_t*>(sortd::bench::PinnedAlloc(bytes));
    auto* pinned_values = static_cast<uint32_t*>(sortd::bench::PinnedAlloc(bytes));
    if (pinned_keys == nullptr || pinned_values == nullptr) Die("cudaMallocHost failed");
    std::vector<uint32_t> pageable_keys(n), pageable_values(n);
    for (bool pairs : {false, true}) {
      sortd::bench::LocalCubSort local(n, pairs);
      for (bool pinned : {true, false}) {
        uint32_t* k = pinned ? pinned_keys : pageable_keys.data();
        uint32_t* v = !pairs ? nullptr : pinned ? pinned_values : pageable_values.data();
        Times t = Measure(
            repeat,
            [&] {
              std::memcpy(k, keys_in.data(), bytes);
              if (v) std::memcpy(v, values_in.data(), bytes);
            },
            [&] {
              if (local.Run(k, v, &error) < 0) Die("local CUB sort: " + error);
            },
            [&] { check_keys(k, v); });
        if (!pairs && pinned) local_pinned = t.best();
        Row(absl::StrCat("local: copy + CUB sort + copy back, ", pairs ? "pairs, " : "",
                         pinned ? "pinned" : "pageable"),
            t, pairs ? 0 : local_pinned);
      }
    }
    sortd::bench::PinnedFree(pinned_keys);
    sortd::bench::PinnedFree(pinned_values);
  }

  // System region: keys, then keys + values, in place.
  auto region = SharedRegion::Create(client, "shm-bench", 2 * bytes);
  if (!region.ok()) Die("region: " + region.status().ToString());
  auto* rk = reinterpret_cast<uint32_t*>((*region)->data());
  auto* rv = rk + n;
  RegionSort keys_sort;
  keys_sort.keys = RegionRef{"shm-bench", 0, n, v1::ELEMENT_TYPE_UINT32};
  auto run = [&](const RegionSort& sort) {
    auto engine = client.SortRegion(sort);
    if (!engine.ok()) Die("region sort: " + engine.status().ToString());
  };
  Times shm_keys = Measure(
      repeat, [&] { std::memcpy(rk, keys_in.data(), bytes); }, [&] { run(keys_sort); },
      [&] { check_keys(rk, nullptr); });
  Row(absl::StrCat("system region, keys", (*region)->pinned() ? " (pinned)" : " (not pinned)"),
      shm_keys, local_pinned);
  RegionSort pairs_sort = keys_sort;
  pairs_sort.values = RegionRef{"shm-bench", bytes, n, v1::ELEMENT_TYPE_UINT32};
  Times shm_pairs = Measure(
      repeat,
      [&] {
        std::memcpy(rk, keys_in.data(), bytes);
        std::memcpy(rv, values_in.data(), bytes);
      },
      [&] { run(pairs_sort); }, [&] { check_keys(rk, rv); });
  Row("system region, keys + u32 values", shm_pairs);

  if (cuda) {
    void* device = sortd::bench::DeviceAlloc(bytes);
    char handle[64];
    if (device == nullptr || !sortd::bench::DeviceIpcHandle(device, handle)) Die("cudaIpcGetMemHandle");
    if (!client.RegisterCudaRegion("shm-bench-gpu", handle, 0, bytes).ok()) {
      Die("RegisterCudaRegion refused (sortd --shared_memory=system,cuda?)");
    }
    std::vector<uint32_t> back(n);
    RegionSort gpu_sort;
    gpu_sort.keys = RegionRef{"shm-bench-gpu", 0, n, v1::ELEMENT_TYPE_UINT32};
    Times gpu = Measure(
        repeat,
        [&] {
          if (!sortd::bench::CopyToDevice(device, keys_in.data(), bytes)) Die("cudaMemcpy");
        },
        [&] { run(gpu_sort); },
        [&] {
          if (!sortd::bench::CopyToHost(back.data(), device, bytes)) Die("cudaMemcpy");
          check_keys(back.data(), nullptr);
        });
    Row("CUDA IPC region, keys (device memory)", gpu, local_pinned);
    client.UnregisterRegion("shm-bench-gpu").IgnoreError();
    sortd::bench::DeviceFree(device);
  }

  double grpc_best = 0;
  if (absl::GetFlag(FLAGS_grpc)) {
    std::vector<uint32_t> keys(n), out(n);
    Times t = Measure(
        std::min(repeat, 3), [&] { std::memcpy(keys.data(), keys_in.data(), bytes); },
        [&] {
          auto engine = client.SortInto<uint32_t>(keys, absl::MakeSpan(out));
          if (!engine.ok()) Die("SortInto: " + engine.status().ToString());
        },
        [&] { check_keys(out.data(), nullptr); });
    grpc_best = t.best();
    Row("gRPC payload (client default: sort session)", t, local_pinned);
  }
  if (absl::GetFlag(FLAGS_chunked)) {
    Times t = Measure(
        1, [] {},
        [&] {
          sortd::client::ClientOptions options;
          options.session_min_bytes = 0;  // SortChunked, one stream
          SortClient chunked(grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(),
                                                       sortd::client::MakeChannelArguments(options)),
                             options);
          auto result = chunked.Sort<uint32_t>(keys_in);
          if (!result.ok()) Die("SortChunked: " + result.status().ToString());
          check_keys(result->keys.data(), nullptr);
        },
        [] {});
    Row("gRPC payload (SortChunked, one stream)", t, local_pinned);
  }
  std::printf("\nsystem region vs gRPC payload: %.1fx faster\n",
              grpc_best > 0 ? grpc_best / shm_keys.best() : 0.0);
  region->reset();

  // 4 KiB requests: inline payloads against a region, same threads.
  const int threads = absl::GetFlag(FLAGS_small_threads);
  const double seconds = absl::GetFlag(FLAGS_small_seconds);
  constexpr size_t kSmall = 1024;
  const std::vector<uint32_t> small_in = RandomU32(kSmall, 3);
  const double inline_rate = Rate(target, threads, seconds, [&](int, SortClient& c) {
    auto result = c.Sort<uint32_t>(small_in);
    if (!result.ok() || !Sorted(result->keys.data(), kSmall)) Die("small inline sort");
  });
  auto small_region = SharedRegion::Create(client, "shm-bench-small", threads * kSmall * 4);
  if (!small_region.ok()) Die("small region: " + small_region.status().ToString());
  const double region_rate = Rate(target, threads, seconds, [&](int t, SortClient& c) {
    auto keys = (*small_region)->span<uint32_t>(kSmall, t * kSmall * 4);
    std::memcpy(keys.data(), small_in.data(), kSmall * 4);
    auto engine = c.SortInRegion(**small_region, keys);
    if (!engine.ok() || !Sorted(keys.data(), kSmall)) Die("small region sort");
  });
  std::printf("\n| 4 KiB Sort, %d threads | requests/s |\n|---|---|\n| inline payload | %.0f |\n"
              "| system region | %.0f (%.2fx) |\n",
              threads, inline_rate, region_rate, region_rate / inline_rate);
  return 0;
}
