// Delta-coded key blocks (proto/sortd/v1/sorted_blocks.h): the device
// encoder (core/cuda/key_blocks.cuh, CUDA events, median of --repeats)
// against the CPU encoder, and the CPU decoder on 1..--threads threads
// (blocks split between threads, as the C++ client splits them over its
// connections), on sorted uniform keys. Checks that the device bytes equal
// the CPU's and that decoding gives the keys back; prints a table last.
//   sortd_key_blocks_bench [--log2 28] [--repeats 10] [--threads 16]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/cuda/key_blocks.cuh"
#include "sortd/v1/sorted_blocks.h"

namespace {

namespace blocks = sortd::v1::blocks;

#define CHECK(call)                                                                       \
  do {                                                                                    \
    cudaError_t e = (call);                                                               \
    if (e != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e)); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// n sorted keys: the order statistics of n uniform words (gaps drawn with
// the mean a uniform sample of that size has).
template <typename W>
std::vector<W> SortedUniform(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double mean_gap = sizeof(W) == 4 ? 4294967296.0 / n : 18446744073709551616.0 / n;
  std::exponential_distribution<double> gap(1.0 / mean_gap);
  std::vector<W> keys(n);
  W at = 0;
  for (W& k : keys) {
    at = static_cast<W>(at + static_cast<W>(gap(rng)));
    k = at;
  }
  return keys;
}

struct Row {
  std::string what;
  double gbps;
  std::string note;
};

template <typename W>
void Run(int log2, int repeats, int max_threads, std::vector<Row>* rows) {
  const size_t n = size_t{1} << log2;
  const size_t bytes = n * sizeof(W);
  const std::string name = std::string(sizeof(W) == 4 ? "u32" : "u64") + " 2^" + std::to_string(log2);
  const std::vector<W> keys = SortedUniform<W>(n, 42);
  const blocks::KeyCoding coding{static_cast<int>(sizeof(W)), blocks::KeyCoding::Kind::kUnsigned, false};

  // CPU encoder, one thread.
  std::vector<uint8_t> host(blocks::MaxEncodedBytes(n, sizeof(W)));
  size_t host_bytes = 0;
  std::vector<double> t;
  for (int r = 0; r < std::max(1, repeats / 3); ++r) {
    const auto start = std::chrono::steady_clock::now();
    host_bytes = blocks::EncodeBlocks(keys.data(), n, coding, host.data());
    t.push_back(Seconds(start));
  }
  char ratio[64];
  std::snprintf(ratio, sizeof(ratio), "ratio %.3f", static_cast<double>(host_bytes) / bytes);
  rows->push_back({name + " encode, CPU 1 thread", bytes / Median(t) / 1e9, ratio});

  // Device encoder.
  void* d_keys;
  uint64_t* d_offsets;
  uint8_t* d_body;
  CHECK(cudaMalloc(&d_keys, bytes));
  CHECK(cudaMalloc(&d_offsets, sortd::cuda::KeyBlockOffsetsBytes(n)));
  CHECK(cudaMalloc(&d_body, bytes + blocks::MaxEncodedBytes(n, sizeof(W))));
  CHECK(cudaMemcpy(d_keys, keys.data(), bytes, cudaMemcpyHostToDevice));
  sortd::cuda::KeyBlocksProblem p;
  p.d_keys = d_keys;
  p.num_items = n;
  p.width = sizeof(W);
  cudaEvent_t a, b, c;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  CHECK(cudaEventCreate(&c));
  std::vector<double> size_ms, write_ms;
  for (int r = 0; r < repeats + 2; ++r) {
    CHECK(cudaEventRecord(a));
    CHECK(sortd::cuda::SizeKeyBlocks(p, d_offsets, nullptr));
    CHECK(cudaEventRecord(b));
    CHECK(sortd::cuda::WriteKeyBlocks(p, d_offsets, d_body, nullptr));
    CHECK(cudaEventRecord(c));
    CHECK(cudaEventSynchronize(c));
    float ab, bc;
    CHECK(cudaEventElapsedTime(&ab, a, b));
    CHECK(cudaEventElapsedTime(&bc, b, c));
    if (r >= 2) {  // warm-up
      size_ms.push_back(ab);
      write_ms.push_back(bc);
    }
  }
  uint64_t total = 0;
  CHECK(cudaMemcpy(&total, d_offsets + sortd::cuda::KeyBlockCount(n), 8, cudaMemcpyDeviceToHost));
  std::vector<uint8_t> device(total);
  CHECK(cudaMemcpy(device.data(), d_body, total, cudaMemcpyDeviceToHost));
  const bool same = total == host_bytes && std::memcmp(device.data(), host.data(), total) == 0;
  const double encode_s = (Median(size_ms) + Median(write_ms)) / 1e3;
  char split[96];
  std::snprintf(split, sizeof(split), "size %.3f ms + write %.3f ms; bytes %s the CPU's",
                Median(size_ms), Median(write_ms), same ? "equal" : "DIFFER FROM");
  rows->push_back({name + " encode, GPU", bytes / encode_s / 1e9, split});
  cudaFree(d_keys);
  cudaFree(d_offsets);
  cudaFree(d_body);

  // CPU decoder on k threads, each a contiguous run of blocks (offsets
  // found by walking the headers once, as a client knows them per part).
  std::vector<size_t> starts;
  for (size_t at = 0; at < host_bytes;) {
    starts.push_back(at);
    uint32_t payload;
    std::memcpy(&payload, host.data() + at + 8, 4);
    at += blocks::kHeaderBytes + payload;
  }
  starts.push_back(host_bytes);
  const size_t nblocks = starts.size() - 1;
  std::vector<W> out(n);
  for (int k = 1; k <= max_threads; k *= 2) {
    std::vector<double> dt;
    bool ok = true;
    for (int r = 0; r < std::max(1, repeats / 3); ++r) {
      std::fill(out.begin(), out.end(), W{0});
      const auto start = std::chrono::steady_clock::now();
      std::vector<std::thread> threads;
      std::vector<int> good(k, 1);
      for (int i = 0; i < k; ++i) {
        threads.emplace_back([&, i] {
          const size_t b0 = nblocks * i / k, b1 = nblocks * (i + 1) / k;
          if (b0 == b1) return;
          const uint64_t first = b0 * blocks::kBlockKeys;
          const uint64_t count = std::min<uint64_t>(n, b1 * blocks::kBlockKeys) - first;
          good[i] = blocks::DecodeBlocks(host.data() + starts[b0], starts[b1] - starts[b0], coding,
                                         b0, count, out.data() + first)
                        .ok();
        });
      }
      for (std::thread& th : threads) th.join();
      dt.push_back(Seconds(start));
      for (int g : good) ok = ok && g;
    }
    ok = ok && out == keys;
    rows->push_back({name + " decode, CPU " + std::to_string(k) + " threads", bytes / Median(dt) / 1e9,
                     ok ? "keys back" : "WRONG KEYS"});
  }
}

}  // namespace

int main(int argc, char** argv) {
  int log2 = 28, repeats = 10, threads = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (flag == "--log2") log2 = v;
    else if (flag == "--repeats") repeats = v;
    else if (flag == "--threads") threads = v;
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::vector<Row> rows;
  Run<uint32_t>(log2, repeats, threads, &rows);
  Run<uint64_t>(log2 - 1, repeats, threads, &rows);
  std::printf("\nkey blocks on %s, %u CPU threads available (GB/s of keys)\n", prop.name,
              std::thread::hardware_concurrency());
  std::printf("| step | GB/s | note |\n|---|---|---|\n");
  for (const Row& r : rows) std::printf("| %s | %.1f | %s |\n", r.what.c_str(), r.gbps, r.note.c_str());
  return 0;
}
