// RegionRegistry: mapping, pinning and opening regions, and their limits.
#include "server/regions/regions.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/gpu_info.h"
#include "server/regions/mapping_guard.h"

namespace sortd {
namespace {

constexpr size_t kMaxNameBytes = 128;

absl::Status CheckName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("name: 1 to ", kMaxNameBytes, " characters required, got ", name.size()));
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return absl::InvalidArgumentError(
          absl::StrCat("name: '", absl::CHexEscape(name),
                       "' may hold only letters, digits, '.', '_' and '-'"));
    }
  }
  return absl::OkStatus();
}

// shm_open names: one leading slash, then a file name (no further slashes).
absl::Status CheckShmKey(absl::string_view key) {
  absl::string_view file = absl::StripPrefix(key, "/");
  if (file.empty() || file.size() > 255 || absl::StrContains(file, '/') || file == "." ||
      file == ".." || absl::StrContains(file, '\0')) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm_key: '", absl::CHexEscape(key),
                     "' is not a shm_open name (\"/name\", no other slashes)"));
  }
  return absl::OkStatus();
}

absl::Status ErrnoStatus(int err, const std::string& what) {
  const std::string text = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT: return absl::NotFoundError(text);
    case EACCES:
    case EPERM: return absl::PermissionDeniedError(text);
    case ENOMEM:
    case EMFILE:
    case ENFILE:
    case EAGAIN: return absl::ResourceExhaustedError(text);
    default: return absl::InvalidArgumentError(text);
  }
}

}  // namespace

const char* RegionKindName(RegionKind kind) {
  return kind == RegionKind::kSystem ? "system" : "cuda";
}

absl::Status ParseSharedMemoryKinds(absl::string_view text, RegionLimits* limits) {
  limits->allow_system = limits->allow_cuda = false;
  if (text.empty() || text == "none") return absl::OkStatus();
  for (absl::string_view kind : absl::StrSplit(text, ',')) {
    kind = absl::StripAsciiWhitespace(kind);
    if (kind == "system") {
      limits->allow_system = true;
    } else if (kind == "cuda") {
      limits->allow_cuda = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--shared_memory=", text, ": unknown kind '", kind,
          "' (expected none, system, cuda or system,cuda)"));
    }
  }
  return absl::OkStatus();
}

Region::~Region() {
  if (kind_ == RegionKind::kSystem) {
    if (pinned_) UnpinHostRange(mapping_);
    UnguardMapping(guard_slot_);
    if (mapping_ != nullptr) munmap(mapping_, mapping_bytes_);
    if (fd_ >= 0) close(fd_);
  } else {
    CloseCudaIpcMemory(ipc_memory_, device_);
  }
}

absl::Status Region::CheckIntact(absl::string_view field, bool read_size) const {
  if (kind_ != RegionKind::kSystem) return absl::OkStatus();
  struct stat st {};
  const bool shrank = read_size && (fstat(fd_, &st) != 0 ||
                                    static_cast<uint64_t>(st.st_size) < backing_offset_ + byte_size_);
  if (shrank || MappingBroken(guard_slot_)) {
    return absl::FailedPreconditionError(absl::StrCat(
        field, ": the shared-memory object behind region '", name_, "' (", shm_key_,
        ") was shrunk below the region while registered (or its file system could not supply "
        "a page: /dev/shm full); its contents are lost. Unregister the region"));
  }
  return absl::OkStatus();
}

absl::Status RegionRegistry::CheckRoom(absl::string_view name, uint64_t byte_size) const {
  if (regions_.find(name) != regions_.end()) {
    return absl::AlreadyExistsError(
        absl::StrCat("name: a region named '", name, "' is registered already"));
  }
  if (regions_.size() >= limits_.max_regions) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "regions: ", regions_.size(), " registered, the limit (--max_shm_regions)"));
  }
  if (byte_size > limits_.max_bytes - std::min(bytes_, limits_.max_bytes)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("byte_size: ", byte_size, " more bytes would pass the limit of ",
                     limits_.max_bytes, " registered bytes (--max_shm_bytes; ", bytes_,
                     " registered now)"));
  }
  return absl::OkStatus();
}

absl::Status RegionRegistry::Add(std::shared_ptr<Region> region) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::Status room = CheckRoom(region->name(), region->byte_size());
  if (!room.ok()) return room;  // a racing registration took the name or the room
  bytes_ += region->byte_size();
  regions_.emplace(region->name(), std::move(region));
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Region>> RegionRegistry::RegisterSystem(
    absl::string_view name, absl::string_view shm_key, uint64_t offset, uint64_t byte_size) {
  if (!limits_.allow_system) {
    return absl::FailedPreconditionError(
        "system shared-memory regions are off on this server (start sortd with "
        "--shared_memory=system)");
  }
  absl::Status status = CheckName(name);
  if (status.ok()) status = CheckShmKey(shm_key);
  if (!status.ok()) return status;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (offset % page != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("offset: ", offset, " is not a multiple of the page size (", page, ")"));
  }
  if (byte_size == 0) return absl::InvalidArgumentError("byte_size: must be more than 0");
  {
    std::lock_guard<std::mutex> lock(mu_);
    status = CheckRoom(name, byte_size);
    if (!status.ok()) return status;
  }
  const std::string key(shm_key);
  const int fd = shm_open(key.c_str(), O_RDWR, 0);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("shm_key: cannot open '", key, "'"));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return ErrnoStatus(err, absl::StrCat("shm_key: cannot stat '", key, "'"));
  }
  const uint64_t object_bytes = static_cast<uint64_t>(st.st_size);
  if (offset > object_bytes || byte_size > object_bytes - offset) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("byte_size: bytes [", offset, ", ", offset + byte_size, ") of '", key,
                     "' lie outside the object's ", object_bytes, " bytes"));
  }
  void* mapping = mmap(nullptr, byte_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                       static_cast<off_t>(offset));
  const int map_errno = errno;
  if (mapping == MAP_FAILED) {
    close(fd);
    return ErrnoStatus(map_errno, absl::StrCat("mmap of '", key, "'"));
  }
  auto region = std::shared_ptr<Region>(new Region());
  region->name_ = std::string(name);
  region->kind_ = RegionKind::kSystem;
  region->fd_ = fd;
  region->mapping_ = mapping;
  region->mapping_bytes_ = (byte_size + page - 1) / page * page;
  // A client that shrinks the object later must not crash the server.
  if (!InstallMappingGuard()) {
    return absl::InternalError("regions: the SIGBUS guard could not be installed");
  }
  region->guard_slot_ = GuardMapping(mapping, region->mapping_bytes_);
  if (region->guard_slot_ < 0) {
    return absl::ResourceExhaustedError(
        "regions: 1024 system regions are mapped (registered, or unregistered but still used by "
        "a running sort); unregister some or wait for those sorts");
  }
  region->data_ = static_cast<uint8_t*>(mapping);
  region->byte_size_ = byte_size;
  region->shm_key_ = key;
  region->backing_ = absl::StrCat("shm:", st.st_dev, ":", st.st_ino);
  region->backing_offset_ = offset;
  // Pinning faults every page in and locks it: DMA to and from the GPU at
  // full rate, no staging copies. Without a GPU it is skipped.
  region->pinned_ = PinHostRange(mapping, byte_size);
  status = Add(region);
  if (!status.ok()) return status;  // the region unmaps as it goes
  return std::shared_ptr<const Region>(std::move(region));
}

absl::StatusOr<std::shared_ptr<const Region>> RegionRegistry::RegisterCuda(
    absl::string_view name, absl::string_view raw_handle, int device, uint64_t byte_size) {
  if (!limits_.allow_cuda) {
    return absl::FailedPreconditionError(
        limits_.cuda_off_reason.empty()
            ? "CUDA IPC regions are off on this server (start sortd with --shared_memory=cuda)"
            : absl::StrCat("CUDA IPC regions are off on this server: ", limits_.cuda_off_reason));
  }
  absl::Status status = CheckName(name);
  if (!status.ok()) return status;
  if (raw_handle.size() != kCudaIpcHandleBytes) {
    return absl::InvalidArgumentError(absl::StrCat("raw_handle: ", raw_handle.size(),
                                                   " bytes, a cudaIpcMemHandle_t has ",
                                                   kCudaIpcHandleBytes));
  }
  if (byte_size == 0) return absl::InvalidArgumentError("byte_size: must be more than 0");
  if (std::find(limits_.cuda_devices.begin(), limits_.cuda_devices.end(), device) ==
      limits_.cuda_devices.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("device_id: ", device, " is not a GPU this server sorts on (",
                     limits_.cuda_devices.empty() ? "none" : absl::StrJoin(limits_.cuda_devices, ", "),
                     ")"));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    status = CheckRoom(name, byte_size);
    if (!status.ok()) return status;
  }
  size_t allocation = 0;
  std::string error;
  void* memory = OpenCudaIpcMemory(raw_handle.data(), device, &allocation, &error);
  if (memory == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("raw_handle: cannot open on device ", device,
                                                   ": ", error));
  }
  auto region = std::shared_ptr<Region>(new Region());
  region->name_ = std::string(name);
  region->kind_ = RegionKind::kCuda;
  region->ipc_memory_ = memory;
  region->device_ = device;
  region->data_ = static_cast<uint8_t*>(memory);
  region->byte_size_ = byte_size;
  region->backing_ = absl::StrCat("cuda:", absl::BytesToHexString(raw_handle));
  region->pinned_ = true;
  if (byte_size > allocation) {
    return absl::InvalidArgumentError(absl::StrCat(
        "byte_size: ", byte_size, " is more than the allocation's ", allocation, " bytes"));
  }
  status = Add(region);
  if (!status.ok()) return status;
  return std::shared_ptr<const Region>(std::move(region));
}

absl::Status RegionRegistry::Unregister(absl::string_view name) {
  std::shared_ptr<const Region> gone;  // released outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto it = regions_.find(name);
  if (it == regions_.end()) {
    return absl::NotFoundError(absl::StrCat("name: no region named '", name, "'"));
  }
  gone = std::move(it->second);
  bytes_ -= gone->byte_size();
  regions_.erase(it);
  return absl::OkStatus();
}

absl::Status RegionNotFound(absl::string_view name, absl::string_view field) {
  return absl::NotFoundError(absl::StrCat(field, ": no region named '", name,
                                          "' is registered (RegionService.ListRegions)"));
}

std::shared_ptr<const Region> RegionRegistry::Lookup(absl::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = regions_.find(name);
  return it == regions_.end() ? nullptr : it->second;
}

absl::StatusOr<std::shared_ptr<const Region>> RegionRegistry::Find(absl::string_view name,
                                                                   absl::string_view field) const {
  std::shared_ptr<const Region> region = Lookup(name);
  if (region == nullptr) return RegionNotFound(name, field);
  return region;
}

std::vector<std::shared_ptr<const Region>> RegionRegistry::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<const Region>> all;
  for (const auto& [name, region] : regions_) all.push_back(region);
  return all;
}

void RegionRegistry::CountRequest(RegionKind kind) {
  requests_[static_cast<int>(kind)].fetch_add(1, std::memory_order_relaxed);
}

RegionCounts RegionRegistry::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  RegionCounts c;
  for (const auto& [name, region] : regions_) {
    ++c.regions[static_cast<int>(region->kind())];
    c.bytes[static_cast<int>(region->kind())] += region->byte_size();
  }
  for (int k = 0; k < kRegionKinds; ++k) c.requests[k] = requests_[k].load();
  return c;
}

bool IsSameHostPeer(absl::string_view peer, bool unix_socket_only) {
  if (absl::StartsWith(peer, "unix:") || absl::StartsWith(peer, "unix-abstract:")) return true;
  return !unix_socket_only && (absl::StartsWith(peer, "ipv4:127.") || absl::StartsWith(peer, "ipv6:[::1]") ||
         absl::StartsWith(peer, "ipv6:%5B::1%5D") ||
         absl::StartsWith(peer, "ipv6:[::ffff:127.") ||
         absl::StartsWith(peer, "ipv6:%5B::ffff:127."));
}

}  // namespace sortd
