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

// kAuto when the device could not be asked (not kept: asked again next time).
RadixTuning FromProperties(int device) {
  int l2 = 0;
  if (cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device) != cudaSuccess) {
    cudaGetLastError();  // clear it: the sort itself reports real errors
    return RadixTuning::kAuto;
  }
  return l2 >= kH200ClassL2Bytes ? RadixTuning::kH200 : RadixTuning::kH100;
}

cudaError_t SortWith(RadixTuning tuning, void* d_temp_storage, size_t& temp_storage_bytes,
                     const RadixSortProblem& problem, cudaStream_t stream, RadixSortStats* stats) {
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
    size_t h100 = 0, h200 = 0;
    cudaError_t err = SortWith(RadixTuning::kH100, nullptr, h100, problem, stream, stats);
    if (err == cudaSuccess) err = SortWith(RadixTuning::kH200, nullptr, h200, problem, stream, stats);
    temp_storage_bytes = std::max(h100, h200);
    return err;
  }
  int device = 0;
  if (cudaError_t err = cudaGetDevice(&device); err != cudaSuccess) return err;
  return SortWith(RadixTuningFor(device), d_temp_storage, temp_storage_bytes, problem, stream, stats);
}

}  // namespace sortd::cuda
