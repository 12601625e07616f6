// Engine selection. The GPU engines are not built yet (issues #3, #4, #6), so
// `auto` serves on the CPU even where a GPU is present and says so, and `gpu`
// refuses to start rather than silently running on the CPU.
#include "core/dispatcher.h"

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
  if (options.engine == EngineChoice::kGpu) {
    return absl::FailedPreconditionError(absl::StrCat(
        "engine=gpu: the GPU sorting engine is not available in this build (",
        gpu_text, "; GPU kernels are not implemented yet)"));
  }
  std::string description = absl::StrCat("engine=cpu (", gpu_text, ")");
  return std::unique_ptr<Dispatcher>(
      new Dispatcher(CreateCpuEngine(options.cpu), std::move(description)));
}

Dispatcher::Dispatcher(std::unique_ptr<SortEngine> cpu, std::string description)
    : cpu_(std::move(cpu)), description_(std::move(description)) {}

SortEngine& Dispatcher::ForNumeric(DataType, size_t) { return *cpu_; }

SortEngine& Dispatcher::ForBytes(size_t) { return *cpu_; }

}  // namespace sortd
