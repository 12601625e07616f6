// File formats for sortctl. The .npy reader accepts format versions 1-3 of
// 1-D C-order arrays; the writer emits version 1.0 with a 64-byte aligned
// header, as numpy does.
#include "client/sortctl/array_file.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace sortd::sortctl {
namespace {

struct NpyType { const char* name; const char* descr; };
constexpr NpyType kNpyTypes[] = {
    {"uint32", "<u4"}, {"int32", "<i4"}, {"float32", "<f4"},
    {"uint64", "<u8"}, {"int64", "<i8"}, {"float64", "<f8"},
};

absl::StatusOr<std::string> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Value of key 'name' in a .npy header dict: the text up to the next ',' or
// '}' (or the parenthesised tuple for 'shape').
std::string DictValue(const std::string& header, const std::string& key) {
  const size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) return "";
  size_t v = header.find(':', k);
  if (v == std::string::npos) return "";
  ++v;
  while (v < header.size() && header[v] == ' ') ++v;
  size_t end = header[v] == '(' ? header.find(')', v) + 1 : header.find_first_of(",}", v);
  return header.substr(v, end - v);
}

template <typename T>
bool ParseNumber(absl::string_view text, T* out) {
  if constexpr (std::is_floating_point_v<T>) {
    double d;
    if (!absl::SimpleAtod(text, &d)) return false;
    *out = static_cast<T>(d);
    return true;
  } else if constexpr (std::is_same_v<T, uint32_t>) {
    return absl::SimpleAtoi(text, out);
  } else {
    return absl::SimpleAtoi(text, out);
  }
}

template <typename T>
absl::Status ParseTextLines(const std::string& text, HostArray* out) {
  std::istringstream in(text);
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    absl::string_view v = absl::StripAsciiWhitespace(line);
    if (v.empty()) continue;
    T value;
    if (!ParseNumber<T>(v, &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": not a ", out->type, ": \"", v, "\""));
    }
    const size_t at = out->raw.size();
    out->raw.resize(at + sizeof(T));
    std::memcpy(out->raw.data() + at, &value, sizeof(T));
  }
  return absl::OkStatus();
}

template <typename T>
void FormatText(const HostArray& array, std::ostream& out) {
  const size_t n = array.raw.size() / sizeof(T);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, array.raw.data() + i * sizeof(T), sizeof(T));
    if constexpr (std::is_floating_point_v<T>) {
      out.precision(std::is_same_v<T, float> ? 9 : 17);
    }
    out << v << '\n';
  }
}

template <typename Fn>
absl::Status VisitType(const std::string& type, Fn&& fn) {
  if (type == "uint32") return fn(uint32_t{});
  if (type == "int32") return fn(int32_t{});
  if (type == "float32") return fn(float{});
  if (type == "uint64") return fn(uint64_t{});
  if (type == "int64") return fn(int64_t{});
  if (type == "float64") return fn(double{});
  return absl::InvalidArgumentError(absl::StrCat("type: unknown \"", type, "\""));
}

}  // namespace

size_t HostArray::size() const {
  const int width = TypeWidth(type);
  return width > 0 ? raw.size() / width : strings.size();
}

int TypeWidth(const std::string& type) {
  if (type == "uint32" || type == "int32" || type == "float32") return 4;
  if (type == "uint64" || type == "int64" || type == "float64") return 8;
  if (type == "bytes") return 0;
  return -1;
}

absl::StatusOr<FileFormat> ParseFormat(const std::string& name, const std::string& path) {
  if (name == "bin") return FileFormat::kBinary;
  if (name == "text") return FileFormat::kText;
  if (name == "npy") return FileFormat::kNpy;
  if (name != "auto") {
    return absl::InvalidArgumentError(absl::StrCat("format: unknown \"", name, "\""));
  }
  if (absl::EndsWith(path, ".npy")) return FileFormat::kNpy;
  if (absl::EndsWith(path, ".txt") || absl::EndsWith(path, ".csv")) return FileFormat::kText;
  return FileFormat::kBinary;
}

absl::StatusOr<HostArray> ReadArray(const std::string& path, FileFormat format,
                                    const std::string& type) {
  absl::StatusOr<std::string> data = ReadAll(path);
  if (!data.ok()) return data.status();
  HostArray array;
  array.type = type;
  if (format == FileFormat::kNpy) {
    const std::string& d = *data;
    if (d.size() < 10 || d.compare(0, 6, "\x93NUMPY") != 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": not a .npy file"));
    }
    const int major = static_cast<uint8_t>(d[6]);
    size_t header_len, start;
    if (major == 1) {
      header_len = static_cast<uint8_t>(d[8]) | (static_cast<uint8_t>(d[9]) << 8);
      start = 10;
    } else {
      uint32_t len32;
      std::memcpy(&len32, d.data() + 8, 4);
      header_len = len32;
      start = 12;
    }
    if (start + header_len > d.size()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": truncated .npy header"));
    }
    const std::string header = d.substr(start, header_len);
    std::string descr = DictValue(header, "descr");
    descr.erase(std::remove(descr.begin(), descr.end(), '\''), descr.end());
    if (DictValue(header, "fortran_order") == "True") {
      return absl::InvalidArgumentError(absl::StrCat(path, ": Fortran-order arrays are not supported"));
    }
    std::string npy_type;
    for (const NpyType& t : kNpyTypes) {
      if (descr == t.descr) npy_type = t.name;
    }
    if (npy_type.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": unsupported dtype ", descr, " (use <u4 <i4 <f4 <u8 <i8 <f8)"));
    }
    if (!type.empty() && type != npy_type) {
      return absl::InvalidArgumentError(absl::StrCat(
          "type: ", type, " given but ", path, " holds ", npy_type));
    }
    array.type = npy_type;
    const size_t payload = d.size() - start - header_len;
    const int width = TypeWidth(npy_type);
    const std::string shape = DictValue(header, "shape");
    uint64_t count = payload / width;
    if (shape.size() > 2 && shape != "()") {
      std::string digits = shape.substr(1, shape.find_first_of(",)") - 1);
      if (!absl::SimpleAtoi(digits, &count) || count * width > payload) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": bad shape ", shape));
      }
    }
    array.raw.assign(d.begin() + start + header_len,
                     d.begin() + start + header_len + count * width);
    return array;
  }
  if (TypeWidth(type) < 0) {
    return absl::InvalidArgumentError(
        "type: required for binary and text files (uint32, int32, float32, "
        "uint64, int64, float64, bytes)");
  }
  if (format == FileFormat::kBinary) {
    if (type == "bytes") {
      return absl::InvalidArgumentError("type: bytes keys need --format=text (one key per line)");
    }
    if (data->size() % TypeWidth(type) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": size ", data->size(), " is not a multiple of ", TypeWidth(type)));
    }
    array.raw.assign(data->begin(), data->end());
    return array;
  }
  if (type == "bytes") {
    std::istringstream in(*data);
    std::string line;
    while (std::getline(in, line)) array.strings.push_back(line);
    return array;
  }
  absl::Status status = VisitType(type, [&](auto t) {
    return ParseTextLines<decltype(t)>(*data, &array);
  });
  if (!status.ok()) return status;
  return array;
}

absl::Status WriteArray(const std::string& path, FileFormat format,
                        const HostArray& array) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  if (array.type == "bytes") {
    if (format != FileFormat::kText) {
      return absl::InvalidArgumentError("bytes keys can only be written as text");
    }
    for (const std::string& s : array.strings) out << s << '\n';
  } else if (format == FileFormat::kBinary) {
    out.write(reinterpret_cast<const char*>(array.raw.data()), array.raw.size());
  } else if (format == FileFormat::kNpy) {
    const char* descr = nullptr;
    for (const NpyType& t : kNpyTypes) {
      if (array.type == t.name) descr = t.descr;
    }
    std::string header = absl::StrCat("{'descr': '", descr,
                                      "', 'fortran_order': False, 'shape': (",
                                      array.size(), ",), }");
    const size_t unpadded = 10 + header.size() + 1;
    header.append((64 - unpadded % 64) % 64, ' ');
    header.push_back('\n');
    const uint16_t len = static_cast<uint16_t>(header.size());
    out.write("\x93NUMPY\x01\x00", 8);
    out.put(static_cast<char>(len & 0xff));
    out.put(static_cast<char>(len >> 8));
    out << header;
    out.write(reinterpret_cast<const char*>(array.raw.data()), array.raw.size());
  } else {
    absl::Status status = VisitType(array.type, [&](auto t) {
      FormatText<decltype(t)>(array, out);
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
  }
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("write failed: ", path));
  return absl::OkStatus();
}

}  // namespace sortd::sortctl
