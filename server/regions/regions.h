// Same-host memory regions (RegionService, docs/api.md "Shared-memory
// regions"): POSIX shared memory the server maps and pins once, and device
// memory it opens from a client's CUDA IPC handle. Requests then name a
// region, offset and count instead of carrying arrays. A region is shared
// by the sorts using it: unregistering only forgets the name, and the
// memory is unmapped (unpinned, closed) when the last sort using it ends.
#ifndef SORTD_SERVER_REGIONS_REGIONS_H_
#define SORTD_SERVER_REGIONS_REGIONS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sortd {

enum class RegionKind { kSystem, kCuda };
inline constexpr int kRegionKinds = 2;
const char* RegionKindName(RegionKind kind);  // "system", "cuda"

struct RegionLimits {
  bool allow_system = false;  // --shared_memory=system
  bool allow_cuda = false;    // --shared_memory=cuda
  uint64_t max_regions = 64;
  uint64_t max_bytes = uint64_t{64} << 30;  // registered at once, all kinds
  // Only callers on a Unix domain socket (not loopback TCP, which port
  // forwarding and proxies also use): --shared_memory_peers=unix.
  bool unix_socket_only = false;
  // Why cuda regions are off although asked for (set by the server when
  // no GPU engine runs); empty otherwise.
  std::string cuda_off_reason;
  // CUDA regions only on these GPUs (the ones the GPU engine sorts on):
  // opening a handle elsewhere would make a CUDA context there for nothing.
  std::vector<int> cuda_devices;
};

// Parses --shared_memory: "" or "none" (off), "system", "cuda", or
// "system,cuda" (either order).
absl::Status ParseSharedMemoryKinds(absl::string_view text, RegionLimits* limits);

// One registered region: where its bytes are in this process. Immutable
// once created; destroying it unmaps (unpins, closes) the memory.
class Region {
 public:
  ~Region();
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  const std::string& name() const { return name_; }
  RegionKind kind() const { return kind_; }
  // Host address (system) or device address (CUDA) of the first byte.
  uint8_t* data() const { return data_; }
  uint64_t byte_size() const { return byte_size_; }
  bool pinned() const { return pinned_; }
  int device() const { return device_; }  // -1 for system regions
  const std::string& shm_key() const { return shm_key_; }
  // The memory behind the region, whatever name it was registered under
  // (two names may map one shm object): a key and the region's offset in
  // it, so that overlap checks compare real memory.
  const std::string& backing() const { return backing_; }
  uint64_t backing_offset() const { return backing_offset_; }
  // System regions: FAILED_PRECONDITION naming `field` when the client
  // shrank the shm object under the region (its bytes are gone: a sort
  // that touched them got zero pages instead, mapping_guard.h). Checked
  // before and after every sort; `read_size` also asks the object's size
  // (a system call: done for spans of kStatBytes and more, which may go to
  // the GPU by DMA and never fault; smaller ones sort on the CPU, whose
  // accesses the guard sees). OK for CUDA regions.
  static constexpr uint64_t kStatBytes = uint64_t{64} << 10;
  absl::Status CheckIntact(absl::string_view field, bool read_size) const;

 private:
  friend class RegionRegistry;
  Region() = default;
  std::string name_;
  RegionKind kind_ = RegionKind::kSystem;
  uint8_t* data_ = nullptr;
  uint64_t byte_size_ = 0;
  // System: the mapping (page-aligned) that holds the region.
  void* mapping_ = nullptr;
  uint64_t mapping_bytes_ = 0;
  bool pinned_ = false;
  int device_ = -1;
  int fd_ = -1;                 // system: the object, kept open to watch its size
  int guard_slot_ = -1;         // system: the SIGBUS guard's slot
  void* ipc_memory_ = nullptr;  // CUDA: the opened allocation
  std::string shm_key_;
  std::string backing_;
  uint64_t backing_offset_ = 0;
};

struct RegionCounts {
  uint64_t regions[kRegionKinds] = {0, 0};
  uint64_t bytes[kRegionKinds] = {0, 0};
  uint64_t requests[kRegionKinds] = {0, 0};
};

class RegionRegistry {
 public:
  explicit RegionRegistry(const RegionLimits& limits) : limits_(limits) {}

  bool enabled(RegionKind kind) const {
    return kind == RegionKind::kSystem ? limits_.allow_system : limits_.allow_cuda;
  }
  bool any_enabled() const { return limits_.allow_system || limits_.allow_cuda; }
  const RegionLimits& limits() const { return limits_; }

  // Maps [offset, offset + byte_size) of the shm_open object `shm_key`
  // read-write and tries to pin it. Errors: FAILED_PRECONDITION (system
  // regions off), INVALID_ARGUMENT (name, key, offset, size), ALREADY_EXISTS,
  // NOT_FOUND (no such object), PERMISSION_DENIED, RESOURCE_EXHAUSTED
  // (limits).
  absl::StatusOr<std::shared_ptr<const Region>> RegisterSystem(absl::string_view name,
                                                               absl::string_view shm_key,
                                                               uint64_t offset,
                                                               uint64_t byte_size);
  // Opens a CUDA IPC handle on GPU `device`; byte_size must be within the
  // allocation.
  absl::StatusOr<std::shared_ptr<const Region>> RegisterCuda(absl::string_view name,
                                                             absl::string_view raw_handle,
                                                             int device, uint64_t byte_size);
  // NOT_FOUND when no region has that name.
  absl::Status Unregister(absl::string_view name);
  // NOT_FOUND naming `field` when no region has that name.
  absl::StatusOr<std::shared_ptr<const Region>> Find(absl::string_view name,
                                                     absl::string_view field) const;
  // The same without a status: null when no region has that name.
  std::shared_ptr<const Region> Lookup(absl::string_view name) const;
  std::vector<std::shared_ptr<const Region>> List() const;

  void CountRequest(RegionKind kind);

  // Tests only: called at "region.resolved", once a sort holds its
  // regions and before it runs (ServerOptions::test_site_hook).
  void SetTestHook(std::function<bool(absl::string_view)> hook) { test_hook_ = std::move(hook); }
  void AtTestSite(absl::string_view site) const {
    if (test_hook_) test_hook_(site);
  }
  RegionCounts counts() const;

 private:
  absl::Status CheckRoom(absl::string_view name, uint64_t byte_size) const;  // mu_ held
  absl::Status Add(std::shared_ptr<Region> region);

  const RegionLimits limits_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const Region>, std::less<>> regions_;
  uint64_t bytes_ = 0;
  std::atomic<uint64_t> requests_[kRegionKinds] = {0, 0};
  std::function<bool(absl::string_view)> test_hook_;
};

// Find's NOT_FOUND for `name`, naming `field`.
absl::Status RegionNotFound(absl::string_view name, absl::string_view field);

// Whether a gRPC peer (ServerContext::peer()) is on this host: a Unix
// domain socket or (unless unix_socket_only) a loopback address.
bool IsSameHostPeer(absl::string_view peer, bool unix_socket_only = false);

}  // namespace sortd

#endif  // SORTD_SERVER_REGIONS_REGIONS_H_
