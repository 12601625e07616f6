// Same-host regions from the C++ client (docs/api.md, "Shared-memory
// regions"): POSIX shared memory that this process creates and the server
// maps, so that a sort names where the array is instead of sending it.
//
//   auto region = sortd::client::SharedRegion::Create(*client, "mine", bytes);
//   absl::Span<uint32_t> keys = region->span<uint32_t>(n);
//   ... fill keys ...
//   client->SortInRegion(*region, keys);  // sorted in place, nothing on the wire
//
// The server must run with --shared_memory=system and the client must be on
// its host (a unix:/path target, or loopback).
#ifndef SORTD_CLIENT_SHARED_REGION_H_
#define SORTD_CLIENT_SHARED_REGION_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "sortd/v1/sort.grpc.pb.h"

namespace sortd::client {

class SortClient;

// Where elements are in a registered region (mirrors v1::RegionSlice).
struct RegionRef {
  std::string region;
  uint64_t offset = 0;  // bytes
  uint64_t count = 0;   // elements
  v1::ElementType type = v1::ELEMENT_TYPE_UNSPECIFIED;
};

// The reference as the proto spells it: for a table's column in a region
// (TableColumn.values_region, validity_region; SortTableRequest's
// indices_region), sent with SortClient::SortTable.
void ToProto(const RegionRef& ref, v1::RegionSlice* slice);

// A sort whose arrays are in registered regions (SortClient::SortRegion).
// Unset outputs mean in place; values make it a SortPairs.
struct RegionSort {
  RegionRef keys;
  std::optional<RegionRef> keys_out;
  std::optional<RegionRef> values;
  std::optional<RegionRef> values_out;
  bool return_indices = false;
  std::optional<RegionRef> indices_out;  // with return_indices; unset: in the response
  v1::SortOrder order = v1::SORT_ORDER_ASCENDING;
  std::string request_id;
};

// POSIX shared memory mapped read-write in this process. Created objects
// are unlinked when the mapping goes (the server keeps its own mapping for
// as long as the region stays registered).
class SharedMemory {
 public:
  // A new object of `bytes` (key empty: a unique "/sortd-<pid>-<n>") with
  // permission bits `mode`: owner-only by default, so sortd must run as the
  // same user; 0660 lets a server in the same group map it.
  static absl::StatusOr<SharedMemory> Create(size_t bytes, std::string shm_key = "",
                                             unsigned mode = 0600);
  // An existing object, all of it.
  static absl::StatusOr<SharedMemory> Attach(const std::string& shm_key);

  SharedMemory(SharedMemory&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        shm_key_(std::move(other.shm_key_)),
        owned_(std::exchange(other.owned_, false)) {}
  SharedMemory& operator=(SharedMemory&& other) noexcept;
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;
  ~SharedMemory();

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& shm_key() const { return shm_key_; }

 private:
  SharedMemory() = default;
  void Reset();  // unmaps, and unlinks an object created here
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string shm_key_;
  bool owned_ = false;  // created here: unlinked on destruction
};

// Shared memory registered with a server under a name: unregistered (best
// effort) and unmapped when destroyed. The client must outlive it.
class SharedRegion {
 public:
  static absl::StatusOr<std::unique_ptr<SharedRegion>> Create(SortClient& client,
                                                              const std::string& name,
                                                              size_t bytes);
  // Registers memory made elsewhere (e.g. SharedMemory::Attach).
  static absl::StatusOr<std::unique_ptr<SharedRegion>> Register(SortClient& client,
                                                                const std::string& name,
                                                                SharedMemory memory);
  ~SharedRegion();

  const std::string& name() const { return name_; }
  uint8_t* data() const { return memory_.data(); }
  size_t size() const { return memory_.size(); }
  const std::string& shm_key() const { return memory_.shm_key(); }
  // Whether the server pinned it (GPU DMA straight to and from it).
  bool pinned() const { return pinned_; }

  // `count` elements of T from byte `offset` (must fit the region).
  template <typename T>
  absl::Span<T> span(size_t count, size_t offset = 0) const {
    return absl::MakeSpan(reinterpret_cast<T*>(data() + offset), count);
  }
  // The reference to elements of this region; INVALID_ARGUMENT when they
  // are not inside it.
  absl::StatusOr<RegionRef> Ref(const void* first, size_t count, v1::ElementType type) const;

 private:
  SharedRegion(SortClient& client, std::string name, SharedMemory memory, bool pinned)
      : client_(client), name_(std::move(name)), memory_(std::move(memory)), pinned_(pinned) {}
  SortClient& client_;
  std::string name_;
  SharedMemory memory_;
  bool pinned_;
};

}  // namespace sortd::client

#endif  // SORTD_CLIENT_SHARED_REGION_H_
