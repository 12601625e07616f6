// The shortest and longest segment of a CSR offsets array, on the host.
// A plain C++ file (not CUDA) at -O3 with an AVX2 clone, so that the loop is
// vectorised (core/cuda/segment_bounds.cc); tested without a GPU
// (tests/core/segment_bounds_test.cc). Measured, 65536 segments, call time
// of SegmentedSort on the H100 host: 82 us with this loop inside
// segmented_sort.cu, 45 us with it here before the AVX2 clone (10-12 us
// with bounds given); the pass alone on the dev VM: 13.3 us baseline, 4.4
// us AVX2.
#ifndef SORTD_CORE_CUDA_SEGMENT_BOUNDS_H_
#define SORTD_CORE_CUDA_SEGMENT_BOUNDS_H_

#include <cstdint>

namespace sortd::cuda {

// Segment s is [offsets[s], offsets[s + 1]); segments >= 1.
void SegmentLengthBounds(const uint32_t* offsets, int segments, uint32_t* shortest, uint32_t* longest);

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_SEGMENT_BOUNDS_H_
