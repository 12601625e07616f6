// What this process may use of the machine: memory and CPUs, lowered to the
// limits of its cgroup (a container's resources.limits), so that defaults
// sized "from the machine" fit the container instead of the node under it.
#ifndef SORTD_SERVER_RUNTIME_HOST_RESOURCES_H_
#define SORTD_SERVER_RUNTIME_HOST_RESOURCES_H_

#include <cstdint>
#include <optional>
#include <string>

namespace sortd {

// Physical memory of this machine in bytes (0 if unknown).
uint64_t PhysicalMemoryBytes();

// Physical memory, or the cgroup memory limit where that is lower.
uint64_t UsableMemoryBytes();

// Online CPUs, or the CPUs this process may run on (its affinity, e.g.
// taskset or a cpuset) or the cgroup CPU quota (rounded up) where either is
// lower; at least 1.
int UsableCpus();

// Parsers of the cgroup files, for tests. nullopt means "no limit" (or an
// unreadable value). v2: memory.max ("max" or bytes), cpu.max
// ("max 100000" or "QUOTA PERIOD"). v1: memory.limit_in_bytes (a huge value
// means none), cpu.cfs_quota_us (-1 means none) with cpu.cfs_period_us.
std::optional<uint64_t> ParseCgroupMemoryLimit(const std::string& text);
std::optional<int> ParseCgroupCpuMax(const std::string& text);
std::optional<int> ParseCgroupV1CpuQuota(const std::string& quota, const std::string& period);

}  // namespace sortd

#endif  // SORTD_SERVER_RUNTIME_HOST_RESOURCES_H_
