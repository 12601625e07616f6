// SharedMemory (shm_open + mmap) and SharedRegion (registration), and the
// SortClient calls of RegionService.
#include "client/shared_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "client/sortd_client.h"
#include "sortd/v1/typed_array_fields.h"

namespace sortd::client {
namespace {

absl::Status Errno(const std::string& what) {
  return absl::Status(errno == ENOENT   ? absl::StatusCode::kNotFound
                      : errno == EACCES ? absl::StatusCode::kPermissionDenied
                                        : absl::StatusCode::kInternal,
                      absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

void ToProto(const RegionRef& ref, v1::RegionSlice* slice) {
  slice->set_region(ref.region);
  slice->set_offset(ref.offset);
  slice->set_count(ref.count);
  slice->set_type(ref.type);
}

SharedMemory& SharedMemory::operator=(SharedMemory&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    shm_key_ = std::move(other.shm_key_);
    owned_ = std::exchange(other.owned_, false);
  }
  return *this;
}

SharedMemory::~SharedMemory() { Reset(); }

void SharedMemory::Reset() {
  if (data_ != nullptr) munmap(data_, size_);
  if (owned_) shm_unlink(shm_key_.c_str());
  data_ = nullptr;
  size_ = 0;
  owned_ = false;
}

absl::StatusOr<SharedMemory> SharedMemory::Create(size_t bytes, std::string shm_key,
                                                  unsigned mode) {
  static std::atomic<uint64_t> next{0};
  if (bytes == 0) return absl::InvalidArgumentError("shared memory: 0 bytes");
  if (shm_key.empty()) shm_key = absl::StrCat("/sortd-", getpid(), "-", next++);
  const int fd = shm_open(shm_key.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return Errno(absl::StrCat("shm_open ", shm_key));
  SharedMemory memory;
  memory.shm_key_ = shm_key;
  memory.owned_ = true;
  // fchmod: the mode shm_open applies is narrowed by the umask.
  if (fchmod(fd, static_cast<mode_t>(mode)) != 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    absl::Status status = Errno(absl::StrCat("fchmod/ftruncate ", shm_key));
    close(fd);
    return status;  // `memory` unlinks the object
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  absl::Status status = data == MAP_FAILED ? Errno(absl::StrCat("mmap ", shm_key)) : absl::OkStatus();
  close(fd);
  if (!status.ok()) return status;
  memory.data_ = static_cast<uint8_t*>(data);
  memory.size_ = bytes;
  return memory;
}

absl::StatusOr<SharedMemory> SharedMemory::Attach(const std::string& shm_key) {
  const int fd = shm_open(shm_key.c_str(), O_RDWR, 0);
  if (fd < 0) return Errno(absl::StrCat("shm_open ", shm_key));
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size <= 0) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(shm_key, ": empty or unreadable"));
  }
  void* data = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED,
                    fd, 0);
  absl::Status status = data == MAP_FAILED ? Errno(absl::StrCat("mmap ", shm_key)) : absl::OkStatus();
  close(fd);
  if (!status.ok()) return status;
  SharedMemory memory;
  memory.data_ = static_cast<uint8_t*>(data);
  memory.size_ = static_cast<size_t>(st.st_size);
  memory.shm_key_ = shm_key;
  return memory;
}

absl::StatusOr<std::unique_ptr<SharedRegion>> SharedRegion::Create(SortClient& client,
                                                                   const std::string& name,
                                                                   size_t bytes) {
  absl::StatusOr<SharedMemory> memory = SharedMemory::Create(bytes);
  if (!memory.ok()) return memory.status();
  return Register(client, name, *std::move(memory));
}

absl::StatusOr<std::unique_ptr<SharedRegion>> SharedRegion::Register(SortClient& client,
                                                                     const std::string& name,
                                                                     SharedMemory memory) {
  absl::StatusOr<bool> pinned =
      client.RegisterSystemRegion(name, memory.shm_key(), memory.size());
  if (!pinned.ok()) {
    // Deadline, cancellation, a lost connection: the server may still have
    // registered it; the memory is about to go, so unregister, best effort.
    const absl::StatusCode code = pinned.status().code();
    if (code == absl::StatusCode::kDeadlineExceeded || code == absl::StatusCode::kCancelled ||
        code == absl::StatusCode::kUnavailable) {
      client.UnregisterRegion(name).IgnoreError();
    }
    return pinned.status();
  }
  return std::unique_ptr<SharedRegion>(new SharedRegion(client, name, std::move(memory), *pinned));
}

SharedRegion::~SharedRegion() { client_.UnregisterRegion(name_).IgnoreError(); }

absl::StatusOr<RegionRef> SharedRegion::Ref(const void* first, size_t count,
                                            v1::ElementType type) const {
  const auto* at = static_cast<const uint8_t*>(first);
  // (an unknown type as 4 bytes: the server names it when it refuses)
  const size_t width = v1::ElementTypeWidth(type) > 0 ? v1::ElementTypeWidth(type) : 4;
  if (at < data() || at > data() + size() || count > (data() + size() - at) / width) {
    return absl::InvalidArgumentError(
        absl::StrCat("the elements are not inside region '", name_, "'"));
  }
  RegionRef ref;
  ref.region = name_;
  ref.offset = static_cast<uint64_t>(at - data());
  ref.count = count;
  ref.type = type;
  return ref;
}

absl::StatusOr<bool> SortClient::RegisterSystemRegion(const std::string& name,
                                                      const std::string& shm_key,
                                                      uint64_t byte_size, uint64_t offset) {
  v1::RegisterSystemRegionRequest request;
  request.set_name(name);
  request.set_shm_key(shm_key);
  request.set_offset(offset);
  request.set_byte_size(byte_size);
  v1::RegisterSystemRegionResponse response;
  grpc::ClientContext ctx;
  PrepareContext(&ctx);
  grpc::Status rpc = region_stub_->RegisterSystemRegion(&ctx, request, &response);
  if (!rpc.ok()) return FromGrpcStatus(rpc);
  return response.pinned();
}

absl::Status SortClient::RegisterCudaRegion(const std::string& name, const void* ipc_handle,
                                            int device_id, uint64_t byte_size) {
  v1::RegisterCudaRegionRequest request;
  request.set_name(name);
  request.set_raw_handle(static_cast<const char*>(ipc_handle), kCudaIpcHandleBytes);
  request.set_device_id(device_id);
  request.set_byte_size(byte_size);
  v1::RegisterCudaRegionResponse response;
  grpc::ClientContext ctx;
  PrepareContext(&ctx);
  return FromGrpcStatus(region_stub_->RegisterCudaRegion(&ctx, request, &response));
}

absl::Status SortClient::UnregisterRegion(const std::string& name) {
  v1::UnregisterRegionRequest request;
  request.set_name(name);
  v1::UnregisterRegionResponse response;
  grpc::ClientContext ctx;
  PrepareContext(&ctx);
  return FromGrpcStatus(region_stub_->UnregisterRegion(&ctx, request, &response));
}

absl::StatusOr<std::vector<v1::RegionStatus>> SortClient::ListRegions() {
  v1::ListRegionsRequest request;
  v1::ListRegionsResponse response;
  grpc::ClientContext ctx;
  PrepareContext(&ctx);
  grpc::Status rpc = region_stub_->ListRegions(&ctx, request, &response);
  if (!rpc.ok()) return FromGrpcStatus(rpc);
  return std::vector<v1::RegionStatus>(response.regions().begin(), response.regions().end());
}

absl::StatusOr<v1::Engine> SortClient::SortRegion(const RegionSort& sort,
                                                  std::vector<uint64_t>* indices) {
  grpc::ClientContext ctx;
  PrepareContext(&ctx);
  grpc::Status rpc;
  if (sort.values) {
    v1::SortPairsRequest request;
    ToProto(sort.keys, request.mutable_keys_region());
    ToProto(*sort.values, request.mutable_values_region());
    if (sort.keys_out) ToProto(*sort.keys_out, request.mutable_keys_out_region());
    if (sort.values_out) ToProto(*sort.values_out, request.mutable_values_out_region());
    request.set_order(sort.order);
    request.set_request_id(sort.request_id);
    v1::SortPairsResponse response;
    rpc = stub_->SortPairs(&ctx, request, &response);
    if (!rpc.ok()) return FromGrpcStatus(rpc);
    return response.engine();
  }
  v1::SortRequest request;
  ToProto(sort.keys, request.mutable_keys_region());
  if (sort.keys_out) ToProto(*sort.keys_out, request.mutable_keys_out_region());
  if (sort.indices_out) ToProto(*sort.indices_out, request.mutable_indices_region());
  request.set_return_indices(sort.return_indices);
  request.set_order(sort.order);
  request.set_request_id(sort.request_id);
  v1::SortResponse response;
  rpc = stub_->Sort(&ctx, request, &response);
  if (!rpc.ok()) return FromGrpcStatus(rpc);
  if (indices != nullptr) indices->assign(response.indices().begin(), response.indices().end());
  return response.engine();
}

}  // namespace sortd::client
