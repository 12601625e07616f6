// CPU engine vs std::sort / std::stable_sort, 2^10 .. 2^24 keys (--cpu_tuning=auto|zen4|zen5|avx512|avx2:
// the engine rows' crossovers, core/cpu/cpu_tuning.h).
//
// Benchmarks are named <type>/<method>/<n>/manual_time:
//   type:   u32, f32, u64 (keys only), pairs (u32 keys + u32 values) and
//           argsort_u32/argsort_u64 (stable argsort; std baseline:
//           std::stable_sort of the positions)
//   method: engine_st (CpuEngineOptions{max_threads=1}),
//           engine_mt (default options: all hardware threads),
//           std_sort, std_stable_sort
// Every iteration sorts a fresh copy of a prepared random master array; the
// copy is made outside the timed region (manual timing around the sort
// only). items_per_second is keys sorted per second of sort time.
// For pairs the engine runs SortPairsNumeric (values sorted with their keys,
// what the service does on the CPU engine); the std baselines sort (key,
// value) structs by key.
// bytes/engine_st|engine_mt/<n>: ArgsortBytes of n random strings of 8..64
// random bytes (bench/random_strings.h, the inputs of the GPU merge sort
// benchmark), 1 Mi and 16 Mi strings.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "bench/random_strings.h"
#include "benchmark/benchmark.h"
#include "core/cpu/cpu_engine.h"
#include "core/cpu/cpu_tuning.h"
#include "core/engine.h"
#include "core/types.h"

namespace {

using Clock = std::chrono::steady_clock;

enum class Method { kEngineSt, kEngineMt, kStdSort, kStdStableSort };

const char* MethodName(Method m) {
  switch (m) {
    case Method::kEngineSt: return "engine_st";
    case Method::kEngineMt: return "engine_mt";
    case Method::kStdSort: return "std_sort";
    case Method::kStdStableSort: return "std_stable_sort";
  }
  return "?";
}

// --cpu_tuning=NAME (core/cpu/cpu_tuning.h): the crossovers the engine
// rows use; auto (this CPU's) unless given.
sortd::cpu::CpuTuning g_tuning = sortd::cpu::CpuTuning::kAuto;

std::unique_ptr<sortd::SortEngine> EngineFor(Method m) {
  sortd::CpuEngineOptions options;  // defaults: every hardware thread
  options.tuning = g_tuning;
  if (m == Method::kEngineSt) options.max_threads = 1;
  return sortd::CreateCpuEngine(options);
}

// Uniform random keys: full-range integers, finite floats spread over many
// binades (no NaNs, so std::sort's operator< is a valid baseline).
template <typename T>
std::vector<T> RandomKeys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<T> dist(T(-1e9), T(1e9));
    for (auto& x : v) x = dist(rng);
  } else {
    for (auto& x : v) x = static_cast<T>(rng());
  }
  return v;
}

// One master per (type, n), built on first use (outside any timing).
template <typename T>
const std::vector<T>& Master(size_t n) {
  static std::map<size_t, std::vector<T>> cache;
  auto it = cache.find(n);
  if (it == cache.end()) {
    it = cache.emplace(n, RandomKeys<T>(n, 0x5eed0000 + n + sizeof(T))).first;
  }
  return it->second;
}

template <typename F>
void TimeIt(benchmark::State& state, F&& f) {
  const auto t0 = Clock::now();
  f();
  benchmark::ClobberMemory();
  const auto t1 = Clock::now();
  state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
}

template <typename T>
void BM_Keys(benchmark::State& state, Method method) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<T>& master = Master<T>(n);
  std::vector<T> work(n);
  std::unique_ptr<sortd::SortEngine> engine;
  if (method == Method::kEngineSt || method == Method::kEngineMt) {
    engine = EngineFor(method);
  }
  for (auto _ : state) {
    std::copy(master.begin(), master.end(), work.begin());  // not timed
    benchmark::ClobberMemory();
    switch (method) {
      case Method::kEngineSt:
      case Method::kEngineMt:
        TimeIt(state, [&] {
          const absl::Status s = engine->SortNumeric(
              sortd::NumericSpan(work.data(), n), sortd::SortOrder::kAscending, {});
          if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
        });
        break;
      case Method::kStdSort:
        TimeIt(state, [&] { std::sort(work.begin(), work.end()); });
        break;
      case Method::kStdStableSort:
        TimeIt(state, [&] { std::stable_sort(work.begin(), work.end()); });
        break;
    }
  }
  if (!std::is_sorted(work.begin(), work.end())) {
    state.SkipWithError("output is not sorted");
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n * sizeof(T)));
}

struct KeyValue {
  uint32_t key;
  uint32_t value;
};

void BM_Pairs(benchmark::State& state, Method method) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<uint32_t>& keys_master = Master<uint32_t>(n);
  std::vector<uint32_t> values_master(n);
  for (size_t i = 0; i < n; ++i) values_master[i] = static_cast<uint32_t>(i * 2654435761u);

  if (method == Method::kEngineSt || method == Method::kEngineMt) {
    // What the service does for numeric pairs on the CPU engine
    // (server/wire/sort_ops.cc): SortPairsNumeric, in place.
    auto engine = EngineFor(method);
    std::vector<uint32_t> keys(n);
    std::vector<uint32_t> values(n);
    for (auto _ : state) {
      std::copy(keys_master.begin(), keys_master.end(), keys.begin());  // not timed
      std::copy(values_master.begin(), values_master.end(), values.begin());
      benchmark::ClobberMemory();
      TimeIt(state, [&] {
        const absl::Status s = engine->SortPairsNumeric(sortd::NumericSpan(keys.data(), n), values.data(),
                                                        sizeof(uint32_t), sortd::SortOrder::kAscending);
        if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
      });
    }
    // Against the stable sort of the (key, value) pairs.
    std::vector<KeyValue> expected(n);
    for (size_t i = 0; i < n; ++i) expected[i] = {keys_master[i], values_master[i]};
    std::stable_sort(expected.begin(), expected.end(),
                     [](const KeyValue& a, const KeyValue& b) { return a.key < b.key; });
    bool ok = true;
    for (size_t i = 0; ok && i < n; ++i) ok = keys[i] == expected[i].key && values[i] == expected[i].value;
    if (!ok) state.SkipWithError("pairs output is wrong");
  } else {
    std::vector<KeyValue> master(n);
    for (size_t i = 0; i < n; ++i) master[i] = {keys_master[i], values_master[i]};
    std::vector<KeyValue> work(n);
    auto by_key = [](const KeyValue& a, const KeyValue& b) { return a.key < b.key; };
    for (auto _ : state) {
      std::copy(master.begin(), master.end(), work.begin());  // not timed
      benchmark::ClobberMemory();
      if (method == Method::kStdSort) {
        TimeIt(state, [&] { std::sort(work.begin(), work.end(), by_key); });
      } else {
        TimeIt(state, [&] { std::stable_sort(work.begin(), work.end(), by_key); });
      }
    }
    if (!std::is_sorted(work.begin(), work.end(), by_key)) {
      state.SkipWithError("output is not sorted");
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n * 8));
}

// Stable argsort (keys sorted, indices[i] = the input position of output i),
// what the service's SortIndices runs; the std baseline is std::stable_sort
// of the positions by key (std::sort is not stable). The result is checked
// against that baseline.
template <typename T>
void BM_Argsort(benchmark::State& state, Method method) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<T>& master = Master<T>(n);
  std::vector<T> work(n);
  std::vector<uint64_t> indices(n);
  std::unique_ptr<sortd::SortEngine> engine;
  if (method == Method::kEngineSt || method == Method::kEngineMt) engine = EngineFor(method);
  auto by_key = [&master](uint64_t a, uint64_t b) { return master[a] < master[b]; };
  for (auto _ : state) {
    std::copy(master.begin(), master.end(), work.begin());  // not timed
    benchmark::ClobberMemory();
    if (engine != nullptr) {
      TimeIt(state, [&] {
        const absl::Status s = engine->SortNumeric(sortd::NumericSpan(work.data(), n),
                                                   sortd::SortOrder::kAscending, absl::MakeSpan(indices));
        if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
      });
    } else {
      for (size_t i = 0; i < n; ++i) indices[i] = i;
      TimeIt(state, [&] { std::stable_sort(indices.begin(), indices.end(), by_key); });
    }
  }
  std::vector<uint64_t> expected(n);
  for (size_t i = 0; i < n; ++i) expected[i] = i;
  std::stable_sort(expected.begin(), expected.end(), by_key);
  if (indices != expected) state.SkipWithError("argsort output is wrong");
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}

void BM_Bytes(benchmark::State& state, Method method) {
  const size_t n = static_cast<size_t>(state.range(0));
  const sortd::bench::PackedStrings packed = sortd::bench::RandomStrings(n, 8, 64, 0x57a1);
  std::vector<std::string_view> keys(n);
  for (size_t i = 0; i < n; ++i) {
    keys[i] = std::string_view(reinterpret_cast<const char*>(packed.bytes.data()) + packed.offsets[i],
                               packed.offsets[i + 1] - packed.offsets[i]);
  }
  std::vector<uint64_t> indices(n);
  auto engine = EngineFor(method);
  for (auto _ : state) {
    TimeIt(state, [&] {
      const absl::Status status = engine->ArgsortBytes(keys, sortd::SortOrder::kAscending,
                                                       absl::MakeSpan(indices));
      if (!status.ok()) state.SkipWithError(status.ToString().c_str());
    });
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}

void Register() {
  const Method methods[] = {Method::kEngineSt, Method::kEngineMt,
                            Method::kStdSort, Method::kStdStableSort};
  auto sizes = [](benchmark::internal::Benchmark* b) {
    for (int log2 = 10; log2 <= 24; log2 += 2) b->Arg(int64_t{1} << log2);
    b->UseManualTime()->Unit(benchmark::kMillisecond);
  };
  for (Method m : methods) {
    sizes(benchmark::RegisterBenchmark(
        (std::string("u32/") + MethodName(m)).c_str(), BM_Keys<uint32_t>, m));
    sizes(benchmark::RegisterBenchmark(
        (std::string("f32/") + MethodName(m)).c_str(), BM_Keys<float>, m));
    sizes(benchmark::RegisterBenchmark(
        (std::string("u64/") + MethodName(m)).c_str(), BM_Keys<uint64_t>, m));
    sizes(benchmark::RegisterBenchmark(
        (std::string("pairs/") + MethodName(m)).c_str(), BM_Pairs, m));
  }
  for (Method m : {Method::kEngineSt, Method::kEngineMt, Method::kStdStableSort}) {
    sizes(benchmark::RegisterBenchmark(
        (std::string("argsort_u32/") + MethodName(m)).c_str(), BM_Argsort<uint32_t>, m));
    sizes(benchmark::RegisterBenchmark(
        (std::string("argsort_u64/") + MethodName(m)).c_str(), BM_Argsort<uint64_t>, m));
  }
  for (Method m : {Method::kEngineSt, Method::kEngineMt}) {
    benchmark::RegisterBenchmark((std::string("bytes/") + MethodName(m)).c_str(), BM_Bytes, m)
        ->Arg(int64_t{1} << 20)
        ->Arg(int64_t{1} << 24)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Our one flag, taken out before Google Benchmark reads the rest.
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    constexpr std::string_view kTuningFlag = "--cpu_tuning=";
    if (arg.substr(0, kTuningFlag.size()) == kTuningFlag) {
      const auto tuning = sortd::cpu::ParseCpuTuning(arg.substr(kTuningFlag.size()));
      if (!tuning.has_value()) {
        std::fprintf(stderr, "sortd_cpu_bench: %s: must be auto, zen4, zen5, avx512 or avx2\n", argv[i]);
        return 2;
      }
      g_tuning = *tuning;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  sortd::cpu::PinCpuTuning(g_tuning);
  std::fprintf(stderr, "CPU tuning: %s (this CPU's: %s)\n",
               sortd::cpu::CpuTuningName(sortd::cpu::ActiveCpuTuning()),
               sortd::cpu::CpuTuningName(sortd::cpu::CpuTuningForThisCpu()));
  Register();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
