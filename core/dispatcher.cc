// Engine selection: CPU engine always; the GPU radix engine for numeric
// keys when GPUs are present (auto, gpu). `gpu` refuses to start rather
// than silently running on the CPU. Byte strings stay on the CPU until the
// GPU merge sort lands (#4).
#include "core/dispatcher.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/gpu_info.h"

namespace sortd {

absl::StatusOr<EngineChoice> ParseEngineChoice(absl::string_view text) {
  if (text == "auto") return EngineChoice::kAuto;
  if (text == "cpu") return EngineChoice::kCpu;
  if (text == "gpu") return EngineChoice::kGpu;
  return absl::InvalidArgumentError(
      absl::StrCat("engine: unknown value \"", text,
                   "\" (expected auto, cpu or gpu)"));
}

absl::StatusOr<std::unique_ptr<Dispatcher>> Dispatcher::Create(
    const DispatcherOptions& options) {
  std::string gpu_error;
  std::vector<GpuDevice> gpus = ListGpus(&gpu_error);
  std::vector<std::string> gpu_names;
  for (const GpuDevice& g : gpus) {
    gpu_names.push_back(absl::StrCat(g.ordinal, ":", g.name));
  }
  const std::string gpu_text =
      gpus.empty() ? (CudaBuilt() ? "no GPU found" : "CUDA not built")
                   : absl::StrCat("GPUs ", absl::StrJoin(gpu_names, ", "));
  std::unique_ptr<GpuEngine> gpu;
  std::string description;
  if (options.engine != EngineChoice::kCpu && !gpus.empty()) {
    absl::StatusOr<std::unique_ptr<GpuEngine>> created = GpuEngine::Create(options.gpu);
    if (created.ok()) {
      gpu = std::move(*created);
    } else if (options.engine == EngineChoice::kGpu) {
      return absl::FailedPreconditionError(
          absl::StrCat("engine=gpu: cannot start the GPU engine: ", created.status().message()));
    } else {
      description = absl::StrCat("engine=cpu (GPU engine unavailable: ",
                                 created.status().message(), ")");
    }
  }
  if (options.engine == EngineChoice::kGpu && gpu == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("engine=gpu: no GPU engine can serve (", gpu_text, ")"));
  }
  // --engine=gpu sends every numeric request to the GPU; auto only those
  // of at least min_keys keys.
  const size_t min_keys = options.engine == EngineChoice::kGpu ? 0 : options.gpu.min_keys;
  if (gpu != nullptr) {
    description = absl::StrCat("engine=", options.engine == EngineChoice::kGpu ? "gpu" : "auto",
                               ": gpu_radix for numeric arrays of >= ", min_keys,
                               " keys, cpu otherwise (", gpu->description(), ")");
  } else if (description.empty()) {
    description = absl::StrCat("engine=cpu (", gpu_text, ")");
  }
  return std::unique_ptr<Dispatcher>(new Dispatcher(
      CreateCpuEngine(options.cpu), std::move(gpu), min_keys, std::move(description)));
}

Dispatcher::Dispatcher(std::unique_ptr<SortEngine> cpu, std::unique_ptr<GpuEngine> gpu,
                       size_t gpu_min_keys, std::string description)
    : cpu_(std::move(cpu)),
      gpu_(std::move(gpu)),
      gpu_min_keys_(gpu_min_keys),
      description_(std::move(description)) {}

SortEngine& Dispatcher::ForNumeric(DataType, size_t size) {
  if (gpu_ != nullptr && size >= gpu_min_keys_ && size > 0 && gpu_->any_healthy()) return *gpu_;
  return *cpu_;
}

SortEngine& Dispatcher::ForBytes(size_t) { return *cpu_; }

size_t Dispatcher::BatchCapacity(DataType type) const {
  return BatchesOnGpu() ? gpu_->BatchCapacity(type) : std::numeric_limits<size_t>::max();
}

absl::StatusOr<EngineKind> Dispatcher::SortBatch(DataType type, SortOrder order,
                                                 absl::Span<const BatchItem> items) {
  if (BatchesOnGpu()) {
    absl::Status status = gpu_->SortBatch(type, order, items);
    if (status.ok()) return EngineKind::kGpuSegmented;
    if (!absl::IsUnavailable(status)) return status;
    // The GPU left the inputs untouched: the CPU serves this batch.
  }
  absl::Status status = cpu_->SortBatch(type, order, items);
  if (!status.ok()) return status;
  return cpu_->kind();
}

absl::StatusOr<EngineKind> Dispatcher::SortNumeric(NumericSpan keys, SortOrder order,
                                                   absl::Span<uint64_t> indices) {
  SortEngine& engine = ForNumeric(keys.type, keys.size);
  absl::Status status = engine.SortNumeric(keys, order, indices);
  if (status.ok()) return engine.kind();
  if (&engine == gpu_.get() && absl::IsUnavailable(status)) {
    // The GPU left the input untouched: the CPU serves this request.
    absl::Status cpu_status = cpu_->SortNumeric(keys, order, indices);
    if (!cpu_status.ok()) return cpu_status;
    return cpu_->kind();
  }
  return status;
}

}  // namespace sortd
