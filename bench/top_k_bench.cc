// cpu::TopK (issue #53) against the CPU engine's full sort of the same keys,
// keys only and with their indices (what a top-k answer holds), uniform
// random u32 and f32 keys, every hardware thread. The #53 CPU target:
// 2^24 keys, k = 100, >= 5x our full CPU sort.
//   build/bench/sortd_top_k_bench --benchmark_filter=. [--benchmark_repetitions=3]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/types/span.h"
#include "benchmark/benchmark.h"
#include "core/cpu/cpu_engine.h"
#include "core/cpu/top_k.h"
#include "core/engine.h"
#include "core/types.h"

namespace {

using Clock = std::chrono::steady_clock;

template <typename T>
std::vector<T> RandomKeys(size_t n) {
  std::mt19937_64 rng(0x70cc + n);
  std::vector<T> v(n);
  for (auto& x : v) {
    if constexpr (std::is_floating_point_v<T>) {
      x = static_cast<T>(static_cast<int64_t>(rng() % 2000000001) - 1000000000) / 7;
    } else {
      x = static_cast<T>(rng());
    }
  }
  return v;
}

template <typename T>
void BM_TopK(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const size_t k = static_cast<size_t>(state.range(1));
  const std::vector<T> keys = RandomKeys<T>(n);
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (auto _ : state) {
    sortd::cpu::TopKResult<T> r = sortd::cpu::TopK<T>(keys, k, sortd::SortOrder::kDescending, threads);
    benchmark::DoNotOptimize(r.indices.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}

// Rows (the retrieval shape): every row's first k, one thread, row after
// row, as the TopK RPC's per-segment tasks run them.
template <typename T>
void BM_TopKRows(benchmark::State& state) {
  const size_t rows = static_cast<size_t>(state.range(0));
  const size_t cols = static_cast<size_t>(state.range(1));
  const size_t k = static_cast<size_t>(state.range(2));
  const std::vector<T> keys = RandomKeys<T>(rows * cols);
  for (auto _ : state) {
    for (size_t r = 0; r < rows; ++r) {
      sortd::cpu::TopKResult<T> top = sortd::cpu::TopK<T>(
          absl::MakeConstSpan(keys.data() + r * cols, cols), k, sortd::SortOrder::kDescending);
      benchmark::DoNotOptimize(top.indices.data());
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(rows * cols));
}

// The full sort a user does instead: copy (not timed), sort (with indices).
template <typename T>
void BM_FullSort(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const bool with_indices = state.range(1) != 0;
  const std::vector<T> keys = RandomKeys<T>(n);
  std::vector<T> work(n);
  std::vector<uint64_t> indices(with_indices ? n : 0);
  std::unique_ptr<sortd::SortEngine> engine = sortd::CreateCpuEngine(sortd::CpuEngineOptions{});
  for (auto _ : state) {
    std::copy(keys.begin(), keys.end(), work.begin());
    benchmark::ClobberMemory();
    const auto t0 = Clock::now();
    const absl::Status s = engine->SortNumeric(sortd::NumericSpan(work.data(), n),
                                               sortd::SortOrder::kDescending,
                                               absl::MakeSpan(indices));
    benchmark::ClobberMemory();
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}

BENCHMARK(BM_TopK<uint32_t>)->Args({1 << 24, 100})->Args({1 << 24, 10000})->Args({1 << 20, 100})
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TopK<float>)->Args({1 << 24, 100})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TopKRows<float>)->Args({4096, 1024, 10})->Args({4096, 1024, 100})
    ->Args({4096, 256, 100})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FullSort<uint32_t>)->Args({1 << 24, 0})->Args({1 << 24, 1})->Args({1 << 20, 1})
    ->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_FullSort<float>)->Args({1 << 24, 1})->Unit(benchmark::kMillisecond)->UseManualTime();

}  // namespace

BENCHMARK_MAIN();
