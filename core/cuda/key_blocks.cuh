// Sorted keys delta-coded into blocks on the device: the body of a sort
// session's compressed key download (the format is defined once, in
// proto/sortd/v1/sorted_blocks.h; the GPU test checks that these kernels
// write the same bytes as its CPU encoder). Encoding where the keys are
// means only the coded bytes cross PCIe, and no CPU pass over the keys.
//
// Two steps, so that the blocks land back to back: SizeKeyBlocks sizes
// every block and scans the sizes into offsets (the caller reads the total
// to see whether the body fits where it goes), then WriteKeyBlocks writes
// each block at its offset. Each step reads the keys once.
#ifndef SORTD_CORE_CUDA_KEY_BLOCKS_CUH_
#define SORTD_CORE_CUDA_KEY_BLOCKS_CUH_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace sortd::cuda {

// proto/sortd/v1/sorted_blocks.h's kBlockKeys and kHeaderBytes.
inline constexpr uint32_t kKeyBlockKeys = 65536;
inline constexpr size_t kKeyBlockHeaderBytes = 32;

struct KeyBlocksProblem {
  // How keys map to order words (sorted_blocks.h KeyCoding::Kind).
  enum class Kind : int { kUnsigned = 0, kSigned = 1, kFloat = 2 };
  const void* d_keys = nullptr;  // device, 4 or 8 bytes a key
  size_t num_items = 0;
  int width = 4;
  Kind kind = Kind::kUnsigned;
  bool descending = false;
};

inline size_t KeyBlockCount(size_t num_items) {
  return (num_items + kKeyBlockKeys - 1) / kKeyBlockKeys;
}

// Device bytes of the offsets both steps share: KeyBlockCount + 1 uint64s.
inline size_t KeyBlockOffsetsBytes(size_t num_items) {
  return (KeyBlockCount(num_items) + 1) * sizeof(uint64_t);
}

// Fills d_offsets[0, blocks] with each block's start in the body and, last,
// the body's bytes.
cudaError_t SizeKeyBlocks(const KeyBlocksProblem& p, uint64_t* d_offsets, cudaStream_t stream);

// Writes the blocks into d_body (d_offsets[blocks] bytes) at the offsets
// SizeKeyBlocks computed for the same keys.
cudaError_t WriteKeyBlocks(const KeyBlocksProblem& p, const uint64_t* d_offsets, uint8_t* d_body,
                           cudaStream_t stream);

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_KEY_BLOCKS_CUH_
