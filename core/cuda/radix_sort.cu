// OneSweep radix sort with the current device's tuning profile
// (radix_tuning.cuh; RadixTuning in radix_sort.cuh).
#include <algorithm>
#include <atomic>

#include "core/cuda/radix_sort.cuh"
#include "core/cuda/radix_sort_impl.cuh"

namespace sortd::cuda {
namespace {

// A device with at least this much L2 gets the H200's tuning (H200: 60 MiB;
// H100: 50 MiB).
constexpr int kH200ClassL2Bytes = 56 << 20;
constexpr int kMaxDevices = 64;

std::atomic<int> pinned_tuning{static_cast<int>(RadixTuning::kAuto)};
// Per device: 0 = not read yet, else RadixTuning + 1 (read once; a race
// reads the same attribute twice and stores the same answer).
std::atomic<int> device_tuning[kMaxDevices];
// The same for ranks: 0 = not checked yet, else RadixRanks + 1.
std::atomic<int> pinned_ranks{static_cast<int>(RadixRanks::kAuto)};
std::atomic<int> device_ranks[kMaxDevices];
// Rounds of the check that kAuto runs (CheckCountOrderRanks).
constexpr int kAutoCheckRounds = 16;

// kAuto when the device could not be asked (not kept: asked again next time).
RadixTuning FromProperties(int device) {
  int l2 = 0;
  if (cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device) != cudaSuccess) {
    cudaGetLastError();  // clear it: the sort itself reports real errors
    return RadixTuning::kAuto;
  }
  return l2 >= kH200ClassL2Bytes ? RadixTuning::kH200 : RadixTuning::kH100;
}

cudaError_t SortWith(RadixTuning tuning, RadixRanks ranks, void* d_temp_storage, size_t& temp_storage_bytes,
                     const RadixSortProblem& problem, cudaStream_t stream, RadixSortStats* stats) {
  // One fallback for every GPU kind (the H200 profile's tiles; the two
  // profiles are the same today): a device that fails the count-order
  // check is not one these profiles were measured on anyway, and one set
  // of kernels less to build.
  if (ranks == RadixRanks::kMatched) {
    return detail::RadixSortTuned<WithMatchedRanks<OneSweepTuningH200<uint32_t>>,
                                  WithMatchedRanks<OneSweepTuningH200<uint64_t>>>(
        d_temp_storage, temp_storage_bytes, problem, stream, stats);
  }
  if (tuning == RadixTuning::kH200) {
    return detail::RadixSortTuned<OneSweepTuningH200<uint32_t>, OneSweepTuningH200<uint64_t>>(
        d_temp_storage, temp_storage_bytes, problem, stream, stats);
  }
  return detail::RadixSortTuned<OneSweepTuningH100<uint32_t>, OneSweepTuningH100<uint64_t>>(
      d_temp_storage, temp_storage_bytes, problem, stream, stats);
}

}  // namespace

RadixTuning RadixTuningFor(int device) {
  const auto pinned = static_cast<RadixTuning>(pinned_tuning.load(std::memory_order_relaxed));
  if (pinned != RadixTuning::kAuto) return pinned;
  std::atomic<int>* kept = device >= 0 && device < kMaxDevices ? &device_tuning[device] : nullptr;
  const int known = kept != nullptr ? kept->load(std::memory_order_relaxed) : 0;
  if (known != 0) return static_cast<RadixTuning>(known - 1);
  const RadixTuning read = FromProperties(device);
  if (read == RadixTuning::kAuto) return RadixTuning::kH100;
  if (kept != nullptr) kept->store(static_cast<int>(read) + 1, std::memory_order_relaxed);
  return read;
}

void PinRadixTuning(RadixTuning tuning) {
  pinned_tuning.store(static_cast<int>(tuning), std::memory_order_relaxed);
}

RadixRanks RadixRanksFor(int device) {
  const auto pinned = static_cast<RadixRanks>(pinned_ranks.load(std::memory_order_relaxed));
  if (pinned != RadixRanks::kAuto) return pinned;
  std::atomic<int>* kept = device >= 0 && device < kMaxDevices ? &device_ranks[device] : nullptr;
  const int known = kept != nullptr ? kept->load(std::memory_order_relaxed) : 0;
  if (known != 0) return static_cast<RadixRanks>(known - 1);
  unsigned long long checked = 0, wrong = 0;
  // A check that cannot run (a CUDA error, which it returns rather than
  // leaves pending) counts as failed and is kept too: checking again before
  // every sort would cost each one an allocation and a device-wide sync.
  const bool ran = CheckCountOrderRanks(device, kAutoCheckRounds, &checked, &wrong) == cudaSuccess;
  const RadixRanks read = ran && wrong == 0 && checked != 0 ? RadixRanks::kCountOrder : RadixRanks::kMatched;
  // Two threads may check at once: both store the same answer.
  if (kept != nullptr) kept->store(static_cast<int>(read) + 1, std::memory_order_relaxed);
  return read;
}

void PinRadixRanks(RadixRanks ranks) { pinned_ranks.store(static_cast<int>(ranks), std::memory_order_relaxed); }

const char* RadixRanksName(RadixRanks ranks) {
  switch (ranks) {
    case RadixRanks::kCountOrder: return "count-order";
    case RadixRanks::kMatched: return "matched";
    default: return "auto";
  }
}

const char* RadixTuningName(RadixTuning tuning) {
  switch (tuning) {
    case RadixTuning::kH100: return "h100";
    case RadixTuning::kH200: return "h200";
    default: return "auto";
  }
}

bool RadixPassIsConcentrated(const unsigned long long* digit_counts, size_t n) {
  return ConcentratedPass(digit_counts, n);
}

bool RadixPassIsHot(const unsigned long long* digit_counts, size_t n) { return HotPass(digit_counts, n); }

cudaError_t RadixSort(void* d_temp_storage, size_t& temp_storage_bytes,
                      const RadixSortProblem& problem, cudaStream_t stream,
                      RadixSortStats* stats) {
  if (d_temp_storage == nullptr) {
    size_t h100 = 0, h200 = 0, matched = 0;
    cudaError_t err = SortWith(RadixTuning::kH100, RadixRanks::kCountOrder, nullptr, h100, problem, stream, stats);
    if (err == cudaSuccess) {
      err = SortWith(RadixTuning::kH200, RadixRanks::kCountOrder, nullptr, h200, problem, stream, stats);
    }
    if (err == cudaSuccess) {
      err = SortWith(RadixTuning::kH200, RadixRanks::kMatched, nullptr, matched, problem, stream, stats);
    }
    temp_storage_bytes = std::max({h100, h200, matched});
    return err;
  }
  int device = 0;
  if (cudaError_t err = cudaGetDevice(&device); err != cudaSuccess) return err;
  return SortWith(RadixTuningFor(device), RadixRanksFor(device), d_temp_storage, temp_storage_bytes, problem,
                  stream, stats);
}

}  // namespace sortd::cuda
