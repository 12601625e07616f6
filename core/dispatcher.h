// Picks the engine for each request by key type, size and device
// availability: numeric arrays of at least --gpu_min_keys keys and
// byte-string arrays of at least --gpu_min_bytes_keys strings go to the GPU
// engine when a GPU serves, everything else to the CPU engine
// (docs/architecture.md). A request the GPU cannot take (pool memory, a
// CUDA error before output) is sorted on the CPU instead.
#ifndef SORTD_CORE_DISPATCHER_H_
#define SORTD_CORE_DISPATCHER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/cpu/cpu_engine.h"
#include "core/engine.h"
#include "core/gpu_engine.h"

namespace sortd {

enum class EngineChoice {
  kAuto,  // GPU engine when a GPU is present and built, else CPU
  kCpu,
  kGpu,   // fail at startup when no GPU engine can run
};

// Parses "auto" | "cpu" | "gpu".
absl::StatusOr<EngineChoice> ParseEngineChoice(absl::string_view text);

struct DispatcherOptions {
  EngineChoice engine = EngineChoice::kAuto;
  CpuEngineOptions cpu;
  GpuEngineOptions gpu;
};

class Dispatcher {
 public:
  // Fails (FAILED_PRECONDITION) when `engine` is kGpu and no GPU engine can
  // serve on this machine.
  static absl::StatusOr<std::unique_ptr<Dispatcher>> Create(
      const DispatcherOptions& options);

  // The engine for a numeric sort of `size` keys of `type`.
  SortEngine& ForNumeric(DataType type, size_t size);
  // Sorts on ForNumeric's engine; when the GPU engine reports UNAVAILABLE
  // (input untouched), sorts on the CPU. Returns the engine that sorted.
  absl::StatusOr<EngineKind> SortNumeric(NumericSpan keys, SortOrder order,
                                         absl::Span<uint64_t> indices);
  // Sorts keys and permutes numeric values (4 or 8 bytes each) in place on
  // ForNumeric's engine (on a GPU: the values as the radix payload, no
  // gather); UNAVAILABLE from the GPU falls back to the CPU.
  absl::StatusOr<EngineKind> SortPairsNumeric(NumericSpan keys, void* values,
                                              size_t value_width, SortOrder order);
  // Sorts in place on a GPU only, whatever the size: for arrays in device
  // memory (CUDA IPC regions), which the CPU engine cannot read. `values`
  // (optional, 4 or 8 bytes each) or `indices` (optional). FAILED_PRECONDITION
  // without a GPU engine; UNAVAILABLE when no GPU could take it (the arrays
  // must fit one GPU's pool in one piece; they are left untouched).
  // `device`: the GPU holding the memory (its CUDA ordinal), preferred.
  absl::StatusOr<EngineKind> SortOnGpu(int device, NumericSpan keys, void* values,
                                       size_t value_width, SortOrder order,
                                       absl::Span<uint64_t> indices);
  // A selection of device memory on GPU `device` (DeviceTopK):
  // FAILED_PRECONDITION without a GPU engine, UNAVAILABLE when that GPU
  // could not take it.
  absl::Status TopKOnGpu(int device, const DeviceTopK& request);
  // Sorts a numeric array while its input still arrives (sort sessions)
  // on ForNumeric's engine: on a GPU with an arriving slot free the input
  // goes to the device as it lands; on the CPU, keys-only arrays are partitioned
  // into buckets as they land and the buckets sorted at the end
  // (core/cpu/arriving_sort.h). Returns once it is
  // sorted. UNAVAILABLE when not taken (no slot, over the pool, values or
  // indices or a small array on the CPU, an error before output): the
  // arrays are untouched, so sort them with SortNumeric once complete.
  // CANCELLED: the input was abandoned.
  absl::StatusOr<EngineKind> SortArriving(const ArrivingSort& sort);
  // Batches of small numeric arrays (the server's batcher): on the GPU's
  // segmented kernel when a GPU serves, else on the CPU engine; a batch the
  // GPU cannot take (UNAVAILABLE, input untouched) runs on the CPU.
  // Returns the engine that sorted.
  absl::StatusOr<EngineKind> SortBatch(DataType type, SortOrder order,
                                       absl::Span<const BatchItem> items);
  // Whether batches currently go to a GPU.
  bool BatchesOnGpu() const { return gpu_ != nullptr && gpu_->any_healthy(); }
  // The longest array a batch of `type` keys should hold on the engine
  // batches go to (the GPU kernel's shared-memory bins; unbounded on CPU).
  size_t BatchCapacity(DataType type) const;
  // A table's rows, in their input order (rows[i] == i), ordered stably by
  // `keys` on a GPU when one serves and a pairs sort of this many rows
  // would go there (GpuEngine::SortTableRows; `planner` lays out the
  // words). UNAVAILABLE when not taken (no GPU, too few rows, over the
  // pool, an error before output): `rows` is untouched, so order them on
  // the host (core/table_keys.h).
  // `device` >= 0 (columns in that GPU's memory): on that GPU whatever
  // the size (FAILED_PRECONDITION without a GPU engine).
  absl::StatusOr<EngineKind> SortTableOnGpu(absl::Span<const TableKey> keys,
                                            absl::Span<uint32_t> rows, const PackingPlanner& planner,
                                            int device = -1);
  // The engine for a byte-string argsort of `size` keys.
  SortEngine& ForBytes(size_t size);
  // Argsorts byte strings on ForBytes's engine (GPU merge sort or CPU);
  // UNAVAILABLE from the GPU (input untouched) falls back to the CPU.
  // Returns the engine that sorted.
  absl::StatusOr<EngineKind> ArgsortBytes(absl::Span<const std::string_view> keys,
                                          SortOrder order, absl::Span<uint64_t> indices);

  // One line for the startup log: engines and GPUs found.
  const std::string& description() const { return description_; }
  // Whether numeric requests can run on a GPU.
  bool has_gpu() const { return gpu_ != nullptr; }
  // GPUs serving (0 without the GPU engine).
  int gpu_count() const { return gpu_ == nullptr ? 0 : gpu_->gpu_count(); }
  // Their CUDA ordinals.
  std::vector<int> gpu_devices() const {
    return gpu_ == nullptr ? std::vector<int>() : gpu_->devices();
  }
  // Whether a request of `size` keys of `type` goes to the GPU engine (the
  // server runs such requests on a pool of their own, so that requests
  // waiting for a GPU never hold the CPU engine's threads).
  bool RoutesToGpu(DataType type, size_t size) {
    if (gpu_ == nullptr) return false;
    SortEngine& engine = type == DataType::kBytes ? ForBytes(size) : ForNumeric(type, size);
    return &engine == gpu_.get();
  }

 private:
  Dispatcher(std::unique_ptr<SortEngine> cpu, std::unique_ptr<GpuEngine> gpu,
             size_t gpu_min_keys, size_t gpu_min_bytes_keys, std::string description);
  // call(engine); when `engine` is the GPU and it answers UNAVAILABLE (input
  // untouched), call(cpu engine). Returns the engine that sorted, gpu_kind
  // for the GPU.
  template <typename Call>
  absl::StatusOr<EngineKind> RunWithCpuFallback(SortEngine& engine, EngineKind gpu_kind,
                                                Call call);

  std::unique_ptr<SortEngine> cpu_;
  std::unique_ptr<GpuEngine> gpu_;  // null: CPU only
  size_t gpu_min_keys_;
  size_t gpu_min_bytes_keys_;
  std::string description_;
};

}  // namespace sortd

#endif  // SORTD_CORE_DISPATCHER_H_
