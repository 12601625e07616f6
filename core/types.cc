// Names of the core enums, used in error messages and metric labels.
#include "core/types.h"

namespace sortd {

const char* DataTypeName(DataType type) {
  switch (type) {
    case DataType::kUint32: return "uint32";
    case DataType::kInt32: return "int32";
    case DataType::kFloat32: return "float32";
    case DataType::kUint64: return "uint64";
    case DataType::kInt64: return "int64";
    case DataType::kFloat64: return "float64";
    case DataType::kBytes: return "bytes";
  }
  return "unknown";
}

const char* EngineKindName(EngineKind kind) {
  switch (kind) {
    case EngineKind::kCpu: return "cpu";
    case EngineKind::kGpuRadix: return "gpu_radix";
    case EngineKind::kGpuMerge: return "gpu_merge";
    case EngineKind::kGpuSegmented: return "gpu_segmented";
  }
  return "unknown";
}

}  // namespace sortd
