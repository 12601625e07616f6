// GpuEngine over one GpuWorker per GPU: picks the healthy GPU with the
// fewest jobs in flight, maps DataType to the radix key type, and turns
// worker outcomes into statuses.
#include "core/gpu_engine.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/cuda/gpu_worker.h"
#include "core/cuda/radix_sort.cuh"
#include "core/cuda/segmented_sort.cuh"
#include "core/gpu_info.h"
#include "core/gpu_placement.h"

namespace sortd {
namespace {

std::optional<cuda::RadixKeyType> RadixTypeOf(DataType type) {
  switch (type) {
    case DataType::kUint32: return cuda::RadixKeyType::kUint32;
    case DataType::kInt32: return cuda::RadixKeyType::kInt32;
    case DataType::kFloat32: return cuda::RadixKeyType::kFloat32;
    case DataType::kUint64: return cuda::RadixKeyType::kUint64;
    case DataType::kInt64: return cuda::RadixKeyType::kInt64;
    case DataType::kFloat64: return cuda::RadixKeyType::kFloat64;
    default: return std::nullopt;
  }
}

class GpuRadixEngine final : public GpuEngine {
 public:
  GpuRadixEngine(std::vector<std::unique_ptr<cuda::GpuWorker>> workers,
                 const GpuEngineOptions& options, std::string description)
      : workers_(std::move(workers)),
        rotation_(workers_.size()),
        clock_(options.clock),
        observer_(options.observer),
        profile_(ResolvedProfile(options, workers_.front()->device())),
        description_(std::move(description)) {
    for (auto& r : rotation_) r = std::make_unique<GpuRotation>(options.rotation);
    if (!clock_) clock_ = [] { return absl::Now(); };
  }

  EngineKind kind() const override { return EngineKind::kGpuRadix; }
  int gpu_count() const override { return static_cast<int>(workers_.size()); }
  std::vector<int> devices() const override {
    std::vector<int> ordinals;
    for (const auto& w : workers_) ordinals.push_back(w->device());
    return ordinals;
  }
  bool any_healthy() const override {
    for (const auto& w : workers_) {
      if (w->healthy()) return true;
    }
    return false;
  }
  std::string description() const override { return description_; }

  absl::Status SortNumeric(NumericSpan keys, SortOrder order,
                           absl::Span<uint64_t> indices) override {
    return SortOn(Pick(), keys, order, indices, nullptr, 0, /*allow_merge=*/true);
  }

  absl::Status SortPairsNumeric(NumericSpan keys, void* values, size_t value_width,
                                SortOrder order) override {
    return SortOn(Pick(), keys, order, {}, values, value_width, /*allow_merge=*/false);
  }

  absl::Status SortOnDevice(int device, NumericSpan keys, void* values, size_t value_width,
                            SortOrder order, absl::Span<uint64_t> indices) override {
    cuda::GpuWorker* worker = ServingOn(device);
    return SortOn(worker != nullptr ? worker : Pick(), keys, order, indices, values, value_width,
                  /*allow_merge=*/false);
  }

  // One in-place sort on `worker`: keys, with indices or with values (the
  // radix payload). Small argsorts may take the merge sort when
  // `allow_merge` (it widens positions on the host: not for device memory).
  absl::Status SortOn(cuda::GpuWorker* worker, NumericSpan keys, SortOrder order,
                      absl::Span<uint64_t> indices, void* values, size_t value_width,
                      bool allow_merge) {
    const std::optional<cuda::RadixKeyType> type = RadixTypeOf(keys.type);
    if (!type) return absl::InvalidArgumentError("GPU radix engine: numeric keys only");
    if (!indices.empty() && indices.size() != keys.size) {
      return absl::InvalidArgumentError("indices: size must match keys");
    }
    if (values != nullptr && value_width != 4 && value_width != 8) {
      return absl::InvalidArgumentError(absl::StrCat("values: unsupported element size ", value_width));
    }
    if (worker == nullptr) return absl::UnavailableError("no healthy GPU");
    cuda::GpuSortJob job;
    job.key_type = *type;
    job.descending = order == SortOrder::kDescending;
    job.num_items = keys.size;
    job.keys = keys.data;
    job.indices = indices.empty() ? nullptr : indices.data();
    job.values = values;
    job.value_bytes = values != nullptr ? static_cast<int>(value_width) : 0;
    job.prefer_merge =
        allow_merge && NumericKind(keys.size, !indices.empty()) == EngineKind::kGpuMerge;
    return Outcome(*worker, worker->Sort(job));
  }

  absl::Status TopKOnDevice(int device, const DeviceTopK& request) override {
    const std::optional<cuda::RadixKeyType> type = RadixTypeOf(request.keys.type);
    if (!type) return absl::InvalidArgumentError("GPU selection: numeric keys only");
    if (request.values != nullptr && request.value_width != 4 && request.value_width != 8) {
      return absl::InvalidArgumentError(
          absl::StrCat("values: unsupported element size ", request.value_width));
    }
    cuda::GpuWorker* worker = ServingOn(device);
    if (worker == nullptr) {
      return absl::UnavailableError(absl::StrCat("GPU ", device, " does not serve (or is out of the rotation)"));
    }
    cuda::GpuTopKJob job;
    job.key_type = *type;
    job.descending = request.order == SortOrder::kDescending;
    job.keys = request.keys.data;
    job.num_items = request.keys.size;
    job.row_length = request.row_length;
    job.num_segments = request.offsets.empty() ? 0 : request.offsets.size() - 1;
    job.offsets = request.offsets.empty() ? nullptr : request.offsets.data();
    job.k = request.k;
    job.values = request.values;
    job.value_bytes = request.values != nullptr ? static_cast<int>(request.value_width) : 0;
    job.kept = request.kept;
    job.positions = request.positions;
    job.keys_out = request.keys_out;
    job.values_out = request.values_out;
    const cuda::GpuSortReport report = worker->TopK(job);
    if (report.outcome == cuda::GpuSortOutcome::kFailedIntact && !report.device_lost &&
        report.message.find("not taken") != std::string::npos) {
      return absl::InvalidArgumentError(report.message);
    }
    return Outcome(*worker, report);
  }

  absl::Status SortTableRows(absl::Span<const TableKey> keys, absl::Span<uint32_t> rows,
                             const PackingPlanner& planner, int device) override {
    std::vector<cuda::GpuTableColumn> columns(keys.size());
    for (size_t k = 0; k < keys.size(); ++k) {
      std::optional<cuda::GpuTableColumn::Encoding> encoding = EncodingOf(keys[k]);
      if (!encoding) return absl::InvalidArgumentError("GPU table sort: fixed-width keys only");
      columns[k].encoding = *encoding;
      columns[k].data = keys[k].data;
      columns[k].validity = keys[k].validity;
      columns[k].descending = keys[k].order == SortOrder::kDescending;
      columns[k].nulls_last = keys[k].nulls == NullPlacement::kLast;
    }
    cuda::GpuTableJob job;
    job.num_rows = rows.size();
    job.keys = columns.data();
    job.num_keys = static_cast<int>(columns.size());
    job.rows = rows.data();
    job.plan = [&](const cuda::GpuTableRange* found, std::vector<int>* word_bits,
                   std::vector<cuda::GpuPackField>* fields) {
      std::vector<KeyRange> ranges(keys.size());
      for (size_t k = 0; k < keys.size(); ++k) {
        ranges[k] = KeyRange{found[k].lo, found[k].hi, found[k].nulls, found[k].valid};
      }
      const PackedLayout layout = planner(ranges);
      *word_bits = layout.word_bits;
      fields->clear();
      for (const PackedField& f : layout.fields) {
        fields->push_back(cuda::GpuPackField{f.key, f.null_bit, f.word, f.shift, f.bits, f.base});
      }
    };
    cuda::GpuWorker* worker = nullptr;
    const absl::Time now = clock_();
    for (size_t i = 0; i < workers_.size() && device >= 0; ++i) {
      if (workers_[i]->device() == device && Serves(i, now)) worker = workers_[i].get();
    }
    if (worker == nullptr) worker = Pick();
    if (worker == nullptr) return absl::UnavailableError("no healthy GPU");
    return Outcome(*worker, worker->SortTable(job));
  }

  // How the device reads a key column's elements; nullopt for byte strings.
  static std::optional<cuda::GpuTableColumn::Encoding> EncodingOf(const TableKey& key) {
    using E = cuda::GpuTableColumn;
    switch (key.kind) {
      case TableKey::Kind::kTime: return E::kTime;
      case TableKey::Kind::kNarrow:
        switch (key.narrow) {
          case NarrowType::kInt8: return E::kInt8;
          case NarrowType::kUint8:
          case NarrowType::kBool: return E::kUint8;
          case NarrowType::kInt16: return E::kInt16;
          case NarrowType::kUint16: return E::kUint16;
          case NarrowType::kFloat16: return E::kFloat16;
          case NarrowType::kBFloat16: return E::kBFloat16;
        }
        return std::nullopt;
      case TableKey::Kind::kNumeric:
        switch (key.type) {
          case DataType::kUint32: return E::kUint32;
          case DataType::kInt32: return E::kInt32;
          case DataType::kFloat32: return E::kFloat32;
          case DataType::kUint64: return E::kUint64;
          case DataType::kInt64: return E::kInt64;
          case DataType::kFloat64: return E::kFloat64;
          case DataType::kBytes: return std::nullopt;
        }
    }
    return std::nullopt;
  }

  absl::Status SortArriving(const ArrivingSort& sort) override {
    const std::optional<cuda::RadixKeyType> type = RadixTypeOf(sort.keys.type);
    if (!type) return absl::InvalidArgumentError("GPU radix engine: numeric keys only");
    if (!sort.indices.empty() && sort.indices.size() != sort.keys.size) {
      return absl::InvalidArgumentError("indices: size must match keys");
    }
    cuda::GpuArrivingJob job;
    job.key_type = *type;
    job.descending = sort.order == SortOrder::kDescending;
    job.num_items = sort.keys.size;
    job.keys = sort.keys.data;
    job.values = sort.values;
    job.value_bytes = static_cast<int>(sort.value_width);
    job.indices = sort.indices.empty() ? nullptr : sort.indices.data();
    job.input = sort.input;
    job.key_blocks = sort.key_blocks;
    // GPUs in turn, until one has an arriving slot free.
    const size_t first = next_start_.fetch_add(1, std::memory_order_relaxed);
    std::string busy = "no healthy GPU";
    const absl::Time now = clock_();
    for (size_t tried = 0; tried < workers_.size(); ++tried) {
      const size_t index = (first + tried) % workers_.size();
      cuda::GpuWorker* worker = workers_[index].get();
      if (!Serves(index, now)) continue;
      const cuda::GpuSortReport report = worker->SortArriving(job);
      if (report.outcome == cuda::GpuSortOutcome::kBusy) {
        busy = report.message;
        continue;
      }
      if (report.outcome == cuda::GpuSortOutcome::kAbandoned) {
        return absl::CancelledError(report.message);
      }
      // Over the pool: not a fallback yet (the sort after the upload may
      // still run on the GPU in chunks, and counts its own outcome).
      if (report.outcome == cuda::GpuSortOutcome::kNoMemory) {
        return absl::UnavailableError(report.message);
      }
      return Outcome(*worker, report);
    }
    return absl::UnavailableError(busy);
  }

  absl::Status SortBatch(DataType type, SortOrder order,
                         absl::Span<const BatchItem> items) override {
    const std::optional<cuda::RadixKeyType> radix_type = RadixTypeOf(type);
    if (!radix_type) return absl::InvalidArgumentError("GPU batches: numeric keys only");
    std::vector<cuda::GpuBatchSegment> segments(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      const BatchItem& item = items[i];
      if (!item.indices.empty() && item.indices.size() != item.size) {
        return absl::InvalidArgumentError("indices: size must match keys");
      }
      segments[i].keys_in = item.keys_in;
      segments[i].keys_out = item.keys_out;
      segments[i].indices = item.indices.empty() ? nullptr : item.indices.data();
      segments[i].num_items = item.size;
    }
    cuda::GpuWorker* worker = Pick();
    if (worker == nullptr) return absl::UnavailableError("no healthy GPU");
    cuda::GpuBatchJob job;
    job.key_type = *radix_type;
    job.descending = order == SortOrder::kDescending;
    job.segments = segments.data();
    job.num_segments = segments.size();
    return Outcome(*worker, worker->SortBatch(job));
  }

  size_t BatchCapacity(DataType type) const override {
    // Segments of any length: those past the shared-memory bins are merge
    // sorted together (a few launches for all), so --max_batch_request_keys
    // is the only bound.
    return RadixTypeOf(type) ? std::numeric_limits<size_t>::max() : 0;
  }

  EngineKind NumericKind(size_t size, bool with_indices) const override {
    return with_indices && size > kGpuRadixSingleLaunchMaxKeys && size < profile_.merge_argsort_max_keys
               ? EngineKind::kGpuMerge
               : EngineKind::kGpuRadix;
  }

  GpuDispatchProfile dispatch_profile() const override { return profile_; }

  absl::Status ArgsortBytes(absl::Span<const std::string_view> keys, SortOrder order,
                            absl::Span<uint64_t> indices) override {
    if (indices.size() != keys.size()) {
      return absl::InvalidArgumentError("indices: size must match keys");
    }
    cuda::GpuWorker* worker = Pick();
    if (worker == nullptr) return absl::UnavailableError("no healthy GPU");
    cuda::GpuBytesJob job;
    job.descending = order == SortOrder::kDescending;
    job.num_items = keys.size();
    job.keys = keys.data();
    job.indices = indices.data();
    return Outcome(*worker, worker->ArgsortBytes(job));
  }

  // Worker outcome -> status (UNAVAILABLE: host arrays intact, the
  // dispatcher sorts on the CPU), with metrics.
  absl::Status Outcome(cuda::GpuWorker& worker, const cuda::GpuSortReport& report) {
    UpdateRotation(worker, report.outcome);
    switch (report.outcome) {
      case cuda::GpuSortOutcome::kOk:
        if (observer_ != nullptr) {
          observer_->OnGpuSort(worker.device(), report.h2d_seconds, report.kernel_seconds,
                               report.d2h_seconds, report.pool_bytes);
        }
        return absl::OkStatus();
      case cuda::GpuSortOutcome::kBusy:
      case cuda::GpuSortOutcome::kAbandoned:
        return absl::UnavailableError(report.message);
      case cuda::GpuSortOutcome::kNoMemory:
        if (observer_ != nullptr) observer_->OnGpuFallback(worker.device(), GpuFallbackReason::kMemory);
        return absl::UnavailableError(report.message);
      case cuda::GpuSortOutcome::kFailedIntact:
        if (observer_ != nullptr) observer_->OnGpuFallback(worker.device(), GpuFallbackReason::kError);
        return absl::UnavailableError(report.message);
      case cuda::GpuSortOutcome::kFailedDirty:
        // Output was partly written: the request fails (counted as an error).
        if (observer_ != nullptr) observer_->OnGpuFallback(worker.device(), GpuFallbackReason::kError);
        return absl::InternalError(report.message);
    }
    return absl::InternalError("GPU engine: unknown outcome");
  }

 private:
  // The worker of CUDA device `device` when it serves now, else null.
  cuda::GpuWorker* ServingOn(int device) {
    const absl::Time now = clock_();
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (workers_[i]->device() == device && Serves(i, now)) return workers_[i].get();
    }
    return nullptr;
  }

  // The healthy GPU with the fewest jobs in flight, ties rotating
  // (core/gpu_placement.h).
  cuda::GpuWorker* Pick() {
    const absl::Time now = clock_();
    const size_t picked = PickGpu(
        workers_.size(), next_start_.fetch_add(1, std::memory_order_relaxed),
        [&](size_t i) { return GpuLoad{Serves(i, now), workers_[i]->in_flight()}; });
    return picked == kNoGpu ? nullptr : workers_[picked].get();
  }

  // Worker i takes new jobs: no sticky error, and in rotation.
  bool Serves(size_t i, absl::Time now) const {
    return workers_[i]->healthy() && rotation_[i]->InRotation(now);
  }

  // CUDA errors count towards taking the GPU out of rotation, completed
  // jobs end the streak; busy, abandoned and out-of-memory outcomes say
  // nothing about the GPU's health.
  void UpdateRotation(cuda::GpuWorker& worker, cuda::GpuSortOutcome outcome) {
    size_t i = 0;
    while (i < workers_.size() && workers_[i].get() != &worker) ++i;
    if (i == workers_.size()) return;
    GpuRotation::Change change = GpuRotation::Change::kNone;
    if (outcome == cuda::GpuSortOutcome::kOk) {
      change = rotation_[i]->OnSuccess(clock_());
    } else if (outcome == cuda::GpuSortOutcome::kFailedIntact || outcome == cuda::GpuSortOutcome::kFailedDirty) {
      change = rotation_[i]->OnFailure(clock_());
    }
    if (change != GpuRotation::Change::kNone && observer_ != nullptr) {
      observer_->OnGpuRotation(worker.device(), change == GpuRotation::Change::kRestored);
    }
  }

  std::vector<std::unique_ptr<cuda::GpuWorker>> workers_;
  std::vector<std::unique_ptr<GpuRotation>> rotation_;  // per worker
  std::function<absl::Time()> clock_;
  std::atomic<size_t> next_start_{0};
  GpuEngineObserver* observer_;
  // The options' thresholds, else the first GPU's profile.
  static GpuDispatchProfile ResolvedProfile(const GpuEngineOptions& options, int device) {
    GpuDispatchProfile p = GpuDispatchProfileOfDevice(device);
    if (options.min_keys.has_value()) p.min_keys = *options.min_keys;
    if (options.merge_argsort_max_keys.has_value()) p.merge_argsort_max_keys = *options.merge_argsort_max_keys;
    return p;
  }

  const GpuDispatchProfile profile_;
  std::string description_;
};

}  // namespace

bool GpuEngineBuilt() { return true; }

static_assert(kGpuRadixSingleLaunchMaxKeys == cuda::RadixSortProblem{}.single_launch_max_items,
              "argsorts the dispatcher keeps on radix are those its single-launch path takes");

GpuDispatchProfile GpuDispatchProfileOfDevice(int device) {
  return GpuDispatchProfileFor(cuda::RadixTuningName(cuda::RadixTuningFor(device)));
}

namespace {
std::optional<cuda::RadixTuning> ParseRadixTuning(const std::string& name) {
  for (cuda::RadixTuning t : {cuda::RadixTuning::kAuto, cuda::RadixTuning::kH100, cuda::RadixTuning::kH200}) {
    if (name == cuda::RadixTuningName(t)) return t;
  }
  return std::nullopt;
}
std::optional<cuda::RadixRanks> ParseRadixRanks(const std::string& name) {
  for (cuda::RadixRanks r : {cuda::RadixRanks::kAuto, cuda::RadixRanks::kCountOrder, cuda::RadixRanks::kMatched}) {
    if (name == cuda::RadixRanksName(r)) return r;
  }
  return std::nullopt;
}
}  // namespace

absl::StatusOr<std::unique_ptr<GpuEngine>> GpuEngine::Create(const GpuEngineOptions& options) {
  const std::optional<cuda::RadixTuning> tuning = ParseRadixTuning(options.radix_tuning);
  if (!tuning.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("radix tuning \"", options.radix_tuning,
                                                   "\": must be auto, h100 or h200"));
  }
  const std::optional<cuda::RadixRanks> ranks = ParseRadixRanks(options.radix_ranks);
  if (!ranks.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("radix ranks \"", options.radix_ranks,
                                                   "\": must be auto, count-order or matched"));
  }
  cuda::PinRadixTuning(*tuning);
  cuda::PinRadixRanks(*ranks);
  std::string list_error;
  const std::vector<GpuDevice> gpus = ListGpus(&list_error);
  if (gpus.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no GPU found", list_error.empty() ? "" : absl::StrCat(" (", list_error, ")")));
  }
  for (int wanted : options.devices) {
    if (std::none_of(gpus.begin(), gpus.end(), [&](const GpuDevice& g) { return g.ordinal == wanted; })) {
      return absl::FailedPreconditionError(absl::StrCat("GPU ", wanted, " is not visible (", gpus.size(),
                                                        " visible)"));
    }
  }
  std::vector<std::unique_ptr<cuda::GpuWorker>> workers;
  std::vector<std::string> names;
  std::vector<std::string> errors;
  for (const GpuDevice& gpu : gpus) {
    if (!options.devices.empty() &&
        std::find(options.devices.begin(), options.devices.end(), gpu.ordinal) == options.devices.end()) {
      continue;
    }
    cuda::GpuWorkerOptions w;
    w.device = gpu.ordinal;
    w.slots = options.slots_per_gpu;
    w.arriving_slots = options.arriving_slots_per_gpu;
    w.max_pool_bytes = options.max_pool_bytes;
    w.staging_chunk_bytes = options.staging_chunk_bytes;
    w.blocking_wait = options.blocking_wait;
    if (options.fault_hook) {
      w.fault_hook = [hook = options.fault_hook, device = gpu.ordinal](const char* step) {
        return hook(device, step);
      };
    }
    std::string error;
    std::unique_ptr<cuda::GpuWorker> worker = cuda::GpuWorker::Create(w, &error);
    if (worker == nullptr) {  // serve with the GPUs that work
      errors.push_back(error);
      continue;
    }
    names.push_back(absl::StrCat(gpu.ordinal, ":", gpu.name, " pool<=",
                                 worker->max_pool_bytes() >> 20, "MiB tuning=",
                                 cuda::RadixTuningName(cuda::RadixTuningFor(gpu.ordinal)), " ranks=",
                                 cuda::RadixRanksName(cuda::RadixRanksFor(gpu.ordinal))));
    workers.push_back(std::move(worker));
  }
  if (workers.empty()) return absl::UnavailableError(absl::StrJoin(errors, "; "));
  std::string description = absl::StrCat("GPUs ", absl::StrJoin(names, ", "), ", ",
                                         options.slots_per_gpu, " streams each");
  if (options.arriving_slots_per_gpu > 0) {
    absl::StrAppend(&description, " + ", options.arriving_slots_per_gpu,
                    " for sort sessions' arriving parts");
  }
  if (!errors.empty()) absl::StrAppend(&description, "; not serving: ", absl::StrJoin(errors, "; "));
  return std::unique_ptr<GpuEngine>(
      new GpuRadixEngine(std::move(workers), options, std::move(description)));
}

}  // namespace sortd
