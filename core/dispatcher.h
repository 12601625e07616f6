// Picks the engine for each request by key type, size and device
// availability. Today every request runs on the CPU engine; the GPU radix,
// merge and segmented engines plug in here (docs/architecture.md).
#ifndef SORTD_CORE_DISPATCHER_H_
#define SORTD_CORE_DISPATCHER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/cpu/cpu_engine.h"
#include "core/engine.h"

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
};

class Dispatcher {
 public:
  // Fails (FAILED_PRECONDITION) when `engine` is kGpu and no GPU engine can
  // serve on this machine.
  static absl::StatusOr<std::unique_ptr<Dispatcher>> Create(
      const DispatcherOptions& options);

  // The engine for a numeric sort of `size` keys of `type`.
  SortEngine& ForNumeric(DataType type, size_t size);
  // The engine for a byte-string argsort of `size` keys.
  SortEngine& ForBytes(size_t size);

  // One line for the startup log: engines and GPUs found.
  const std::string& description() const { return description_; }

 private:
  Dispatcher(std::unique_ptr<SortEngine> cpu, std::string description);

  std::unique_ptr<SortEngine> cpu_;
  std::string description_;
};

}  // namespace sortd

#endif  // SORTD_CORE_DISPATCHER_H_
