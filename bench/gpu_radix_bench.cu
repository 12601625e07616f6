// OneSweep radix sort vs cub::DeviceRadixSort in the same process: CUDA
// events, warm-up, median of repeats, fresh random data, results compared on
// the GPU for every timed size. Prints a table of Gkeys/s and ratios last.
//   sortd_gpu_radix_bench [--max_log2=28] [--repeats=7] [--only='u32 keys']
//   sortd_gpu_radix_bench --tune [--variant=SUBSTRING] [--tune_log2=14,16,18]
//                                  (alternative pass tunings side by side, at
//                                   2^24 and --max_log2 or the sizes given)
//   sortd_gpu_radix_bench --small  (the library call at 1..65536 keys: host
//                                   time of call + stream sync, vs CUB)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <cub/device/device_radix_sort.cuh>

#include "bench/gpu_bench_util.cuh"
#include "core/cuda/radix_sort.cuh"

namespace {

// Finite floats: clear the exponent's top bit so no NaN/inf appears.
__global__ void MakeFinite32(uint32_t* w, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) w[i] &= 0xBFFFFFFFu;
}

// Presorted inputs (32-bit words; distinct keys): in order, in reverse
// order, and 8 sorted runs one after another (interleaved values).
enum class Order { kRandom, kSorted, kReversed, kRuns8 };

__global__ void FillOrdered(uint32_t* w, size_t n, Order order) {
  const size_t run = (n + 7) / 8;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    switch (order) {
      case Order::kSorted: w[i] = static_cast<uint32_t>(i); break;
      case Order::kReversed: w[i] = static_cast<uint32_t>(n - 1 - i); break;
      default: w[i] = static_cast<uint32_t>((i % run) * 8 + i / run); break;
    }
  }
}

// How random keys are spread: uniform over the key bits; drawn from 16 or
// 3 distinct values (ties: few digits per pass; with 3, each digit of a
// pass holds about a third of the keys); skewed (each bit set with
// probability 1/8: the AND of three random words).
enum class Spread { kUniform, kDistinct16, kDistinct3, kSkewed };

// Maps each key (`words` 32-bit words) to one of `count` fixed random keys,
// chosen by its first word.
__global__ void MakeDistinct(uint32_t* w, size_t keys, int words, uint32_t count) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < keys; i += (size_t)gridDim.x * blockDim.x) {
    const uint32_t pick = w[i * words] % count;
    for (int k = 0; k < words; ++k) {
      uint32_t x = (pick * words + k) * 0x9E3779B9u + 0x7F4A7C15u;
      x ^= x >> 16; x *= 0x85EBCA6Bu; x ^= x >> 13; x *= 0xC2B2AE35u; x ^= x >> 16;
      w[i * words + k] = x;
    }
  }
}

// w[i] &= another random word (run twice after a fill: bits set with p = 1/8).
__global__ void AndRandom(uint32_t* w, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    x ^= x >> 31; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 27; x *= 0x94D049BB133111EBull; x ^= x >> 33;
    w[i] &= static_cast<uint32_t>(x);
  }
}

struct Case {
  std::string name;
  sortd::cuda::RadixKeyType key;
  int key_bytes;
  int value_bytes;
  int bits;  // significant key bits (32/64 = uniform)
  Order order = Order::kRandom;  // u32 keys only when not random
  // Sorted input may stay in the input (RadixSortProblem::allow_result_in_input;
  // CUB's DoubleBuffer API has the same freedom but sorts all the same).
  bool result_in_input = false;
  Spread spread = Spread::kUniform;  // random keys only
  bool descending = false;
};

using SortFn = cudaError_t (*)(void*, size_t&, const sortd::cuda::RadixSortProblem&, cudaStream_t,
                               sortd::cuda::RadixSortStats*);

// The library's sort with every device pinned to one profile and ranking
// (radix_sort.cuh), back to auto after: the library's own kernels, so the
// bench builds none of them again.
template <sortd::cuda::RadixTuning kTuning, sortd::cuda::RadixRanks kRanks>
cudaError_t SortPinned(void* temp, size_t& bytes, const sortd::cuda::RadixSortProblem& p, cudaStream_t stream,
                       sortd::cuda::RadixSortStats* stats) {
  sortd::cuda::PinRadixTuning(kTuning);
  sortd::cuda::PinRadixRanks(kRanks);
  const cudaError_t err = sortd::cuda::RadixSort(temp, bytes, p, stream, stats);
  sortd::cuda::PinRadixTuning(sortd::cuda::RadixTuning::kAuto);
  sortd::cuda::PinRadixRanks(sortd::cuda::RadixRanks::kAuto);
  return err;
}
// The library's sort with every pass on the plain kernel (no concentrated
// passes): the before of the ties rows.
cudaError_t SortPlainPasses(void* temp, size_t& bytes, const sortd::cuda::RadixSortProblem& p,
                            cudaStream_t stream, sortd::cuda::RadixSortStats* stats) {
  sortd::cuda::RadixSortProblem plain = p;
  plain.concentrated_passes = false;
  return sortd::cuda::RadixSort(temp, bytes, plain, stream, stats);
}

// Every pass run, nothing read back (no pass skipping, no presorted
// check, no plan round trip; integer keys): what the read-back costs.
cudaError_t SortWithoutReadBack(void* temp, size_t& bytes, const sortd::cuda::RadixSortProblem& p,
                                cudaStream_t stream, sortd::cuda::RadixSortStats* stats) {
  sortd::cuda::RadixSortProblem all = p;
  all.skip_trivial_passes = false;
  return sortd::cuda::RadixSort(temp, bytes, all, stream, stats);
}

struct Variant {
  const char* name;
  SortFn fn;
};

// Only the library's own kernels: a variant instantiating a policy set of
// its own (detail::RadixSortTuned<Policy32, Policy64>) costs minutes of
// every build, CI's included, so such experiments live in a branch or git
// history (the last, the h100 profile of 2026-11-28, until 6f9cb0f; earlier
// ones before 29cc7ec).
using sortd::cuda::RadixRanks;
using sortd::cuda::RadixTuning;
const Variant kVariants[] = {
    {"default (this GPU's)", &sortd::cuda::RadixSort},
    {"plain passes", &SortPlainPasses},
    {"no read-back", &SortWithoutReadBack},
    // Each profile pinned, whatever this GPU would choose (radix_tuning.cuh).
    {"h100 profile", &SortPinned<RadixTuning::kH100, RadixRanks::kCountOrder>},
    {"h200 profile", &SortPinned<RadixTuning::kH200, RadixRanks::kCountOrder>},
    // Every pass's ranks matched: the fallback of devices that fail the
    // count-order check (the H200 profile's tiles, whatever the GPU; the
    // h100 profile is the same today, so this is also the before of count
    // order on an H100).
    {"h200 matched ranks", &SortPinned<RadixTuning::kH200, RadixRanks::kMatched>},
};

struct Row {
  std::string name;
  size_t n;
  double ours_gkeys, cub_gkeys;
  int passes;
  bool match;
};

double Median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename Key, typename Value>
double TimeCub(void* d_temp, size_t temp_bytes, const void* kin, void* kout, const void* vin, void* vout,
               size_t n, bool descending, int repeats, cudaEvent_t start, cudaEvent_t stop) {
  std::vector<float> times;
  for (int r = 0; r < repeats + 1; ++r) {
    CHECK(cudaEventRecord(start));
    if constexpr (std::is_same_v<Value, void>) {
      if (descending) {
        CHECK(cub::DeviceRadixSort::SortKeysDescending(d_temp, temp_bytes, (const Key*)kin, (Key*)kout, n));
      } else {
        CHECK(cub::DeviceRadixSort::SortKeys(d_temp, temp_bytes, (const Key*)kin, (Key*)kout, n));
      }
    } else if (descending) {
      CHECK(cub::DeviceRadixSort::SortPairsDescending(d_temp, temp_bytes, (const Key*)kin, (Key*)kout,
                                                      (const Value*)vin, (Value*)vout, n));
    } else {
      CHECK(cub::DeviceRadixSort::SortPairs(d_temp, temp_bytes, (const Key*)kin, (Key*)kout,
                                            (const Value*)vin, (Value*)vout, n));
    }
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (r > 0) times.push_back(ms);  // first run is the warm-up
  }
  return Median(times);
}

template <typename Key, typename Value>
size_t CubTempBytes(size_t n) {
  size_t bytes = 0;
  if constexpr (std::is_same_v<Value, void>) {
    CHECK(cub::DeviceRadixSort::SortKeys(nullptr, bytes, (const Key*)nullptr, (Key*)nullptr, n));
  } else {
    CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, (const Key*)nullptr, (Key*)nullptr,
                                          (const Value*)nullptr, (Value*)nullptr, n));
  }
  return bytes;
}

// One case's device arrays: input, ours, CUB's, for keys and (vb > 0)
// values.
struct CaseArrays {
  size_t kb, vb;
  void *kin = nullptr, *kout = nullptr, *kcub = nullptr, *vin = nullptr, *vout = nullptr, *vcub = nullptr;
  CaseArrays(size_t key_bytes, size_t value_bytes) : kb(key_bytes), vb(value_bytes) {
    for (void** p : {&kin, &kout, &kcub}) CHECK(cudaMalloc(p, kb));
    if (vb) {
      for (void** p : {&vin, &vout, &vcub}) CHECK(cudaMalloc(p, vb));
    }
  }
  ~CaseArrays() {
    for (void* p : {kin, kout, kcub, vin, vout, vcub}) cudaFree(p);
  }
};

// Our problem for a case: its arrays' input into "ours".
sortd::cuda::RadixSortProblem ProblemFor(const Case& c, size_t n, const CaseArrays& a) {
  sortd::cuda::RadixSortProblem p;
  p.key_type = c.key;
  p.num_items = n;
  p.d_keys_in = a.kin;
  p.d_keys_out = a.kout;
  p.value_bytes = c.value_bytes;
  p.d_values_in = a.vin;
  p.d_values_out = a.vout;
  return p;
}

template <typename Key, typename Value>
Row RunCase(const Case& c, size_t n, int repeats, SortFn ours = &sortd::cuda::RadixSort) {
  CaseArrays arrays(n * c.key_bytes, n * c.value_bytes);
  const size_t kb = arrays.kb, vb = arrays.vb;
  void *kin = arrays.kin, *kout = arrays.kout, *kcub = arrays.kcub;
  void *vin = arrays.vin, *vout = arrays.vout, *vcub = arrays.vcub;
  const uint32_t mask = c.bits >= 32 ? 0xffffffffu : ((1u << c.bits) - 1);
  if (c.order == Order::kRandom) {
    FillRandom<<<1024, 256>>>((uint32_t*)kin, kb / 4, 12345, mask);  // narrow cases are 32-bit
    if (c.spread == Spread::kDistinct16) MakeDistinct<<<1024, 256>>>((uint32_t*)kin, n, c.key_bytes / 4, 16);
    if (c.spread == Spread::kDistinct3) MakeDistinct<<<1024, 256>>>((uint32_t*)kin, n, c.key_bytes / 4, 3);
    if (c.spread == Spread::kSkewed) {
      AndRandom<<<1024, 256>>>((uint32_t*)kin, kb / 4, 999);
      AndRandom<<<1024, 256>>>((uint32_t*)kin, kb / 4, 4242);
    }
  } else {
    FillOrdered<<<1024, 256>>>((uint32_t*)kin, n, c.order);
  }
  if (c.key == sortd::cuda::RadixKeyType::kFloat32) MakeFinite32<<<1024, 256>>>((uint32_t*)kin, n);
  if (vb) FillRandom<<<1024, 256>>>((uint32_t*)vin, vb / 4, 777, 0xffffffffu);
  CHECK(cudaGetLastError());

  sortd::cuda::RadixSortProblem p = ProblemFor(c, n, arrays);
  p.allow_result_in_input = c.result_in_input;
  p.descending = c.descending;
  size_t ours_bytes = 0;
  CHECK(ours(nullptr, ours_bytes, p, 0, nullptr));
  const size_t cub_bytes = CubTempBytes<Key, Value>(n);
  void* temp;
  CHECK(cudaMalloc(&temp, std::max(ours_bytes, cub_bytes)));

  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  std::vector<float> times;
  sortd::cuda::RadixSortStats stats;
  for (int r = 0; r < repeats + 1; ++r) {
    CHECK(cudaEventRecord(start));
    CHECK(ours(temp, ours_bytes, p, 0, &stats));
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (r > 0) times.push_back(ms);
  }
  const double ours_ms = Median(times);
  const double cub_ms = TimeCub<Key, Value>(temp, cub_bytes, kin, kcub, vin, vcub, n, c.descending, repeats, start, stop);

  unsigned long long* d_count;
  CHECK(cudaMalloc(&d_count, 8));
  CHECK(cudaMemset(d_count, 0, 8));
  const void* kres = stats.result_in_input ? kin : kout;
  const void* vres = stats.result_in_input ? vin : vout;
  CountMismatches<<<1024, 256>>>((const uint32_t*)kres, (const uint32_t*)kcub, kb / 4, d_count);
  if (vb) CountMismatches<<<1024, 256>>>((const uint32_t*)vres, (const uint32_t*)vcub, vb / 4, d_count);
  unsigned long long mismatches = 0;
  CHECK(cudaMemcpy(&mismatches, d_count, 8, cudaMemcpyDeviceToHost));

  for (void* ptr : {temp, (void*)d_count}) cudaFree(ptr);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return Row{c.name, n, n / ours_ms / 1e6, n / cub_ms / 1e6, stats.passes_run, mismatches == 0};
}

// A case with 4-byte keys, CUB told their type (it orders signed and float
// keys its own way).
template <typename Value>
Row RunFourByteKeys(const Case& c, size_t n, int repeats, SortFn ours) {
  using K = sortd::cuda::RadixKeyType;
  if (c.key == K::kFloat32) return RunCase<float, Value>(c, n, repeats, ours);
  if (c.key == K::kInt32) return RunCase<int32_t, Value>(c, n, repeats, ours);
  return RunCase<uint32_t, Value>(c, n, repeats, ours);
}

// The library call on few keys, as a caller sees it: host time from the
// call to the stream's completion (both libraries allocate nothing here;
// temp storage is sized once). Ours with the single launch, ours with it
// turned off (the general path: counts, plan read back, a launch per
// pass), and CUB; outputs compared with CUB's.
struct SmallRow {
  std::string name;
  size_t n;
  double ours_us, general_us, cub_us;
  bool single_launch, match;
};

template <typename Key, typename Value>
SmallRow RunSmall(const Case& c, size_t n, int repeats) {
  CaseArrays arrays(n * c.key_bytes, n * c.value_bytes);
  const size_t kb = arrays.kb, vb = arrays.vb;
  void *kin = arrays.kin, *kout = arrays.kout, *kcub = arrays.kcub;
  void *vin = arrays.vin, *vout = arrays.vout, *vcub = arrays.vcub;
  if (vb) FillRandom<<<64, 256>>>((uint32_t*)vin, vb / 4, 777, 0xffffffffu);
  FillRandom<<<64, 256>>>((uint32_t*)kin, kb / 4, 12345 + n, 0xffffffffu);
  if (c.key == sortd::cuda::RadixKeyType::kFloat32) MakeFinite32<<<64, 256>>>((uint32_t*)kin, n);
  CHECK(cudaDeviceSynchronize());
  const sortd::cuda::RadixSortProblem p = ProblemFor(c, n, arrays);
  sortd::cuda::RadixSortProblem general = p;
  general.single_launch_max_items = 0;
  size_t ours_bytes = 0;
  CHECK(sortd::cuda::RadixSort(nullptr, ours_bytes, p, 0));
  const size_t cub_bytes = CubTempBytes<Key, Value>(n);
  void* temp;
  CHECK(cudaMalloc(&temp, std::max(ours_bytes, cub_bytes)));
  sortd::cuda::RadixSortStats stats;
  auto cub_call = [&] {
    size_t bytes = cub_bytes;
    if constexpr (std::is_same_v<Value, void>) {
      CHECK(cub::DeviceRadixSort::SortKeys(temp, bytes, (const Key*)kin, (Key*)kcub, n));
    } else {
      CHECK(cub::DeviceRadixSort::SortPairs(temp, bytes, (const Key*)kin, (Key*)kcub, (const Value*)vin,
                                            (Value*)vcub, n));
    }
  };
  // Interleaved rounds so that clock drift hits all three alike.
  std::vector<double> ours_t, general_t, cub_t;
  for (int round = 0; round < 5; ++round) {
    ours_t.push_back(HostTime([&] { CHECK(sortd::cuda::RadixSort(temp, ours_bytes, p, 0, &stats)); },
                              repeats, 0));
    general_t.push_back(HostTime([&] { CHECK(sortd::cuda::RadixSort(temp, ours_bytes, general, 0)); },
                                 repeats, 0));
    cub_t.push_back(HostTime(cub_call, repeats, 0));
  }
  CHECK(sortd::cuda::RadixSort(temp, ours_bytes, p, 0, &stats));
  const bool match = Mismatches(kout, kcub, kb, 0) == 0 && (vb == 0 || Mismatches(vout, vcub, vb, 0) == 0);
  cudaFree(temp);
  return SmallRow{c.name, n, ::Median(ours_t) * 1e6, ::Median(general_t) * 1e6, ::Median(cub_t) * 1e6,
                  stats.single_launch, match};
}

int RunSmallTable(int repeats) {
  using K = sortd::cuda::RadixKeyType;
  const std::vector<Case> cases = {
      {"u32 keys", K::kUint32, 4, 0, 32},      {"f32 keys", K::kFloat32, 4, 0, 32},
      {"u64 keys", K::kUint64, 8, 0, 64},      {"u32/u32 pairs", K::kUint32, 4, 4, 32},
      {"u64/u32 pairs", K::kUint64, 8, 4, 64}, {"u32/u64 pairs", K::kUint32, 4, 8, 32},
  };
  std::vector<SmallRow> rows;
  for (const Case& c : cases) {
    for (size_t n : {size_t{1}, size_t{32}, size_t{256}, size_t{1024}, size_t{4096}, size_t{16384},
                     size_t{65536}}) {
      if (c.key_bytes == 4 && c.value_bytes == 0) {
        rows.push_back(c.key == K::kFloat32 ? RunSmall<float, void>(c, n, repeats)
                                            : RunSmall<uint32_t, void>(c, n, repeats));
      } else if (c.key_bytes == 4) {
        // (CUB told the value width: 8-byte values compared as 4-byte ones
        // showed as mismatches before.)
        rows.push_back(c.value_bytes == 8 ? RunSmall<uint32_t, uint64_t>(c, n, repeats)
                                          : RunSmall<uint32_t, uint32_t>(c, n, repeats));
      } else if (c.value_bytes == 0) {
        rows.push_back(RunSmall<uint64_t, void>(c, n, repeats));
      } else {
        rows.push_back(RunSmall<uint64_t, uint32_t>(c, n, repeats));
      }
    }
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("\nGPU: %s (%d SMs), CUDA runtime %d; library call, host us (call + stream sync), median\n",
              prop.name, prop.multiProcessorCount, CUDART_VERSION);
  std::printf("%-14s %6s %9s %9s %9s %11s %7s %6s\n", "case", "n", "ours", "general", "CUB",
              "ours / CUB", "single", "match");
  for (const SmallRow& r : rows) {
    std::printf("%-14s %6zu %9.1f %9.1f %9.1f %10.2fx %7s %6s\n", r.name.c_str(), r.n, r.ours_us,
                r.general_us, r.cub_us, r.ours_us / r.cub_us, r.single_launch ? "yes" : "no",
                r.match ? "yes" : "NO");
  }
  return 0;
}

}  // namespace

// Ties, skew and other orders (issue #19): few distinct digits per pass.
std::vector<Case> TiesCases() {
  using K = sortd::cuda::RadixKeyType;
  return {
      {"u32 16 distinct", K::kUint32, 4, 0, 32, Order::kRandom, false, Spread::kDistinct16},
      {"u32/u32 16 dist", K::kUint32, 4, 4, 32, Order::kRandom, false, Spread::kDistinct16},
      {"f32/u32 16 d desc", K::kFloat32, 4, 4, 32, Order::kRandom, false, Spread::kDistinct16, true},
      {"u64 16 distinct", K::kUint64, 8, 0, 64, Order::kRandom, false, Spread::kDistinct16},
      {"u32 3 distinct", K::kUint32, 4, 0, 32, Order::kRandom, false, Spread::kDistinct3},
      {"u32/u32 3 dist", K::kUint32, 4, 4, 32, Order::kRandom, false, Spread::kDistinct3},
      {"f32 16 distinct", K::kFloat32, 4, 0, 32, Order::kRandom, false, Spread::kDistinct16},
      {"f32 3 distinct", K::kFloat32, 4, 0, 32, Order::kRandom, false, Spread::kDistinct3},
      {"u32 skewed", K::kUint32, 4, 0, 32, Order::kRandom, false, Spread::kSkewed},
      {"u32/u32 skewed", K::kUint32, 4, 4, 32, Order::kRandom, false, Spread::kSkewed},
      {"i32 desc", K::kInt32, 4, 0, 32, Order::kRandom, false, Spread::kUniform, true},
  };
}

int main(int argc, char** argv) {
  int min_log2 = 16, max_log2 = 28, repeats = 7;
  std::string only, variant;
  bool tune = false, small = false;
  std::vector<int> tune_log2;  // --tune sizes (default: 2^24 and --max_log2)
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--max_log2=", 11) == 0) max_log2 = std::atoi(argv[i] + 11);
    if (std::strncmp(argv[i], "--min_log2=", 11) == 0) min_log2 = std::atoi(argv[i] + 11);
    if (std::strncmp(argv[i], "--repeats=", 10) == 0) repeats = std::atoi(argv[i] + 10);
    if (std::strncmp(argv[i], "--only=", 7) == 0) only = argv[i] + 7;
    if (std::strncmp(argv[i], "--variant=", 10) == 0) variant = argv[i] + 10;
    if (std::strcmp(argv[i], "--tune") == 0) tune = true;
    if (std::strncmp(argv[i], "--tune_log2=", 12) == 0) {
      for (const char* q = argv[i] + 12; *q != 0;) {
        tune_log2.push_back(std::atoi(q));
        while (*q != 0 && *q != ',') ++q;
        if (*q == ',') ++q;
      }
    }
    if (std::strcmp(argv[i], "--small") == 0) small = true;
  }
  if (small) return RunSmallTable(repeats * 20);
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  using K = sortd::cuda::RadixKeyType;
  const std::vector<Case> uniform = {
      {"u32 keys", K::kUint32, 4, 0, 32},      {"f32 keys", K::kFloat32, 4, 0, 32},
      {"u64 keys", K::kUint64, 8, 0, 64},      {"u32/u32 pairs", K::kUint32, 4, 4, 32},
      {"u64/u32 pairs", K::kUint64, 8, 4, 64}, {"u32/u64 pairs", K::kUint32, 4, 8, 32},
      {"u64/u64 pairs", K::kUint64, 8, 8, 64},
  };
  const std::vector<Case> narrow = {
      {"u32 keys 8-bit", K::kUint32, 4, 0, 8},
      {"u32 keys 16-bit", K::kUint32, 4, 0, 16},
      {"u32 keys 24-bit", K::kUint32, 4, 0, 24},
  };
  std::vector<Row> rows;
  auto run = [&](const Case& c, size_t n, SortFn ours = &sortd::cuda::RadixSort) {
    if (!only.empty() && c.name != only) return;
    Row r;
    if (c.key_bytes == 4 && c.value_bytes == 0) {
      r = RunFourByteKeys<void>(c, n, repeats, ours);
    } else if (c.key_bytes == 4) {
      r = c.value_bytes == 8 ? RunFourByteKeys<uint64_t>(c, n, repeats, ours)
                             : RunFourByteKeys<uint32_t>(c, n, repeats, ours);
    } else if (c.value_bytes == 0) {
      r = RunCase<uint64_t, void>(c, n, repeats, ours);
    } else {
      r = c.value_bytes == 8 ? RunCase<uint64_t, uint64_t>(c, n, repeats, ours)
                             : RunCase<uint64_t, uint32_t>(c, n, repeats, ours);
    }
    rows.push_back(r);
    std::fprintf(stderr, "%-18s 2^%-2d done\n", c.name.c_str(), __builtin_ctzll(n));
  };
  if (tune) {
    std::printf("%-16s %-26s %6s %10s %10s %7s %6s\n", "case", "tuning", "n", "ours G/s", "CUB G/s", "ratio", "match");
    std::vector<std::pair<Case, int>> tune_cases;
    for (const Case& c : uniform) {
      if (c.key == K::kFloat32) continue;
      if (!tune_log2.empty()) {
        for (int l : tune_log2) tune_cases.push_back({c, l});
        continue;
      }
      for (int l : {24, max_log2}) tune_cases.push_back({c, l});
    }
    tune_cases.push_back({narrow[1], std::min(26, max_log2)});  // 16-bit range
    for (const Case& c : TiesCases()) tune_cases.push_back({c, std::min(26, max_log2)});
    for (const auto& [c, l] : tune_cases) {
      for (const Variant& v : kVariants) {
        if (!only.empty() && c.name != only) continue;
        if (!variant.empty() && std::strstr(v.name, variant.c_str()) == nullptr) continue;
        run(c, size_t{1} << l, v.fn);
        const Row& r = rows.back();
        std::printf("%-16s %-26s 2^%-4d %10.2f %10.2f %6.2fx %6s\n", r.name.c_str(), v.name, l,
                    r.ours_gkeys, r.cub_gkeys, r.ours_gkeys / r.cub_gkeys, r.match ? "yes" : "NO");
        std::fflush(stdout);
      }
    }
    return 0;
  }
  for (const Case& c : uniform) {
    for (int l : {16, 20, 24, 26, 28, 30}) {
      if (l >= min_log2 && l <= max_log2) run(c, size_t{1} << l);
    }
  }
  for (const Case& c : narrow) run(c, size_t{1} << std::min(26, max_log2));
  const std::vector<Case> presorted = {
      {"u32 sorted", K::kUint32, 4, 0, 32, Order::kSorted},
      {"u32 sorted in place", K::kUint32, 4, 0, 32, Order::kSorted, true},
      {"u32 reversed", K::kUint32, 4, 0, 32, Order::kReversed},
      {"u32 8 sorted runs", K::kUint32, 4, 0, 32, Order::kRuns8},
      {"u32/u32 sorted", K::kUint32, 4, 4, 32, Order::kSorted},
      {"u32/u32 reversed", K::kUint32, 4, 4, 32, Order::kReversed},
  };
  for (const Case& c : presorted) run(c, size_t{1} << std::min(26, max_log2));
  for (const Case& c : TiesCases()) run(c, size_t{1} << std::min(26, max_log2));

  std::printf("\nGPU: %s (%d SMs, %d MiB L2, tuning %s), CUDA runtime %d, median of %d after warm-up\n",
              prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20,
              sortd::cuda::RadixTuningName(sortd::cuda::RadixTuningFor(0)), CUDART_VERSION, repeats);
  std::printf("%-18s %6s %10s %10s %7s %7s %6s\n", "case", "n", "ours G/s", "CUB G/s", "ratio", "passes", "match");
  for (const Row& r : rows) {
    std::printf("%-18s 2^%-4d %10.2f %10.2f %6.2fx %7d %6s\n", r.name.c_str(), __builtin_ctzll(r.n),
                r.ours_gkeys, r.cub_gkeys, r.ours_gkeys / r.cub_gkeys, r.passes, r.match ? "yes" : "NO");
  }
  return 0;
}
