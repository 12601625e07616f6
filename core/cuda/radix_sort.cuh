// GPU radix sort (OneSweep): public CUDA-facing API. CUB-shaped: call once
// with d_temp_storage == nullptr to size the temporary storage, then again
// to sort. Every call takes a stream. Depends only on the CUDA runtime (the
// GPU host has no abseil).
#ifndef SORTD_CORE_CUDA_RADIX_SORT_CUH_
#define SORTD_CORE_CUDA_RADIX_SORT_CUH_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace sortd::cuda {

enum class RadixKeyType { kUint32, kInt32, kFloat32, kUint64, kInt64, kFloat64 };

inline constexpr int RadixKeyBytes(RadixKeyType t) {
  return (t == RadixKeyType::kUint32 || t == RadixKeyType::kInt32 ||
          t == RadixKeyType::kFloat32) ? 4 : 8;
}

struct RadixSortProblem {
  RadixKeyType key_type = RadixKeyType::kUint32;
  size_t num_items = 0;
  bool descending = false;
  // Keys: read from d_keys_in (not modified), sorted into d_keys_out.
  const void* d_keys_in = nullptr;
  void* d_keys_out = nullptr;
  // Values (optional): 0, 4 or 8 bytes each, permuted with the keys.
  int value_bytes = 0;
  const void* d_values_in = nullptr;
  void* d_values_out = nullptr;
  // Skip passes whose digit is equal for every key. The host reads the
  // plan back after the histogram (the calling thread waits once, while
  // the first pass already runs on the GPU); float keys always read back
  // their NaN count.
  bool skip_trivial_passes = true;
  // Input already in the requested order is detected before the histogram
  // (wherever the plan is read back: skip_trivial_passes, or float keys;
  // from presorted_min_items keys) and copied instead of sorted; input in
  // strictly reverse order (or, keys only without NaNs, non-increasing) is
  // reversed. Input that is a few sorted runs back to back (at most 32,
  // below 2^32 keys) is merged (MergeSortedRuns) instead of sorted; temp
  // storage is sized for that. With this set, sorted input is not even
  // copied: the result is
  // left in d_keys_in/d_values_in and RadixSortStats::result_in_input says
  // so (the caller reads it from there; CUB's DoubleBuffer does the same).
  bool allow_result_in_input = false;
  // Order detection costs about one launch (5 us on an H100) for random
  // input, 1-3% of a sort of 2^24 keys and under 1% from 2^26
  // (docs/benchmarks.md): below this many keys the input is not looked at.
  size_t presorted_min_items = size_t{1} << 25;
  // Arrays of up to this many keys (capped at 4096, one block's tile) are
  // sorted by one kernel launch: no temp storage used, nothing read back,
  // passes skipped on the GPU. 0 turns it off (tests, benchmarks). Arrays
  // whose order is looked at (presorted_min_items) take the general path.
  size_t single_launch_max_items = 4096;
  // Passes where few distinct digits fill a warp (few distinct keys,
  // skewed bits) run a kernel that finds digit groups with match.any
  // instead of shared atomics (docs/architecture.md, "Ties"); the plan
  // that marks them is made where passes are skipped (skip_trivial_passes).
  // false: every pass runs the plain kernel (tests, benchmarks).
  bool concentrated_passes = true;
};

// Input that is at most this many sorted runs back to back (in the
// requested order) is merged instead of sorted (RadixSortProblem): 32 runs
// are 5 merge passes, about what the radix sort's 4 passes cost for 32-bit
// keys (a merge pass moves the same bytes, with more work a key).
inline constexpr int kRadixMaxMergedRuns = 32;

// What a sort did (for tests, benchmarks and metrics).
struct RadixSortStats {
  int passes_total = 0;     // digit passes of the key width
  int passes_run = 0;       // after skipping
  int passes_concentrated = 0;  // of those, run by the concentrated kernel
  int passes_hot = 0;           // of those, run by the hot-digit kernel
  bool nan_mode = false;    // float keys with NaNs: originals carried as values
  // The input was already in order (0 passes: copied, or left in place when
  // result_in_input) or in reverse order (reversed).
  // kRuns: a few sorted runs (in the requested order, back to back),
  // merged instead of sorted; `runs` says how many.
  enum class Presorted { kNo, kSorted, kReversed, kRuns };
  Presorted presorted = Presorted::kNo;
  int runs = 0;
  bool result_in_input = false;  // see RadixSortProblem::allow_result_in_input
  // Presorted input that the order check wrote to the output as it read it
  // (copied or reversed: one read of the keys in all).
  bool written_while_reading = false;
  // Sorted by the single-launch kernel: it skips trivial passes on the GPU,
  // so the host does not know how many ran (passes_run = passes_total).
  bool single_launch = false;
};

// Sizes temp storage (d_temp_storage == nullptr) or sorts. Stable, both
// directions; floats: -0.0 < +0.0, every NaN after +inf (first when
// descending), NaNs equal (input order) with payloads unchanged.
// The pass tuning is the current device's profile (RadixTuningFor); sizing
// (d_temp_storage == nullptr) answers for every profile, so a size taken
// with another device current still holds.
cudaError_t RadixSort(void* d_temp_storage, size_t& temp_storage_bytes,
                      const RadixSortProblem& problem, cudaStream_t stream,
                      RadixSortStats* stats = nullptr);

// Pass tunings measured per GPU kind (radix_tuning.cuh, docs/benchmarks.md):
// kH200 was tuned on an H200 (60 MB L2, HBM3e); kH100 on an H100 (50 MB L2,
// HBM3), and serves every device with less than 56 MiB of L2. kAuto: each
// device's own, read once per device.
enum class RadixTuning { kAuto, kH100, kH200 };
// The profile sorts on CUDA device `device` use (never kAuto).
RadixTuning RadixTuningFor(int device);
// Pins every device of this process to `tuning` (sortd --gpu_radix_tuning;
// tests); kAuto goes back to each device's own.
void PinRadixTuning(RadixTuning tuning);
const char* RadixTuningName(RadixTuning tuning);  // "auto", "h100", "h200"

// How stable passes rank keys within a warp. kCountOrder: the profiles'
// plain passes take ranks from their shared digit-count atomics, trusting
// the order in which the hardware returns them (radix_tuning.cuh,
// RankMatch::kCountOrder; not documented by CUDA). kMatched: every pass
// finds each key's peers first (match words), whatever the hardware does.
// kAuto: kCountOrder on devices that pass CheckCountOrderRanks, checked
// once per device (the first sort there, or RadixRanksFor, waits a few
// milliseconds for it), else kMatched.
enum class RadixRanks { kAuto, kCountOrder, kMatched };
// The ranks sorts on CUDA device `device` use (never kAuto). A check that
// could not run (a CUDA error) gives kMatched, kept like a failed one.
// kMatched runs the H200 profile's tiles on every GPU kind (the h100
// profile differs only for 32-bit keys with 8-byte values).
RadixRanks RadixRanksFor(int device);
// Pins every device of this process (sortd --gpu_radix_ranks; tests);
// kAuto goes back to each device's check.
void PinRadixRanks(RadixRanks ranks);
const char* RadixRanksName(RadixRanks ranks);  // "auto", "count-order", "matched"
// The check: `rounds` rounds of 32 keys a lane in 2 blocks of 384 threads
// an SM, each count atomic's return compared with the key's stable rank.
// kAuto runs 16 rounds (about 50 million lanes on an H200). Returns the
// lanes checked and the lanes whose count was not their rank.
// reverse_lanes (tests of the check itself): lanes add one at a time from
// the highest, as hardware that returned counts out of lane order would.
cudaError_t CheckCountOrderRanks(int device, int rounds, unsigned long long* lanes_checked,
                                 unsigned long long* lanes_wrong, bool reverse_lanes = false);

// Whether a digit pass whose 256 digit counts over n keys are these runs
// the concentrated kernel (RadixSortProblem::concentrated_passes): the
// plan's rule, on the host (tests).
bool RadixPassIsConcentrated(const unsigned long long* digit_counts, size_t n);
// Whether such a pass runs the hot-digit kernel instead (tunings with
// kHotDigit): a concentrated pass with a hot digit and not too few
// distinct digits in a warp.
bool RadixPassIsHot(const unsigned long long* digit_counts, size_t n);

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_RADIX_SORT_CUH_
