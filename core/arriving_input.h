// Input that lands in host memory over time: a sort session's parts, each
// copied into place as it arrives from any connection. An engine that can
// start before the last part (the GPU worker copies every part to the
// device as it lands, so the copy overlaps the network) asks it for ranges
// as they complete. No abseil and no CUDA: both core/cuda and the server
// include it.
#ifndef SORTD_CORE_ARRIVING_INPUT_H_
#define SORTD_CORE_ARRIVING_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sortd {

// Elements [begin, end) of one array of the input, now in host memory.
struct ArrivedRange {
  enum Array { kKeys = 0, kValues = 1 };
  Array array = kKeys;
  size_t begin = 0;
  size_t end = 0;
};

// Where an engine may return the sorted keys delta-coded, in the blocks of
// a session's compressed key download (proto/sortd/v1/sorted_blocks.h),
// instead of as they are: sessions whose client asked for coded keys. An
// engine that encodes where the keys are (the GPU: only the coded bytes
// cross PCIe) writes `body` and sets `written`; the keys array then holds
// no sorted keys (it may be `body` itself). One that does not leaves both,
// and the download encodes on the way out.
struct SortedKeyBlocks {
  enum Kind { kUnsigned = 0, kSigned = 1, kFloat = 2 };  // order words
  Kind kind = kUnsigned;
  uint8_t* body = nullptr;  // host memory
  size_t capacity = 0;      // bytes at body; a body that would not fit is not written
  // Out: block b is body[offsets[b], offsets[b + 1]).
  bool written = false;
  std::vector<uint64_t> offsets;
  double encode_seconds = 0;  // on the device, for the logs
};

class ArrivingInput {
 public:
  enum class Next {
    kRange,      // *range holds elements not handed out before
    kComplete,   // every element arrived and was handed out: sort now
    kAbandoned,  // the input will never complete (session ended, expired)
  };
  virtual ~ArrivingInput() = default;
  // Blocks until one of the above. Every element is handed out exactly
  // once, in any order, before kComplete.
  virtual Next Wait(ArrivedRange* range) = 0;
};

}  // namespace sortd

#endif  // SORTD_CORE_ARRIVING_INPUT_H_
