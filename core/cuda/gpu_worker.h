// One GPU's sorting worker: owns the device context's streams, a pool of
// device ping-pong buffers and pinned host staging (core/cuda/device_pool.cuh),
// and runs the job kinds (core/cuda/gpu_job.cuh) on them. CUDA runtime
// only (no abseil: the GPU host image has none); core/gpu_engine.cc wraps it
// in the SortEngine interface.
#ifndef SORTD_CORE_CUDA_GPU_WORKER_H_
#define SORTD_CORE_CUDA_GPU_WORKER_H_

#include <cstddef>
#include <functional>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/arriving_input.h"
#include "core/cuda/radix_sort.cuh"

namespace sortd::cuda {

// Slots, pool and health (core/cuda/gpu_job.cuh).
struct WorkerContext;

struct GpuWorkerOptions {
  int device = 0;
  // Requests this GPU works on at once, one stream and one set of buffers
  // each: while one request sorts, another one's transfers run.
  int slots = 2;
  // Further slots only for sorts whose input is still arriving
  // (SortArriving): such a job holds its slot from the first part to the
  // end of the sort, network time included, so it never takes one of
  // `slots` from the requests.
  int arriving_slots = 1;
  // Device memory all slots together may hold (buffers grow on demand up
  // to this, and are reused); 0 means 80% of the memory free at start.
  size_t max_pool_bytes = 0;
  // Pinned staging per slot: two chunks of this size, so that host copies
  // into/out of pinned memory overlap the DMA of the other chunk.
  size_t staging_chunk_bytes = size_t{8} << 20;
  // Threads waiting for this GPU sleep (blocking-sync events) instead of
  // spinning on a core. Spinning is the default: on the 16-core H200 host
  // it served 1024-key SortStream batches 1.12x faster than sleeping
  // (docs/benchmarks.md, "Batching in the service"); sleeping frees the cores on a
  // host where the CPU is the scarce part.
  bool blocking_wait = false;
  // Radix sorts of at least this many keys look at the input's order first
  // (RadixSortProblem::presorted_min_items): input already in order is
  // downloaded from where it was uploaded, input in reverse order reversed.
  size_t presorted_min_items = RadixSortProblem{}.presorted_min_items;
  // Tests only: a device error to inject into numeric sorts (a cudaError_t
  // value; 0 for none), asked at "sort" (after the sort is queued, before
  // any output: the caller's arrays stay intact) and at "download" (after
  // the keys reached the caller: the output is dirty). The worker handles
  // it as it would a real error from that step. Null in production.
  std::function<int(const char* step)> fault_hook;
};

// A numeric sort in place. The arrays are host memory, or device memory
// (CUDA IPC regions: copied device to device, never touched by the CPU;
// such a job must fit the pool in one piece, else kNoMemory).
struct GpuSortJob {
  RadixKeyType key_type = RadixKeyType::kUint32;
  bool descending = false;
  size_t num_items = 0;
  void* keys = nullptr;         // sorted in place
  uint64_t* indices = nullptr;  // optional: receives the permutation
  // Optional values of `value_bytes` (4 or 8), permuted in place with the
  // keys as the radix payload (no indices, no host gather). Not together
  // with indices; such a job must fit the pool in one piece, else kNoMemory.
  void* values = nullptr;
  int value_bytes = 0;
  // Argsorts (indices set) of fewer than 2^32 keys may run on the merge
  // sort instead of the radix core (small arrays: docs/benchmarks.md).
  bool prefer_merge = false;
};

// A stable argsort of byte strings (unsigned lexicographic) on the merge
// sort: the strings are gathered into pinned staging with their offsets.
struct GpuBytesJob {
  bool descending = false;
  size_t num_items = 0;  // < 2^32 - 1
  const std::string_view* keys = nullptr;  // host
  uint64_t* indices = nullptr;             // host: receives the permutation
};

// One array of a batch: num_items keys at keys_in (host) sorted into
// keys_out (host; may be keys_in); indices (optional) receives the
// permutation local to this array.
struct GpuBatchSegment {
  const void* keys_in = nullptr;
  void* keys_out = nullptr;
  uint64_t* indices = nullptr;
  size_t num_items = 0;
};

// Many small arrays of one key type and order, sorted by one segmented
// launch: gathered into pinned staging, one upload, one sort, one download.
// The total must stay below 2^32 keys.
struct GpuBatchJob {
  RadixKeyType key_type = RadixKeyType::kUint32;
  bool descending = false;
  const GpuBatchSegment* segments = nullptr;
  size_t num_segments = 0;
};

// A numeric sort whose keys (and values) land in host memory while it
// runs (sort sessions): each range is copied to the device as it arrives,
// and the sort runs once the input is complete. Values, when given, are
// sorted along with the keys on the device (no host gather); indices, when
// given, receive the permutation (not together with values).
struct GpuArrivingJob {
  RadixKeyType key_type = RadixKeyType::kUint32;
  bool descending = false;
  size_t num_items = 0;
  void* keys = nullptr;         // host; sorted in place
  void* values = nullptr;       // host, optional; permuted in place
  int value_bytes = 0;          // 4 or 8 with values
  uint64_t* indices = nullptr;  // host, optional
  ArrivingInput* input = nullptr;
  // Optional: the sorted keys come back delta-coded into key_blocks->body
  // (encoded on the device; core/cuda/key_blocks.cuh) instead of into
  // `keys`, when the body fits there and in the slot.
  SortedKeyBlocks* key_blocks = nullptr;
};

// A table sort on the device (GpuWorker::SortTable): the key columns are
// uploaded as they are, each key's range scanned there, the rows packed
// into words by the layout `plan` returns for those ranges (the host's own
// layout, core/table_keys.h), and one stable pairs sort (word, row) a word
// from the last to the first; only the permutation comes back.
struct GpuTableColumn {
  // How a column's elements become order-preserving words.
  enum Encoding : int {
    kUint32, kInt32, kFloat32, kUint64, kInt64, kFloat64,
    kUint8, kInt8, kUint16, kInt16, kFloat16, kBFloat16,
    kTime,  // int64, NaT (the minimum) a null
  };
  Encoding encoding = kUint32;
  const void* data = nullptr;         // host: num_rows elements
  const uint8_t* validity = nullptr;  // host Arrow bitmap, or null: no nulls
  bool descending = false;
  bool nulls_last = true;
};

// What the scan finds for a key (as core/table_layout.h's KeyRange).
struct GpuTableRange {
  uint64_t lo, hi, nulls, valid;
};

// One field of a packed word (as core/table_layout.h's PackedField).
struct GpuPackField {
  int key = 0;
  bool null_bit = false;
  int word = 0;
  int shift = 0;
  int bits = 0;
  uint64_t base = 0;
};

struct GpuTableJob {
  size_t num_rows = 0;  // < 2^32
  const GpuTableColumn* keys = nullptr;  // most significant first
  int num_keys = 0;
  // The layout for the keys' ranges: the bits of each word (most
  // significant first) and every field.
  std::function<void(const GpuTableRange* ranges, std::vector<int>* word_bits,
                     std::vector<GpuPackField>* fields)>
      plan;
  uint32_t* rows = nullptr;  // host: receives the permutation
};

// The first k keys of the stable sort of each segment of an array in
// device memory (core/cuda/select/top_k.cuh), on the device that holds it:
// the selection runs in the slot's buffer and only the kept positions,
// keys and values come back to host memory. Segments as TopKProblem's:
// row_length, or num_segments with offsets (host), or the whole array.
struct GpuTopKJob {
  RadixKeyType key_type = RadixKeyType::kUint32;
  bool descending = false;
  const void* keys = nullptr;  // device memory of this worker's GPU
  size_t num_items = 0;
  size_t row_length = 0;
  size_t num_segments = 0;
  const uint64_t* offsets = nullptr;  // host, num_segments + 1
  uint64_t k = 0;
  const void* values = nullptr;  // device memory, optional
  int value_bytes = 0;           // 4 or 8 with values
  // Host outputs of `kept` entries (the kept counts summed): positions
  // within their segments, the keys as they were, the values.
  size_t kept = 0;
  uint64_t* positions = nullptr;
  void* keys_out = nullptr;
  void* values_out = nullptr;  // with values
};

enum class GpuSortOutcome {
  kOk,
  // SortArriving only: no slot for arriving input was free (or the device
  // has no room now); nothing was done, sort once the input is complete.
  kBusy,
  // SortArriving only: the input was abandoned; nothing was written.
  kAbandoned,
  // Did not fit in the device pool (or the device ran out of memory); the
  // host arrays are untouched, so the caller can sort elsewhere.
  kNoMemory,
  // A CUDA error before any host output was written (host arrays intact).
  kFailedIntact,
  // A CUDA error after host output started to be written.
  kFailedDirty,
};

struct GpuSortReport {
  GpuSortOutcome outcome = GpuSortOutcome::kOk;
  std::string message;         // set unless kOk
  bool device_lost = false;    // sticky error: this worker refuses new work
  double h2d_seconds = 0;      // host -> device, including the staging copies
  double kernel_seconds = 0;   // the sort on the device (CUDA events)
  double d2h_seconds = 0;      // device -> host, including the staging copies
  size_t pool_bytes = 0;       // device bytes the pool holds after this job
  bool presorted = false;      // the input was found in order or in reverse order
};

class GpuWorker {
 public:
  // Creates the streams and staging of every slot on `options.device`.
  // Returns null and sets *error when the device cannot be used.
  static std::unique_ptr<GpuWorker> Create(const GpuWorkerOptions& options, std::string* error);
  ~GpuWorker();
  GpuWorker(const GpuWorker&) = delete;
  GpuWorker& operator=(const GpuWorker&) = delete;

  // Sorts one job; blocks until a slot is free and the result is in host
  // memory. Thread-safe. Arrays larger than the device pool are sorted in
  // chunks that fit, on the GPU, and the sorted chunks merged on the GPU
  // block by block (core/cuda/merge_sort.cuh); kNoMemory only when the pool
  // cannot hold even a minimum chunk.
  GpuSortReport Sort(const GpuSortJob& job);
  // Sorts every array of a batch with the segmented kernel; same slots,
  // pool and outcomes as Sort. Thread-safe.
  GpuSortReport SortBatch(const GpuBatchJob& job);
  // Byte-string argsort on the merge sort; same slots, pool and outcomes.
  GpuSortReport ArgsortBytes(const GpuBytesJob& job);
  // A table's permutation (GpuTableJob); the table must fit the pool in
  // one piece (else kNoMemory). Same slots and outcomes. Thread-safe.
  GpuSortReport SortTable(const GpuTableJob& job);
  // A sort whose input is still arriving, on an arriving slot: blocks
  // until the input is complete (or abandoned) and sorted. Returns kBusy at
  // once when no arriving slot is free, and kNoMemory when the arrays do
  // not fit the pool in one piece (Sort handles those in chunks); in both
  // cases the host arrays are untouched. h2d_seconds is the upload's tail
  // after the input completed (the rest overlapped the arrival).
  GpuSortReport SortArriving(const GpuArrivingJob& job);
  // A selection of device memory (GpuTopKJob); kNoMemory when its scratch
  // does not fit the pool, kFailedIntact for a problem the selection does
  // not take. Same slots. Thread-safe.
  GpuSortReport TopK(const GpuTopKJob& job);

  int device() const;
  bool healthy() const;
  int in_flight() const;          // jobs waiting for or holding a slot
  size_t pool_bytes() const;      // device bytes held by all slots
  size_t max_pool_bytes() const;

 private:
  explicit GpuWorker(std::unique_ptr<WorkerContext> context);
  std::unique_ptr<WorkerContext> context_;
};

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_GPU_WORKER_H_
