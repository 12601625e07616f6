// The shortest and longest segment of a CSR offsets array, on the host.
// A plain C++ file (not CUDA): the host compiler vectorises the loop here,
// which it did not do inside segmented_sort.cu (~70 us for 65536 segments on
// the H100 host against ~13 us vectorised on the dev VM).
#ifndef SORTD_CORE_CUDA_SEGMENT_BOUNDS_H_
#define SORTD_CORE_CUDA_SEGMENT_BOUNDS_H_

#include <cstdint>

namespace sortd::cuda {

// Segment s is [offsets[s], offsets[s + 1]); segments >= 1.
void SegmentLengthBounds(const uint32_t* offsets, int segments, uint32_t* shortest, uint32_t* longest);

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_SEGMENT_BOUNDS_H_
