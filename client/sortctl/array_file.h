// Arrays in files for sortctl: raw little-endian binary, text (one element
// per line) and NumPy .npy (1-D, little-endian numeric dtypes).
#ifndef SORTD_CLIENT_SORTCTL_ARRAY_FILE_H_
#define SORTD_CLIENT_SORTCTL_ARRAY_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sortd::sortctl {

enum class FileFormat { kBinary, kText, kNpy };

// "bin" | "text" | "npy" | "auto" (from the extension: .npy, .txt/.csv).
absl::StatusOr<FileFormat> ParseFormat(const std::string& name, const std::string& path);

// An array of one element type. `type` uses the TypedArray oneof names:
// uint32, int32, float32, uint64, int64, float64, bytes.
struct HostArray {
  std::string type;
  std::vector<uint8_t> raw;          // numeric elements, little-endian
  std::vector<std::string> strings;  // bytes elements
  size_t size() const;
};

// Width in bytes of a numeric type name, 0 for "bytes", -1 if unknown.
int TypeWidth(const std::string& type);

// `type` is required for binary and text files; .npy files carry their own
// (a conflicting `type` is an error).
absl::StatusOr<HostArray> ReadArray(const std::string& path, FileFormat format,
                                    const std::string& type);
absl::Status WriteArray(const std::string& path, FileFormat format,
                        const HostArray& array);

}  // namespace sortd::sortctl

#endif  // SORTD_CLIENT_SORTCTL_ARRAY_FILE_H_
