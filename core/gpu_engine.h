// The GPU engine: one worker per GPU (core/cuda/gpu_worker.h) behind the
// SortEngine interface. Numeric keys on the OneSweep radix core (small
// argsorts on the merge sort), batches on the segmented kernel, byte
// strings on the merge sort.
#ifndef SORTD_CORE_GPU_ENGINE_H_
#define SORTD_CORE_GPU_ENGINE_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/engine.h"
#include "core/table_layout.h"
#include "core/gpu_rotation.h"

namespace sortd {

// Why a request routed to a GPU did not complete there.
enum class GpuFallbackReason {
  kMemory,  // larger than the device pool: sorted on the CPU
  kError,   // CUDA error: sorted on the CPU, or failed if output had started
};

// Receives GPU timings and pool sizes (the server feeds them to metrics).
class GpuEngineObserver {
 public:
  virtual ~GpuEngineObserver() = default;
  virtual void OnGpuSort(int gpu, double h2d_seconds, double kernel_seconds,
                         double d2h_seconds, size_t pool_bytes) = 0;
  virtual void OnGpuFallback(int gpu, GpuFallbackReason reason) = 0;
  // A GPU left or rejoined the rotation after CUDA errors (GpuRotation).
  virtual void OnGpuRotation(int gpu, bool in_rotation) { (void)gpu, (void)in_rotation; }
};

// Where requests cross over between engines and kernels, measured per GPU
// kind on its host (docs/benchmarks.md, "Crossovers per GPU kind"): the
// radix tuning profile of the first GPU served picks them unless
// GpuEngineOptions pins them.
struct GpuDispatchProfile {
  // Numeric arrays with fewer keys run on the CPU engine under
  // --engine=auto.
  size_t min_keys = 0;
  // Numeric argsorts (indices wanted) of fewer keys, and more than the
  // radix core's single-launch path takes (kGpuRadixSingleLaunchMaxKeys),
  // run on the GPU merge sort; 0: never.
  size_t merge_argsort_max_keys = 0;
};

// Argsorts up to this many keys stay on the radix core's single-launch
// path (cuda::RadixSortProblem::single_launch_max_items), which beats the
// merge sort there (H100: 2^10 keys 3x, 2^12 even).
inline constexpr size_t kGpuRadixSingleLaunchMaxKeys = 4096;

// The profile measured for radix tuning `tuning` ("h100", "h200"; any
// other name gets the H100's, as cuda::RadixTuningFor gives GPUs with
// less L2 than the H200 class and devices it could not ask).
inline GpuDispatchProfile GpuDispatchProfileFor(std::string_view tuning) {
  if (tuning == "h200") {
    // H200 host (16 cores), re-measured 2026-11-28 with the radix core's
    // small tiles: u32 requests win on the GPU from 16384 keys (+14-28%
    // at concurrency 1 and 8, two rounds) and tie at 12288; u64 ones win
    // at 16384 (+4-17%) and lose at 12288 with concurrency 8 (it was 32768,
    // 2026-11-23, before the small tiles). The merge argsort (its argsort
    // table, host-timed): 1.02-1.30x radix from 65536 to 524288 keys, 0.82x
    // at 786432; the crossover (~590k keys) is the H100's, so is the limit
    // (it was 65536, measured before the merge sort's pairs path gained
    // ~1.4x).
    return {size_t{16384}, size_t{589824}};
  }
  // H100 host (16-core Xeon): with the radix core's small tiles
  // (2026-11-28) u32 requests win on the GPU from 16384 keys and u64 ones
  // tie there (before them, 2026-11-27: from 24576). The merge argsort
  // (its small passes search their splits in the merge kernel) wins at
  // 2^19 keys and loses at 1.5 * 2^19, before the small tiles (1.04-1.10x
  // / 0.84-0.88x radix) and after them (1.07x / 0.85x): the limit is the
  // interpolated crossover (~600k keys), rounded down to 9 * 2^16.
  return {size_t{16384}, size_t{589824}};
}

// The profile of CUDA device `device` (its radix tuning's; the H100's in
// builds without CUDA).
GpuDispatchProfile GpuDispatchProfileOfDevice(int device);

// A threshold flag's value: "auto" (the GPU's profile: nullopt) or a count.
inline absl::StatusOr<std::optional<size_t>> ParseGpuThreshold(const std::string& flag, const std::string& value) {
  if (value == "auto") return std::optional<size_t>();
  uint64_t count = 0;
  if (!absl::SimpleAtoi(value, &count)) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", value, ": must be auto or a number of keys"));
  }
  return std::optional<size_t>(static_cast<size_t>(count));
}

struct GpuEngineOptions {
  // Numeric arrays with fewer keys run on the CPU engine under
  // --engine=auto; nullopt: the GPU's profile (GpuDispatchProfile).
  std::optional<size_t> min_keys;
  // Byte-string arrays with fewer strings run on the CPU engine under
  // --engine=auto.
  size_t min_bytes_keys = size_t{1} << 14;
  // Numeric argsorts (indices wanted) of fewer keys run on the GPU merge
  // sort instead of the radix core (above its single-launch size); 0
  // disables; nullopt: the GPU's profile.
  std::optional<size_t> merge_argsort_max_keys;
  // Concurrent requests per GPU (streams with their own buffers).
  int slots_per_gpu = 2;
  // Sorts per GPU that take their input while it arrives (SortArriving;
  // streams and buffers of their own); 0 = none.
  int arriving_slots_per_gpu = 1;
  // Device memory cap of each GPU's buffer pool; 0 = 80% of free memory.
  size_t max_pool_bytes = 0;
  // Pinned staging chunk size (two per slot).
  size_t staging_chunk_bytes = size_t{8} << 20;
  // Threads waiting for a GPU sleep instead of spinning (GpuWorkerOptions).
  bool blocking_wait = false;
  // When failing GPUs leave the rotation and come back (core/gpu_rotation.h).
  GpuRotationOptions rotation;
  GpuEngineObserver* observer = nullptr;  // optional, not owned
  // Tests only: the clock of the rotation's cooldowns (null: absl::Now).
  std::function<absl::Time()> clock;
  // The radix sort's pass tuning: "auto" (each GPU's own profile, from its
  // properties), "h100" or "h200" (every GPU pinned; process-wide).
  // core/cuda/radix_tuning.cuh has the profiles.
  std::string radix_tuning = "auto";
  // How the radix sort's stable passes rank keys: "auto" (count order on
  // GPUs that pass a check of their atomics' order, else matched),
  // "count-order" or "matched" (every GPU pinned; process-wide).
  // cuda::RadixRanks has the details.
  std::string radix_ranks = "auto";
  // The CUDA ordinals to serve; empty: every visible GPU. One that is not
  // visible fails Create. (Operators pick GPUs with CUDA_VISIBLE_DEVICES;
  // tests of one GPU's behaviour pin {0} so that they hold on hosts with
  // several.)
  std::vector<int> devices;
  // Tests only: device errors to inject on GPU `device` at `step`
  // (cuda::GpuWorkerOptions::fault_hook; a cudaError_t value, 0 for none).
  // Null in production.
  std::function<int(int device, const char* step)> fault_hook;
};

// A selection of device memory (GpuEngine::TopKOnDevice): the first k keys
// of the stable sort in `order` of each segment of `keys` (rows of
// row_length, else segments cut by `offsets`, else the whole array), with
// their positions within the segment, the keys as they were and the
// values gathered into host memory, `kept` (the kept counts summed) of
// each.
struct DeviceTopK {
  NumericSpan keys;  // device memory
  SortOrder order = SortOrder::kAscending;
  uint64_t k = 0;
  size_t row_length = 0;
  absl::Span<const uint64_t> offsets;  // segments + 1, or empty
  const void* values = nullptr;        // device memory, optional
  size_t value_width = 0;              // 4 or 8 with values
  size_t kept = 0;
  uint64_t* positions = nullptr;  // host
  void* keys_out = nullptr;       // host
  void* values_out = nullptr;     // host, with values
};

// Whether this binary has the GPU radix engine compiled in.
bool GpuEngineBuilt();

// GpuEngineOptions::radix_tuning's values (cuda::RadixTuningName's names),
// here so that builds without CUDA validate the flag alike.
inline constexpr std::array<std::string_view, 3> kRadixTuningNames = {"auto", "h100", "h200"};
inline bool ValidRadixTuning(std::string_view name) {
  return std::find(kRadixTuningNames.begin(), kRadixTuningNames.end(), name) != kRadixTuningNames.end();
}
// GpuEngineOptions::radix_ranks's values (cuda::RadixRanksName's names).
inline constexpr std::array<std::string_view, 3> kRadixRanksNames = {"auto", "count-order", "matched"};
inline bool ValidRadixRanks(std::string_view name) {
  return std::find(kRadixRanksNames.begin(), kRadixRanksNames.end(), name) != kRadixRanksNames.end();
}

// Engines sorting on the GPU. SortBatch runs the segmented kernel
// (EngineKind::kGpuSegmented), ArgsortBytes the merge sort (kGpuMerge).
// SortNumeric, SortBatch and ArgsortBytes return UNAVAILABLE when the
// request could not run on the GPU and the input is untouched (out of pool
// memory, a CUDA error before output); the dispatcher then sorts on the CPU.
class GpuEngine : public SortEngine {
 public:
  // One worker per visible GPU that can be opened (the others are named in
  // description()); fails when none can.
  static absl::StatusOr<std::unique_ptr<GpuEngine>> Create(const GpuEngineOptions& options);

  // How many GPUs serve and which; one line for the startup log.
  virtual int gpu_count() const = 0;
  // The CUDA ordinals of the GPUs that serve.
  virtual std::vector<int> devices() const = 0;
  // False once every GPU has had a sticky error (the dispatcher then sends
  // everything to the CPU).
  virtual bool any_healthy() const = 0;
  virtual std::string description() const = 0;
  // The longest array SortBatch takes for keys of `type` (0: not
  // batchable; numeric types: no limit, segments past the shared-memory
  // bins are merge sorted together).
  virtual size_t BatchCapacity(DataType type) const = 0;
  // The kernel a numeric sort of `size` keys runs on (kGpuMerge for small
  // argsorts, else kGpuRadix).
  virtual EngineKind NumericKind(size_t size, bool with_indices) const = 0;
  // The thresholds in force: the first GPU's profile, where the options
  // did not pin them.
  virtual GpuDispatchProfile dispatch_profile() const = 0;
  // Copies the input to a GPU as it arrives and sorts it there once
  // complete (cuda::GpuWorker::SortArriving); blocks until then. UNAVAILABLE
  // when no GPU took it (no arriving slot free, larger than the pool, an
  // error before output): the arrays are untouched, sort them once
  // complete. CANCELLED when the input was abandoned; INTERNAL after output
  // started.
  absl::Status SortArriving(const ArrivingSort& sort) override = 0;
  // Sorts in place on GPU `device` (its CUDA ordinal) when it serves and is
  // healthy, else on the GPU picked as usual: for device memory, which is
  // read and written fastest by its own GPU. `values` (4 or 8 bytes each,
  // with value_width) or `indices`, optional. UNAVAILABLE as SortNumeric.
  virtual absl::Status SortOnDevice(int device, NumericSpan keys, void* values,
                                    size_t value_width, SortOrder order,
                                    absl::Span<uint64_t> indices) = 0;
  // A table's rows (in their input order: rows[i] == i on entry) ordered
  // stably by `keys` on a GPU (cuda::GpuWorker::SortTable): the key
  // columns uploaded as they are, each key's range scanned on the device,
  // the words laid out by `planner` and packed and sorted there; `rows`
  // receives the permutation. UNAVAILABLE as SortNumeric (the table must
  // fit one GPU's pool in one piece; `rows` is then untouched). `device`
  // >= 0: on that GPU when it serves (columns in its memory).
  virtual absl::Status SortTableRows(absl::Span<const TableKey> keys, absl::Span<uint32_t> rows,
                                     const PackingPlanner& planner, int device = -1) = 0;
  // A selection of device memory on GPU `device` (the one holding it; its
  // CUDA ordinal): core/cuda/select/top_k.cuh's kernels. UNAVAILABLE when
  // that GPU does not serve or its pool cannot hold the scratch;
  // INVALID_ARGUMENT for a problem the kernels do not take.
  virtual absl::Status TopKOnDevice(int device, const DeviceTopK& request) = 0;
};

}  // namespace sortd

#endif  // SORTD_CORE_GPU_ENGINE_H_
