// Reads cgroup v2 (unified, /sys/fs/cgroup/*.max) and v1 limits of the
// calling process's own cgroup as mounted in a container.
#include "server/runtime/host_resources.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace sortd {
namespace {

std::optional<std::string> ReadSmallFile(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// v1 reports "no limit" as the largest page-aligned int64.
constexpr uint64_t kNoLimitAbove = uint64_t{1} << 62;

}  // namespace

std::optional<uint64_t> ParseCgroupMemoryLimit(const std::string& text) {
  const absl::string_view value = absl::StripAsciiWhitespace(text);
  uint64_t bytes = 0;
  if (value == "max" || !absl::SimpleAtoi(value, &bytes) || bytes == 0 || bytes >= kNoLimitAbove) {
    return std::nullopt;
  }
  return bytes;
}

std::optional<int> ParseCgroupCpuMax(const std::string& text) {
  const std::vector<absl::string_view> parts =
      absl::StrSplit(absl::StripAsciiWhitespace(text), ' ', absl::SkipEmpty());
  if (parts.size() != 2 || parts[0] == "max") return std::nullopt;
  return ParseCgroupV1CpuQuota(std::string(parts[0]), std::string(parts[1]));
}

std::optional<int> ParseCgroupV1CpuQuota(const std::string& quota, const std::string& period) {
  int64_t q = 0, p = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(quota), &q) ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(period), &p) || q <= 0 || p <= 0) {
    return std::nullopt;
  }
  return static_cast<int>(std::max<int64_t>(1, (q + p - 1) / p));
}

uint64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

uint64_t UsableMemoryBytes() {
  uint64_t bytes = PhysicalMemoryBytes();
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const std::optional<std::string> text = ReadSmallFile(path);
    if (!text) continue;
    if (const std::optional<uint64_t> limit = ParseCgroupMemoryLimit(*text)) {
      bytes = bytes == 0 ? *limit : std::min(bytes, *limit);
    }
    break;
  }
  return bytes;
}

int UsableCpus() {
  int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::optional<int> quota;
  if (const std::optional<std::string> v2 = ReadSmallFile("/sys/fs/cgroup/cpu.max")) {
    quota = ParseCgroupCpuMax(*v2);
  } else {
    const std::optional<std::string> q = ReadSmallFile("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
    const std::optional<std::string> p = ReadSmallFile("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
    if (q && p) quota = ParseCgroupV1CpuQuota(*q, *p);
  }
  if (quota) cpus = std::min(cpus, *quota);
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0 && CPU_COUNT(&allowed) > 0) {
    cpus = std::min(cpus, CPU_COUNT(&allowed));
  }
  return std::max(cpus, 1);
}

}  // namespace sortd
