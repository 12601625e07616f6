// Table sorts by packed keys (core/table_keys.h) against the pairs sort they
// reduce to, through one Dispatcher (auto: the GPU engine where one serves),
// from host memory both: the issue's "table of (int32, float32 descending,
// nulls in both) -> permutation, >= 0.9x our u64 pairs rate for the same row
// count". Each table answer is checked row against row (adjacent rows in
// order by the keys, the permutation a permutation). Median of --repeats.
//
//   sortd_table_keys_bench [--log2=26] [--repeats=5] [--engine=auto|cpu]
// With a GPU it also prints each one's device time alone (its events:
// after the upload, before the download), the kernel-level comparison.
// PAIRS_PACKED=1 gives the pairs sort the table's packed words instead of
// random ones (how much the words' distribution costs the engine).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/dispatcher.h"
#include "core/table_keys.h"

namespace sortd {
namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

bool Valid(const std::vector<uint8_t>& bits, size_t r) { return (bits[r / 8] >> (r % 8)) & 1; }

// The device's share of the last GPU sort (from its events: the sort,
// after the upload and before the download).
class DeviceTimes final : public GpuEngineObserver {
 public:
  void OnGpuSort(int, double h2d, double kernel, double d2h, size_t) override {
    h2d_ = h2d;
    kernel_ = kernel;
    d2h_ = d2h;
  }
  void OnGpuFallback(int, GpuFallbackReason) override {}
  double h2d_ = 0, kernel_ = 0, d2h_ = 0;
};

int Run(int argc, char** argv) {
  int log2 = 26, repeats = 5;
  std::string engine = "auto";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--log2=", 0) == 0) log2 = std::stoi(a.substr(7));
    if (a.rfind("--repeats=", 0) == 0) repeats = std::stoi(a.substr(10));
    if (a.rfind("--engine=", 0) == 0) engine = a.substr(9);
  }
  const size_t n = size_t{1} << log2;
  DispatcherOptions options;
  options.engine = *ParseEngineChoice(engine);
  DeviceTimes times;
  options.gpu.observer = &times;
  auto dispatcher = Dispatcher::Create(options);
  if (!dispatcher.ok()) {
    std::fprintf(stderr, "%s\n", dispatcher.status().ToString().c_str());
    return 1;
  }
  Dispatcher& d = **dispatcher;
  std::mt19937_64 rng(1);
  std::vector<int32_t> a(n);
  std::vector<float> b(n);
  std::vector<uint8_t> va((n + 7) / 8), vb((n + 7) / 8);
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<int32_t>(rng());
    b[i] = static_cast<float>(rng() >> 40) / static_cast<float>(1 << 24);  // [0, 1)
  }
  for (auto& x : va) x = static_cast<uint8_t>(rng() | rng() | rng());  // ~1/8 null
  for (auto& x : vb) x = static_cast<uint8_t>(rng() | rng() | rng());
  TableKey ka, kb;
  ka.kind = kb.kind = TableKey::Kind::kNumeric;
  ka.type = DataType::kInt32;
  kb.type = DataType::kFloat32;
  ka.data = a.data();
  kb.data = b.data();
  ka.validity = va.data();
  kb.validity = vb.data();
  kb.order = SortOrder::kDescending;
  kb.nulls = NullPlacement::kFirst;
  const std::vector<TableKey> keys = {ka, kb};
  const int threads = DefaultPackingThreads();
  const TableKeyPacking packing = TableKeyPacking::Plan(keys, n, threads);

  std::vector<uint32_t> rows(n);
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<uint64_t> packed(n);
  // The host's share: the scan (ranges and nulls) and the packing pass.
  const auto plan0 = std::chrono::steady_clock::now();
  (void)TableKeyPacking::Plan(keys, n, threads);
  const double plan_s = Seconds(plan0);
  const auto build0 = std::chrono::steady_clock::now();
  packing.Build(0, rows, packed.data(), threads, /*in_order=*/true);
  const double build_s = Seconds(build0);
  std::vector<double> table_s, table_dev;
  EngineKind table_engine = EngineKind::kCpu;
  for (int r = 0; r <= repeats; ++r) {
    std::iota(rows.begin(), rows.end(), 0);
    const auto t0 = std::chrono::steady_clock::now();
    auto ran = SortRowsByPackedKeys(d, keys, absl::MakeSpan(rows), threads);
    if (!ran.ok()) {
      std::fprintf(stderr, "table: %s\n", ran.status().ToString().c_str());
      return 1;
    }
    if (r > 0) table_s.push_back(Seconds(t0));  // the first is a warm-up
    if (r > 0) table_dev.push_back(times.kernel_);
    table_engine = *ran;
  }
  // Check: a permutation, and adjacent rows in order (a nulls last; b
  // descending, nulls first; ties by row).
  std::vector<uint8_t> seen(n, 0);
  bool ok = true;
  for (uint32_t r : rows) ok &= !seen[r]++;
  auto before = [&](uint32_t x, uint32_t y) {  // x must not sort after y
    const bool nx = !Valid(va, x), ny = !Valid(va, y);
    if (nx != ny) return ny;
    if (!nx && a[x] != a[y]) return a[x] < a[y];
    const bool mx = !Valid(vb, x), my = !Valid(vb, y);
    if (mx != my) return mx;
    if (!mx && b[x] != b[y]) return b[x] > b[y];
    return x < y;
  };
  for (size_t i = 1; i < n && ok; ++i) ok &= before(rows[i - 1], rows[i]);

  std::vector<uint64_t> words(n), pair_keys(n);
  std::vector<uint32_t> values(n);
  for (auto& w : words) w = rng();
  if (getenv("PAIRS_PACKED")) words = packed;
  std::vector<double> pairs_s, pairs_dev;
  EngineKind pairs_engine = EngineKind::kCpu;
  for (int r = 0; r <= repeats; ++r) {
    pair_keys = words;
    std::iota(values.begin(), values.end(), 0);
    const auto t0 = std::chrono::steady_clock::now();
    auto ran = d.SortPairsNumeric(NumericSpan(pair_keys.data(), n), values.data(), 4,
                                  SortOrder::kAscending);
    if (!ran.ok()) {
      std::fprintf(stderr, "pairs: %s\n", ran.status().ToString().c_str());
      return 1;
    }
    if (r > 0) pairs_s.push_back(Seconds(t0));
    if (r > 0) pairs_dev.push_back(times.kernel_);
    pairs_engine = *ran;
  }
  ok &= std::is_sorted(pair_keys.begin(), pair_keys.end());

  const char* names[] = {"cpu", "gpu-radix", "gpu-merge", "gpu-segmented"};
  const double ts = Median(table_s), ps = Median(pairs_s);
  std::printf("2^%d rows, from host memory\n%-58s %10s %12s %s\n", log2, "workload", "seconds", "Mrows/s", "engine");
  std::printf("%-58s %10.4f %12.1f %s  (%d word(s), %d bits)\n",
              "table (int32 nulls, float32 desc nulls first) -> perm", ts, n / ts / 1e6,
              names[static_cast<int>(table_engine)], packing.words(), packing.bits(0));
  std::printf("%-58s %10.4f %12.1f %s\n", "u64/u32 pairs, the same rows", ps, n / ps / 1e6,
              names[static_cast<int>(pairs_engine)]);
  std::printf("of the table's time: scan %.4f s, packing %.4f s (%d threads)\n", plan_s, build_s,
              threads);
  std::printf("table / pairs rate: %.2fx   check: %s\n", ps / ts, ok ? "ok" : "WRONG");
  if (table_engine != EngineKind::kCpu && pairs_engine != EngineKind::kCpu) {
    // On the device alone (no transfers): the table's scan, layout
    // read-back, packing and sort against the pairs sort.
    const double td = Median(table_dev), pd = Median(pairs_dev);
    std::printf("on the device: table %.3f ms (%.1f Mrows/s), pairs %.3f ms (%.1f Mrows/s): %.2fx\n",
                td * 1e3, n / td / 1e6, pd * 1e3, n / pd / 1e6, pd / td);
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace sortd

int main(int argc, char** argv) { return sortd::Run(argc, argv); }
