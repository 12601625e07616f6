// Input that lands in host memory over time: a sort session's parts, each
// copied into place as it arrives from any connection. An engine that can
// start before the last part (the GPU worker copies every part to the
// device as it lands, so the copy overlaps the network) asks it for ranges
// as they complete. No abseil and no CUDA: both core/cuda and the server
// include it.
#ifndef SORTD_CORE_ARRIVING_INPUT_H_
#define SORTD_CORE_ARRIVING_INPUT_H_

#include <cstddef>

namespace sortd {

// Elements [begin, end) of one array of the input, now in host memory.
struct ArrivedRange {
  enum Array { kKeys = 0, kValues = 1 };
  Array array = kKeys;
  size_t begin = 0;
  size_t end = 0;
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
