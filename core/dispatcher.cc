// Engine selection: CPU engine always; the GPU engine for numeric keys and
// byte strings when GPUs are present (auto, gpu). `gpu` refuses to start
// rather than silently running on the CPU.
#include "core/dispatcher.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/cpu/cpu_tuning.h"
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
  const bool all_gpu = options.engine == EngineChoice::kGpu;
  // The thresholds: the flags where set, else the GPU's profile.
  const GpuDispatchProfile profile = gpu != nullptr ? gpu->dispatch_profile() : GpuDispatchProfile{};
  const size_t min_keys = all_gpu ? 0 : profile.min_keys;
  const size_t min_bytes_keys = all_gpu ? 0 : options.gpu.min_bytes_keys;
  if (gpu != nullptr) {
    const std::string merge_argsorts =
        profile.merge_argsort_max_keys > kGpuRadixSingleLaunchMaxKeys + 1
            ? absl::StrCat("gpu_merge for argsorts of more than ", kGpuRadixSingleLaunchMaxKeys,
                           " and fewer than ", profile.merge_argsort_max_keys, " keys")
            : std::string("no argsort on gpu_merge");
    description = absl::StrCat("engine=", all_gpu ? "gpu" : "auto", ": gpu_radix for numeric arrays of >= ",
                               min_keys, " keys (", merge_argsorts, "), gpu_merge for byte strings from ",
                               min_bytes_keys, " strings, cpu otherwise (", gpu->description(), ")");
  } else if (description.empty()) {
    description = absl::StrCat("engine=cpu (", gpu_text, ")");
  }
  std::unique_ptr<SortEngine> cpu = CreateCpuEngine(options.cpu);  // pins its tuning
  absl::StrAppend(&description, ", cpu_sort_tuning=", cpu::CpuTuningName(cpu::ActiveCpuTuning()));
  return std::unique_ptr<Dispatcher>(new Dispatcher(
      std::move(cpu), std::move(gpu), min_keys, min_bytes_keys, std::move(description)));
}

Dispatcher::Dispatcher(std::unique_ptr<SortEngine> cpu, std::unique_ptr<GpuEngine> gpu,
                       size_t gpu_min_keys, size_t gpu_min_bytes_keys,
                       std::string description)
    : cpu_(std::move(cpu)),
      gpu_(std::move(gpu)),
      gpu_min_keys_(gpu_min_keys),
      gpu_min_bytes_keys_(gpu_min_bytes_keys),
      description_(std::move(description)) {}

SortEngine& Dispatcher::ForNumeric(DataType, size_t size) {
  if (gpu_ != nullptr && size >= gpu_min_keys_ && size > 0 && gpu_->any_healthy()) return *gpu_;
  return *cpu_;
}

absl::StatusOr<EngineKind> Dispatcher::SortTableOnGpu(absl::Span<const TableKey> keys,
                                                      absl::Span<uint32_t> rows,
                                                      const PackingPlanner& planner, int device) {
  if (device >= 0 && gpu_ == nullptr) {
    return absl::FailedPreconditionError("device memory is sorted on a GPU, and no GPU engine serves");
  }
  if (device < 0 && (gpu_ == nullptr || !RoutesToGpu(DataType::kUint64, rows.size()))) {
    return absl::UnavailableError("not routed to a GPU");
  }
  absl::Status status = gpu_->SortTableRows(keys, rows, planner, device);
  if (!status.ok()) return status;
  return EngineKind::kGpuRadix;
}

SortEngine& Dispatcher::ForBytes(size_t size) {
  if (gpu_ != nullptr && size >= gpu_min_bytes_keys_ && size > 0 && gpu_->any_healthy()) {
    return *gpu_;
  }
  return *cpu_;
}

template <typename Call>
absl::StatusOr<EngineKind> Dispatcher::RunWithCpuFallback(SortEngine& engine, EngineKind gpu_kind,
                                                          Call call) {
  absl::Status status = call(engine);
  const bool on_gpu = &engine == gpu_.get();
  if (status.ok()) return on_gpu ? gpu_kind : engine.kind();
  if (!on_gpu || !absl::IsUnavailable(status)) return status;
  // The GPU left the input untouched: the CPU serves this request.
  status = call(*cpu_);
  if (!status.ok()) return status;
  return cpu_->kind();
}

absl::StatusOr<EngineKind> Dispatcher::ArgsortBytes(absl::Span<const std::string_view> keys,
                                                    SortOrder order,
                                                    absl::Span<uint64_t> indices) {
  return RunWithCpuFallback(ForBytes(keys.size()), EngineKind::kGpuMerge, [&](SortEngine& e) {
    return e.ArgsortBytes(keys, order, indices);
  });
}

size_t Dispatcher::BatchCapacity(DataType type) const {
  return BatchesOnGpu() ? gpu_->BatchCapacity(type) : std::numeric_limits<size_t>::max();
}

absl::StatusOr<EngineKind> Dispatcher::SortBatch(DataType type, SortOrder order,
                                                 absl::Span<const BatchItem> items) {
  SortEngine& engine = BatchesOnGpu() ? static_cast<SortEngine&>(*gpu_) : *cpu_;
  return RunWithCpuFallback(engine, EngineKind::kGpuSegmented, [&](SortEngine& e) {
    return e.SortBatch(type, order, items);
  });
}

absl::StatusOr<EngineKind> Dispatcher::SortNumeric(NumericSpan keys, SortOrder order,
                                                   absl::Span<uint64_t> indices) {
  const EngineKind gpu_kind =
      gpu_ == nullptr ? EngineKind::kGpuRadix : gpu_->NumericKind(keys.size, !indices.empty());
  return RunWithCpuFallback(ForNumeric(keys.type, keys.size), gpu_kind, [&](SortEngine& e) {
    return e.SortNumeric(keys, order, indices);
  });
}

absl::StatusOr<EngineKind> Dispatcher::SortPairsNumeric(NumericSpan keys, void* values,
                                                        size_t value_width, SortOrder order) {
  return RunWithCpuFallback(ForNumeric(keys.type, keys.size), EngineKind::kGpuRadix,
                            [&](SortEngine& e) {
                              return e.SortPairsNumeric(keys, values, value_width, order);
                            });
}

absl::StatusOr<EngineKind> Dispatcher::SortOnGpu(int device, NumericSpan keys, void* values,
                                                 size_t value_width, SortOrder order,
                                                 absl::Span<uint64_t> indices) {
  if (gpu_ == nullptr) {
    return absl::FailedPreconditionError("device memory can only be sorted by a GPU engine, and "
                                         "this server runs none");
  }
  absl::Status status = gpu_->SortOnDevice(device, keys, values, value_width, order, indices);
  if (absl::IsUnavailable(status)) {
    return absl::UnavailableError(absl::StrCat(
        "no GPU could take this sort of device memory (it must fit one GPU's pool in one piece): ",
        status.message()));
  }
  if (!status.ok()) return status;
  return EngineKind::kGpuRadix;
}

absl::Status Dispatcher::TopKOnGpu(int device, const DeviceTopK& request) {
  if (gpu_ == nullptr) {
    return absl::FailedPreconditionError("device memory can only be selected from by a GPU "
                                         "engine, and this server runs none");
  }
  absl::Status status = gpu_->TopKOnDevice(device, request);
  if (absl::IsUnavailable(status)) {
    return absl::UnavailableError(absl::StrCat("no GPU could take this selection of device memory: ",
                                               status.message()));
  }
  return status;
}

absl::StatusOr<EngineKind> Dispatcher::SortArriving(const ArrivingSort& sort) {
  SortEngine& engine = ForNumeric(sort.keys.type, sort.keys.size);
  absl::Status status = engine.SortArriving(sort);
  if (!status.ok()) return status;
  return engine.kind();
}

}  // namespace sortd
