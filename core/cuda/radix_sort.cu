// OneSweep radix sort with the default tuning (radix_tuning.cuh).
#include "core/cuda/radix_sort.cuh"
#include "core/cuda/radix_sort_impl.cuh"

namespace sortd::cuda {

cudaError_t RadixSort(void* d_temp_storage, size_t& temp_storage_bytes,
                      const RadixSortProblem& problem, cudaStream_t stream,
                      RadixSortStats* stats) {
  return detail::RadixSortTuned<OneSweepTuning<uint32_t>, OneSweepTuning<uint64_t>>(
      d_temp_storage, temp_storage_bytes, problem, stream, stats);
}

}  // namespace sortd::cuda
