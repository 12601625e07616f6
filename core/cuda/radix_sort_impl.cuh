// OneSweep radix sort, host side: temp-storage layout, pass planning
// (skipping passes whose digit is the same for every key), the
// NaN-preserving modes, and the launches. Templated on the pass tuning so
// that the benchmark can instantiate alternatives; radix_sort.cu
// instantiates the defaults of radix_tuning.cuh. Every launch is checked.
#ifndef SORTD_CORE_CUDA_RADIX_SORT_IMPL_CUH_
#define SORTD_CORE_CUDA_RADIX_SORT_IMPL_CUH_

#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/cuda/merge_sort.cuh"
#include "core/cuda/radix_kernels.cuh"
#include "core/cuda/radix_order_kernel.cuh"
#include "core/cuda/radix_small_kernel.cuh"
#include "core/cuda/radix_sort.cuh"

namespace sortd::cuda::detail {


#define SORTD_CUDA_TRY(call)                 \
  do {                                       \
    cudaError_t sortd_err_ = (call);         \
    if (sortd_err_ != cudaSuccess) return sortd_err_; \
  } while (0)

constexpr size_t kAlign = 256;
inline size_t AlignUp(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// Carves aligned sub-buffers out of one temp allocation (or only sizes
// them when base is null).
class TempLayout {
 public:
  explicit TempLayout(void* base) : base_(static_cast<char*>(base)) {}
  template <typename T>
  T* Take(size_t count) {
    const size_t offset = size_;
    size_ += AlignUp(count * sizeof(T));
    return base_ == nullptr ? nullptr : reinterpret_cast<T*>(base_ + offset);
  }
  size_t size() const { return size_; }

 private:
  char* base_;
  size_t size_ = 0;
};

inline int GridFor(size_t n, int block) {
  const size_t blocks = (n + block - 1) / block;
  return static_cast<int>(std::min<size_t>(std::max<size_t>(blocks, 1), 65535));
}

template <typename Word, typename Tuning>
struct Plan {
  static constexpr int kPasses = sizeof(Word) * 8 / kRadixBits;
  static constexpr int kKeysTile = Tuning::Keys::kBlockThreads * Tuning::Keys::kItemsPerThread;
  static constexpr int kPairsTile = Tuning::Pairs::kBlockThreads * Tuning::Pairs::kItemsPerThread;
  static constexpr int kWidePairsTile = Tuning::WidePairs::kBlockThreads * Tuning::WidePairs::kItemsPerThread;
  static constexpr int kLargeKeysTile = Tuning::LargeKeys::kBlockThreads * Tuning::LargeKeys::kItemsPerThread;
  static constexpr int kLargePairsTile = Tuning::LargePairs::kBlockThreads * Tuning::LargePairs::kItemsPerThread;
  // Status words are sized for the smallest tile of the sizes' configs
  // (most tiles): kMinTile above the small tiles' sizes, MaxTiles below.
  static constexpr int kMinTile = std::min({kKeysTile, kPairsTile, kWidePairsTile, kLargeKeysTile, kLargePairsTile});
  static constexpr bool kHasSmallTiles = !std::is_void_v<typename Tuning::Small>;
  // Tiles a pass over n keys may need status words for. Small tiles count
  // up to the tuning's kSmallTilesMaxItems keys at every n, so that the
  // temp size never shrinks as n grows (a caller may size for the largest
  // of its sorts).
  static size_t MaxTiles(size_t n) {
    size_t tiles = (n + kMinTile - 1) / kMinTile;
    if constexpr (kHasSmallTiles) {
      constexpr size_t kSmallTile = size_t{Tuning::Small::kBlockThreads} * Tuning::Small::kItemsPerThread;
      tiles = std::max(tiles, (std::min(n, Tuning::kSmallTilesMaxItems) + kSmallTile - 1) / kSmallTile);
    }
    return tiles;
  }
};

// Whether the current device lets a block opt in to `bytes` of shared
// memory; read once per device and thread. A failed query answers false
// (the caller then takes a smaller layout: slower, never wrong).
inline bool DeviceGivesBlockSmem(size_t bytes) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  thread_local std::vector<int> optin;  // per device: the attribute + 1, 0 = not read
  if (device >= static_cast<int>(optin.size())) optin.resize(device + 1, 0);
  if (optin[device] == 0) {
    int value = 0;
    if (cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
      cudaGetLastError();
      return false;  // asked again next time
    }
    optin[device] = value + 1;
  }
  return bytes <= static_cast<size_t>(optin[device] - 1);
}

// Which kernel ran a digit pass (ConfigLauncher::Launch).
enum class PassKernel { kPlain, kConcentrated, kHot };

// Launches digit passes of one kernel family (key word, value type,
// transform) with one pass config (OneSweepConfig): picks the offset width
// and stable or unstable ranks, and opts the kernel into large dynamic
// shared memory where its tile needs it. kWideOffsets: also the kernels
// for arrays of 2^32 keys and more (64-bit offsets), which configs used
// only for small sorts leave out (build time).
template <typename Word, typename Value, typename Pass, PassTransform kTransform, bool kWideOffsets = true>
class ConfigLauncher {
  static constexpr int kTile = Pass::kBlockThreads * Pass::kItemsPerThread;
  static constexpr bool kKeysOnly = std::is_same_v<Value, NoValue>;
  static constexpr bool kStageValues = Pass::kStageValues && !kKeysOnly;
  static constexpr size_t kSmem = OneSweepSharedBytes<Word, Value, Pass::kBlockThreads, Pass::kItemsPerThread,
                                                      Pass::kMatch, kStageValues>();
  // The kernel's static shared memory besides: global_base (at most 8
  // bytes per digit), the scan scratch (a word per warp) and two words.
  static constexpr size_t kStaticSmemBound = kRadixBins * sizeof(uint64_t) + 256;
  static constexpr bool kNeedsSmemOptIn = kSmem + kStaticSmemBound > 48 * 1024;
  // sm_90: 228 KiB of shared memory per SM, 1 KiB of it reserved per block.
  static_assert(Pass::kMinBlocks * (kSmem + kStaticSmemBound + 1024) <= 228 * 1024,
                "the tuning's blocks per SM must fit the SM's shared memory");
  // kHot: the kernel that counts and groups the pass's hot digit apart
  // (only launched for passes the plan marks hot, so that other passes
  // keep the leaner kernel).
  template <typename Offset, bool kStableRank, bool kHot>
  static constexpr auto kKernel = OneSweepPassKernel<Word, Value, Offset, Pass::kBlockThreads,
                                                     Pass::kItemsPerThread, Pass::kMinBlocks,
                                                     Pass::kMatch, kTransform, kStableRank,
                                                     ConcentratedRank::kNone, kStageValues, kHot>;
  static constexpr auto kConcentratedKernel =
      OneSweepPassKernel<Word, Value, uint32_t, Pass::kBlockThreads, Pass::kItemsPerThread,
                         Pass::kMinBlocks, Pass::kMatch, kTransform, true, Pass::kConcentrated,
                         kStageValues>;

 public:
  explicit ConfigLauncher(cudaStream_t stream) : stream_(stream) {}

  // The first pass over the input (args.encode) of a keys-only sort needs
  // no stable ranks (see OneSweepPassKernel); the tuning may still ask
  // for them. `concentrated` (the plan marks the pass): the stable kernel
  // that ranks as the tuning's ConcentratedRank says, for arrays below
  // 2^32 keys. `hot` (the plan marks the pass hot, a kind of
  // concentrated pass): with the tuning's kHotDigit, the hot-digit kernel
  // instead (its hot lanes count in registers and group by one ballot, off
  // the shared counters and match words). *ran: which kernel ran.
  cudaError_t Launch(const OneSweepPassArgs<Word, Value>& args, bool concentrated = false, bool hot = false,
                     PassKernel* ran = nullptr) {
    if constexpr (kStageValues) {
      // The staged layout is tuned for sm_90 (227 KiB a block); other GPUs
      // that run the PTX may give a block less (sm_120: 99 KiB).
      if (!DeviceGivesBlockSmem(kSmem + kStaticSmemBound)) {
        return ConfigLauncher<Word, Value, WithoutStagedValues<Pass>, kTransform, kWideOffsets>(stream_).Launch(
            args, concentrated, hot, ran);
      }
    }
    const bool wide = args.n >= (size_t{1} << 32);
    if (wide && !kWideOffsets) return cudaErrorInvalidValue;  // never chosen for such n
    if (ran != nullptr) *ran = PassKernel::kPlain;
    if constexpr (Pass::kHotDigit) {
      if (hot) {
        if (ran != nullptr) *ran = PassKernel::kHot;
        if constexpr (kKeysOnly && Pass::kUnstableFirstPass) {
          if (args.encode) return LaunchNarrowOrWide<false, true>(args, wide);
        }
        return LaunchNarrowOrWide<true, true>(args, wide);
      }
    }
    // The concentrated kernel takes the pass, a first pass too (launched by
    // the host: with few distinct digits the unstable kernel's count
    // atomics serialise; kFewShift in radix_kernels.cuh).
    const bool concentrated_kernel = Pass::kConcentrated != ConcentratedRank::kNone && concentrated && !wide;
    if constexpr (kKeysOnly && Pass::kUnstableFirstPass) {
      if (args.encode && !concentrated_kernel) return LaunchNarrowOrWide<false>(args, wide);
    }
    if constexpr (Pass::kConcentrated != ConcentratedRank::kNone) {
      if (concentrated_kernel) {
        if (ran != nullptr) *ran = PassKernel::kConcentrated;
        return LaunchWith<kConcentratedKernel>(args);
      }
    }
    return LaunchNarrowOrWide<true>(args, wide);
  }

 private:
  template <bool kStableRank, bool kHot = false>
  cudaError_t LaunchNarrowOrWide(const OneSweepPassArgs<Word, Value>& args, bool wide) {
    if constexpr (kWideOffsets) {
      if (wide) return LaunchWith<kKernel<uint64_t, kStableRank, kHot>>(args);
    }
    return LaunchWith<kKernel<uint32_t, kStableRank, kHot>>(args);
  }

  template <auto kernel>
  cudaError_t LaunchWith(const OneSweepPassArgs<Word, Value>& args) {
    // Only tiles past the default 48 KiB of shared memory need the opt-in
    // (per device: set at each launch so that every GPU gets it).
    if constexpr (kNeedsSmemOptIn) {
      SORTD_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(kSmem)));
    }
    const size_t tiles = (args.n + kTile - 1) / kTile;
    // Large sorts launch each pass as a dependent of the kernel before it
    // (dependent_launch.cuh: its blocks may start in that kernel's last wave).
    return LaunchDependent(kernel, static_cast<unsigned int>(tiles), Pass::kBlockThreads, kSmem, stream_,
                           args.n >= kDependentPassMinItems, args);
  }

  cudaStream_t stream_;
};

// The pass config of a sort: the tuning's keys-only or pairs config for
// the value width, or from kLargeTilesMinItems keys its large-tile one, or
// up to its kSmallTilesMaxItems keys its small-tile one (every pass of a sort
// has the same n, so all take the same).
template <typename Word, typename Value, typename Tuning, PassTransform kTransform>
class PassLauncher {
  static constexpr bool kKeysOnly = std::is_same_v<Value, NoValue>;
  static constexpr bool kWide = !kKeysOnly && sizeof(Value) == 8;
  using Pass = std::conditional_t<kKeysOnly, typename Tuning::Keys,
                                  std::conditional_t<kWide, typename Tuning::WidePairs, typename Tuning::Pairs>>;
  using LargePass = std::conditional_t<kKeysOnly, typename Tuning::LargeKeys,
                                       std::conditional_t<kWide, typename Tuning::WidePairs,
                                                          typename Tuning::LargePairs>>;

 public:
  explicit PassLauncher(cudaStream_t stream) : stream_(stream) {}

  // As ConfigLauncher::Launch.
  cudaError_t Launch(const OneSweepPassArgs<Word, Value>& args, bool concentrated = false, bool hot = false,
                     PassKernel* ran = nullptr) {
    if constexpr (!std::is_void_v<typename Tuning::Small>) {
      if (args.n <= Tuning::kSmallTilesMaxItems) {
        return ConfigLauncher<Word, Value, typename Tuning::Small, kTransform, /*kWideOffsets=*/false>(stream_).Launch(
            args, concentrated, hot, ran);
      }
    }
    if constexpr (!std::is_same_v<LargePass, Pass>) {
      if (args.n >= kLargeTilesMinItems) {
        return ConfigLauncher<Word, Value, LargePass, kTransform>(stream_).Launch(args, concentrated, hot, ran);
      }
    }
    return ConfigLauncher<Word, Value, Pass, kTransform>(stream_).Launch(args, concentrated, hot, ran);
  }

 private:
  cudaStream_t stream_;
};

// What every pass of one sort shares, and the slot numbering: slot s uses
// status epoch s + 1 and tile counter s, so no two launches of a sort share
// either (the status words are zeroed once per sort).
template <typename Word>
struct PassShared {
  size_t n = 0;
  KeyMasks<Word> masks;
  const unsigned long long* offsets = nullptr;  // [passes][kRadixBins]
  unsigned long long* status = nullptr;
  unsigned int* tile_counters = nullptr;        // one per slot
  const unsigned int* hot_digits = nullptr;     // [passes] (DigitOffsetsKernel)

  template <typename Value>
  OneSweepPassArgs<Word, Value> Args(int slot, int pass) const {
    OneSweepPassArgs<Word, Value> a;
    a.hot_digit = hot_digits + pass;
    a.n = n;
    a.shift = pass * kRadixBits;
    a.masks = masks;
    a.pass_offsets = offsets + pass * kRadixBins;
    a.status = status;
    a.epoch = static_cast<unsigned int>(slot + 1);
    a.tile_counter = tile_counters + slot;
    return a;
  }
};

// Runs `passes` (digit indices, in order) from keys_in as slots
// first_slot.., ping-ponging so that the last pass writes keys_out.
// `encode`: the first of them maps original bits to ordered words (false
// when a speculative first pass already did). Bit p of `concentrated`
// (`hot`): pass p runs the concentrated (hot-digit) kernel where it can
// (Launch), counted in *stats.
template <typename Word, typename Value, typename Tuning, PassTransform kTransform>
cudaError_t RunPassChain(const std::vector<int>& passes, int first_slot, bool encode,
                         const PassShared<Word>& shared, const Word* keys_in, Word* keys_out,
                         Word* keys_alt, const Value* values_in, Value* values_out,
                         Value* values_alt, cudaStream_t stream, unsigned long long concentrated = 0,
                         unsigned long long hot = 0, RadixSortStats* stats = nullptr) {
  PassLauncher<Word, Value, Tuning, kTransform> launcher(stream);
  const int k = static_cast<int>(passes.size());
  const Word* src_keys = keys_in;
  const Value* src_values = values_in;
  for (int i = 0; i < k; ++i) {
    const bool to_out = (k - 1 - i) % 2 == 0;
    OneSweepPassArgs<Word, Value> a = shared.template Args<Value>(first_slot + i, passes[i]);
    a.keys_in = src_keys;
    a.keys_out = to_out ? keys_out : keys_alt;
    a.values_in = src_values;
    a.values_out = to_out ? values_out : values_alt;
    a.encode = encode && i == 0;
    a.decode = i == k - 1;
    PassKernel ran = PassKernel::kPlain;
    SORTD_CUDA_TRY(launcher.Launch(a, (concentrated >> passes[i]) & 1, (hot >> passes[i]) & 1, &ran));
    if (stats != nullptr) {
      stats->passes_concentrated += ran == PassKernel::kConcentrated;
      stats->passes_hot += ran == PassKernel::kHot;
    }
    src_keys = a.keys_out;
    src_values = a.values_out;
  }
  return cudaSuccess;
}

// A few pinned, mapped host words per thread that PlanToHostKernel writes
// the pass plan into for the host to read; allocated on first use, freed at
// thread exit. (Mapped host memory under unified addressing: every sm_90
// device in a 64-bit process.)
class PinnedPlanWords {
 public:
  static constexpr int kWords = kPlanWords;
  ~PinnedPlanWords() {
    if (words_ != nullptr) cudaFreeHost(words_);  // may fail at process exit: nothing to do
  }
  // *out: the words; *device_out: where a kernel writes them (mapped, so
  // PlanToHostKernel stores there directly; under unified addressing the
  // same address on every device).
  cudaError_t Get(unsigned long long** out, unsigned long long** device_out) {
    if (words_ == nullptr) {
      // A failure is returned and cleared: left pending, it would fail
      // this thread's next sort at its first cudaGetLastError().
      unsigned long long* words = nullptr;
      if (cudaError_t err = cudaHostAlloc(reinterpret_cast<void**>(&words), kWords * sizeof(unsigned long long),
                                          cudaHostAllocPortable | cudaHostAllocMapped);
          err != cudaSuccess) {
        cudaGetLastError();
        return err;
      }
      if (cudaError_t err = cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_words_), words, 0);
          err != cudaSuccess) {
        cudaGetLastError();
        cudaFreeHost(words);
        return err;
      }
      words_ = words;
    }
    *out = words_;
    *device_out = device_words_;
    return cudaSuccess;
  }

 private:
  unsigned long long* words_ = nullptr;
  unsigned long long* device_words_ = nullptr;
};

inline cudaError_t ThreadPlanWords(unsigned long long** out, unsigned long long** device_out) {
  thread_local PinnedPlanWords words;
  return words.Get(out, device_out);
}

// Queues the copy of plan words [first, last) to the host's plan words.
inline cudaError_t PlanToHost(const unsigned long long* plan, unsigned long long* device_host, int first, int last,
                              cudaStream_t stream) {
  PlanToHostKernel<<<1, 64, 0, stream>>>(plan + first, device_host + first, last - first);
  return cudaGetLastError();
}

// Per thread and device, one timing-free event for the plan's read-back,
// created on first use (an event created and destroyed per sort cost host
// time before the first launch, while the GPU waited) and destroyed at
// thread exit (which may fail at process exit: nothing to do).
inline cudaError_t ThreadPlanEvent(int device, cudaEvent_t* out) {
  struct Events {
    std::vector<cudaEvent_t> by_device;
    ~Events() {
      for (cudaEvent_t e : by_device) {
        if (e != nullptr) cudaEventDestroy(e);
      }
    }
  };
  thread_local Events events;
  if (device < 0) return cudaErrorInvalidDevice;
  if (events.by_device.size() <= static_cast<size_t>(device)) events.by_device.resize(device + 1, nullptr);
  cudaEvent_t& event = events.by_device[device];
  if (event == nullptr) SORTD_CUDA_TRY(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  *out = event;
  return cudaSuccess;
}

// Blocks of `kernel` resident per SM on `device` with `threads` threads,
// asked of the runtime once per thread, kernel and device (the order
// kernel's grid is one such wave; asking on every sort was host time
// before the first launch).
inline cudaError_t CachedBlocksPerSm(const void* kernel, int device, int threads, int* out) {
  struct Entry {
    const void* kernel;
    int device, threads, blocks;
  };
  thread_local std::vector<Entry> cache;
  for (const Entry& e : cache) {
    if (e.kernel == kernel && e.device == device && e.threads == threads) {
      *out = e.blocks;
      return cudaSuccess;
    }
  }
  int blocks = 0;
  SORTD_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, 0));
  cache.push_back({kernel, device, threads, blocks});
  *out = blocks;
  return cudaSuccess;
}

inline PassTransform TransformFor(KeyClass c, bool descending) {
  if (c == KeyClass::kFloat) return PassTransform::kFloat;
  return c == KeyClass::kSigned || descending ? PassTransform::kXor : PassTransform::kNone;
}

// Calls fn(std::integral_constant<PassTransform, t>{}) for the runtime t.
template <typename Fn>
cudaError_t WithTransform(PassTransform t, Fn&& fn) {
  switch (t) {
    case PassTransform::kNone: return fn(std::integral_constant<PassTransform, PassTransform::kNone>{});
    case PassTransform::kXor: return fn(std::integral_constant<PassTransform, PassTransform::kXor>{});
    default: return fn(std::integral_constant<PassTransform, PassTransform::kFloat>{});
  }
}

template <typename Index>
cudaError_t Iota(Index* out, size_t n, cudaStream_t stream) {
  IotaKernel<<<GridFor(n, 256), 256, 0, stream>>>(out, n);
  return cudaGetLastError();
}

template <typename T, typename Index>
cudaError_t Gather(const void* in, const Index* index, void* out, size_t n, cudaStream_t stream) {
  GatherKernel<<<GridFor(n, 256), 256, 0, stream>>>(static_cast<const T*>(in), index,
                                                      static_cast<T*>(out), n);
  return cudaGetLastError();
}

template <typename Index>
cudaError_t GatherBytes(int bytes, const void* in, const Index* index, void* out, size_t n,
                        cudaStream_t stream) {
  return bytes == 4 ? Gather<uint32_t>(in, index, out, n, stream)
                    : Gather<uint64_t>(in, index, out, n, stream);
}

// Typed views of the caller's value arrays and the temp alternate buffer.
template <typename Value>
struct ValueBuffers {
  const Value* in = nullptr;
  Value* out = nullptr;
  Value* alt = nullptr;
};

// Calls fn(value tag) for the value width: NoValue, uint32_t or uint64_t.
template <typename Fn>
cudaError_t WithValueType(int value_bytes, Fn&& fn) {
  switch (value_bytes) {
    case 0: return fn(NoValue{});
    case 4: return fn(uint32_t{});
    default: return fn(uint64_t{});
  }
}

// The order kernel (radix_order_kernel.cuh), writing the output as it reads
// wherever that is safe: not where the output overlaps the input, and
// copies only where output and input share their 16-byte alignment (and
// not at all when sorted input may stay where it is).
// Whether the output arrays lie apart from the input ones (keys, and values
// where there are any): the order check may then write the output as it
// reads, and a few runs may be merged from the input into the output.
template <typename Word>
bool OutputApartFromInput(const RadixSortProblem& p) {
  auto apart = [](const void* a, const void* b, size_t bytes) {
    const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
    return x + bytes <= y || y + bytes <= x;
  };
  return apart(p.d_keys_in, p.d_keys_out, p.num_items * sizeof(Word)) &&
         (p.value_bytes == 0 || apart(p.d_values_in, p.d_values_out, p.num_items * p.value_bytes));
}

template <typename Word>
cudaError_t LaunchKeyOrder(const RadixSortProblem& p, const KeyMasks<Word>& masks, unsigned long long* order,
                           const RunBreaks& breaks, int device, int sms, cudaStream_t stream) {
  // 8 vectors (128 bytes) per lane and chunk: H100, 2^26 ordered u32, 95
  // us against 97 with 4 (both reading the shared word every 8th chunk).
  constexpr int kThreads = 256, kVecs = 8;
  constexpr size_t kPer = 16 / sizeof(Word);
  const size_t n = p.num_items;
  auto addr = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); };
  const size_t head = std::min(n, (16 - addr(p.d_keys_in) % 16) % 16 / sizeof(Word));
  const bool writable = OutputApartFromInput<Word>(p);
  const size_t chunks = ((n - head) / kPer + 32 * kVecs - 1) / (32 * kVecs);
  const int warps_per_block = kThreads / 32;
  return WithValueType(p.value_bytes, [&](auto value_tag) {
    using Value = decltype(value_tag);
    // One wave of as many blocks as are resident at once: warps stride over
    // the chunks, so a second wave would start late and finish last.
    auto kernel = ClassOf(p.key_type) == KeyClass::kFloat ? KeyOrderKernel<Word, Value, kThreads, kVecs, true>
                                                          : KeyOrderKernel<Word, Value, kThreads, kVecs, false>;
    int per_sm = 0;
    SORTD_CUDA_TRY(CachedBlocksPerSm(reinterpret_cast<const void*>(kernel), device, kThreads, &per_sm));
    const int blocks = static_cast<int>(std::max<size_t>(
        1, std::min<size_t>((chunks + warps_per_block - 1) / warps_per_block,
                            static_cast<size_t>(sms) * std::max(per_sm, 1))));
    OrderWrites<Word, Value> w;
    w.keys_out = static_cast<Word*>(p.d_keys_out);
    if constexpr (!std::is_same_v<Value, NoValue>) {
      w.values_in = static_cast<const Value*>(p.d_values_in);
      w.values_out = static_cast<Value*>(p.d_values_out);
    }
    w.copy = writable && !p.allow_result_in_input && (addr(p.d_keys_out) - addr(p.d_keys_in)) % 16 == 0;
    w.reverse = writable;
    w.reverse_vectors = n >= head + kPer && (addr(p.d_keys_out) + (n - head - kPer) * sizeof(Word)) % 16 == 0;
    kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const Word*>(p.d_keys_in), n, head, masks, order, w,
                                            breaks);
    return cudaGetLastError();
  });
}

// One key is its own sort; up to a block's tile, one launch
// (SmallRadixSortKernel) with the fewest items per thread that hold n.
template <typename Word>
cudaError_t SortSmall(const RadixSortProblem& p, cudaStream_t stream, RadixSortStats* stats) {
  const size_t n = p.num_items;
  if (n == 1) {
    if (p.d_keys_out != p.d_keys_in) {
      SORTD_CUDA_TRY(cudaMemcpyAsync(p.d_keys_out, p.d_keys_in, sizeof(Word), cudaMemcpyDeviceToDevice, stream));
    }
    if (p.value_bytes > 0 && p.d_values_out != p.d_values_in) {
      SORTD_CUDA_TRY(cudaMemcpyAsync(p.d_values_out, p.d_values_in, p.value_bytes, cudaMemcpyDeviceToDevice,
                                     stream));
    }
    return cudaSuccess;
  }
  SmallSortArgs<Word> a;
  a.keys_in = static_cast<const Word*>(p.d_keys_in);
  a.keys_out = static_cast<Word*>(p.d_keys_out);
  a.values_in = p.d_values_in;
  a.values_out = p.d_values_out;
  a.value_bytes = p.value_bytes;
  a.n = static_cast<unsigned int>(n);
  a.masks = KeyMasks<Word>::For(ClassOf(p.key_type), p.descending ? ~Word{0} : Word{0}, /*nans_present=*/true);
  a.skip_trivial_passes = p.skip_trivial_passes;
  // 256 threads, as few keys each as hold n. More warps with fewer keys
  // each measured slower at 4096 keys (H100: 256 x 16 24.7 us per call,
  // 512 x 8 25.8-26.2, 1024 x 4 29.5; docs/benchmarks.md).
  if (n <= 256 * 4) {
    SmallRadixSortKernel<Word, 256, 4><<<1, 256, 0, stream>>>(a);
  } else if (n <= 256 * 8) {
    SmallRadixSortKernel<Word, 256, 8><<<1, 256, 0, stream>>>(a);
  } else {
    SmallRadixSortKernel<Word, 256, 16><<<1, 256, 0, stream>>>(a);
  }
  if (stats != nullptr) {
    stats->passes_run = stats->passes_total;
    stats->single_launch = true;
  }
  return cudaGetLastError();
}

// Whether the order word settled the sort, and the error of finishing it.
struct PresortedDone {
  bool finished = false;
  cudaError_t error = cudaSuccess;
};

// Input in order (the order word has no kOrderDescent; every key equal
// included), or in reverse order where a reversal is the stable answer (no
// equal neighbours, or keys only without NaNs: equal keys are then equal
// bits), is finished here: left in place where allowed, else copied or
// reversed, unless the order kernel already wrote it while reading.
template <typename Word>
PresortedDone FinishPresorted(const RadixSortProblem& p, unsigned long long order, RadixSortStats* stats,
                              cudaStream_t stream) {
  const size_t n = p.num_items;
  const bool in_order = !(order & kOrderDescent);
  const bool reversible = !(order & kOrderAscent) &&
                          (!(order & kOrderTie) || (p.value_bytes == 0 && !(order & kOrderNan)));
  if (!in_order && !reversible) return {};
  if (stats != nullptr) {
    stats->passes_run = 0;
    stats->presorted = in_order ? RadixSortStats::Presorted::kSorted : RadixSortStats::Presorted::kReversed;
  }
  if (in_order && p.allow_result_in_input) {
    if (stats != nullptr) stats->result_in_input = true;
    return {true, cudaSuccess};
  }
  const unsigned long long written = order & kOrderWritten;
  const bool complete = written == (in_order ? kOrderCopied : kOrderReversedOut);
  if (stats != nullptr) stats->written_while_reading = complete;
  if (complete) return {true, cudaSuccess};
  if (in_order) {
    cudaError_t err = cudaSuccess;
    if (p.d_keys_out != p.d_keys_in) {
      err = cudaMemcpyAsync(p.d_keys_out, p.d_keys_in, n * sizeof(Word), cudaMemcpyDeviceToDevice, stream);
    }
    if (err == cudaSuccess && p.value_bytes > 0 && p.d_values_out != p.d_values_in) {
      err = cudaMemcpyAsync(p.d_values_out, p.d_values_in, n * p.value_bytes, cudaMemcpyDeviceToDevice, stream);
    }
    return {true, err};
  }
  const cudaError_t err = WithValueType(p.value_bytes, [&](auto value_tag) {
    using Value = decltype(value_tag);
    const Value* values_in = nullptr;
    Value* values_out = nullptr;
    if constexpr (!std::is_same_v<Value, NoValue>) {
      values_in = static_cast<const Value*>(p.d_values_in);
      values_out = static_cast<Value*>(p.d_values_out);
    }
    ReverseKernel<Word, Value><<<GridFor((n + 1) / 2, 256), 256, 0, stream>>>(
        static_cast<const Word*>(p.d_keys_in), static_cast<Word*>(p.d_keys_out), values_in, values_out, n);
    return cudaGetLastError();
  });
  return {true, err};
}

// Merges input found to be sorted runs (`run_offsets`: 0, the starts of
// the runs after the first, n) into the output, in the sort's temp storage.
inline cudaError_t MergeFoundRuns(const RadixSortProblem& p, const std::vector<size_t>& run_offsets, void* d_temp,
                                  size_t temp_bytes, RadixSortStats* stats, cudaStream_t stream) {
  const int runs = static_cast<int>(run_offsets.size() - 1);
  if (stats != nullptr) {
    stats->passes_run = 0;
    stats->presorted = RadixSortStats::Presorted::kRuns;
    stats->runs = runs;
  }
  MergeRunsProblem m;
  m.key_type = p.key_type;
  m.descending = p.descending;
  m.num_runs = runs;
  m.h_run_offsets = run_offsets.data();
  m.d_keys_in = p.d_keys_in;
  m.d_keys_out = p.d_keys_out;
  m.value_bytes = p.value_bytes;
  m.d_values_in = p.d_values_in;
  m.d_values_out = p.d_values_out;
  return MergeSortedRuns(d_temp, temp_bytes, m, stream);
}

template <typename Word, typename Tuning>
cudaError_t SortWords(void* d_temp, size_t& temp_bytes, const RadixSortProblem& p,
                      cudaStream_t stream, RadixSortStats* stats) {
  constexpr int kPasses = Plan<Word, Tuning>::kPasses;
  const size_t n = p.num_items;
  const size_t tiles = Plan<Word, Tuning>::MaxTiles(n);
  const KeyClass cls = ClassOf(p.key_type);
  const bool is_float = cls == KeyClass::kFloat;
  const bool wide_index = n > (size_t{1} << 32);
  const size_t index_bytes = wide_index ? 8 : 4;
  const size_t value_slot = std::max<size_t>({static_cast<size_t>(p.value_bytes),
                                              is_float ? sizeof(Word) : 0,
                                              is_float ? index_bytes : 0});

  TempLayout t(d_temp);
  Word* keys_alt = t.Take<Word>(n);
  Word* keys_scratch = is_float ? t.Take<Word>(n) : nullptr;  // NaN modes: discarded keys
  char* values_alt = t.Take<char>(n * value_slot);
  char* index_a = is_float ? t.Take<char>(n * index_bytes) : nullptr;
  char* index_b = is_float ? t.Take<char>(n * index_bytes) : nullptr;
  // hist: [passes][kRadixBins] counts, then the plan words the passes and
  // the host read: the NaN count, the trivial-digit mask, the order bits.
  unsigned long long* hist = t.Take<unsigned long long>(kPasses * kRadixBins + PinnedPlanWords::kWords);
  unsigned long long* offsets = t.Take<unsigned long long>(kPasses * kRadixBins);
  unsigned int* hot_digits = t.Take<unsigned int>(kPasses);  // written by DigitOffsetsKernel
  unsigned long long* status = t.Take<unsigned long long>(std::max<size_t>(tiles, 1) * kRadixBins);
  // Slots: the speculative first pass, then up to kPasses more.
  unsigned int* tile_counters = t.Take<unsigned int>(kPasses + 1);
  const bool read_back = p.skip_trivial_passes || is_float;
  const bool detect_order = read_back && n >= p.presorted_min_items;
  // A few sorted runs are merged (MergeSortedRuns, in this temp storage:
  // nothing of the radix sort's is in use by then), below 2^32 keys, where
  // the output does not overlap the input (a merge pass reads and writes
  // whole runs). The size counts the merge wherever the order may be
  // looked at, whatever presorted_min_items says, so that a size taken
  // with another minimum holds.
  const bool merge_sized = read_back && n < (size_t{1} << 32);
  size_t needed = t.size();
  if (merge_sized) {
    needed = std::max(needed, MergeSortedRunsTempBound(p.key_type, n, p.value_bytes, kMaxRunBreaks + 1));
  }
  const bool merge_runs = merge_sized && detect_order && OutputApartFromInput<Word>(p);
  if (d_temp == nullptr) {
    temp_bytes = needed;
    return cudaSuccess;
  }
  if (temp_bytes < needed) return cudaErrorInvalidValue;
  if (p.value_bytes != 0 && p.value_bytes != 4 && p.value_bytes != 8) return cudaErrorInvalidValue;
  if (stats != nullptr) {
    *stats = RadixSortStats{};
    stats->passes_total = kPasses;
  }
  if (n == 0) return cudaSuccess;
  if (!detect_order && n <= std::min(p.single_launch_max_items, kSmallSortMaxItems)) {
    return SortSmall<Word>(p, stream, stats);
  }

  const Word flip = p.descending ? ~Word{0} : Word{0};
  const Word* keys_in = static_cast<const Word*>(p.d_keys_in);
  Word* keys_out = static_cast<Word*>(p.d_keys_out);
  unsigned long long* plan = hist + kPasses * kRadixBins;  // kPlanWords (radix_kernels.cuh)

  // One zeroing up front, from the histogram to the tile counters (taken
  // in that order above; the offsets between are overwritten anyway):
  // histogram and plan, status words (one zeroing serves every pass:
  // epochs), tile counters. One memset instead of three matters for small
  // sorts, which are launch-bound. Where the order is looked at, the
  // status words and counters (~18 MB at 2^26 keys, ~7 us on the H100) are
  // zeroed only once passes will run: ordered input and sorted runs never
  // use them, and for other input the zeroing moves behind the histogram
  // in the same stream.
  auto zero_span = [&](void* from, const void* to) {
    return cudaMemsetAsync(from, 0, static_cast<size_t>(static_cast<const char*>(to) - static_cast<char*>(from)),
                           stream);
  };
  SORTD_CUDA_TRY(detect_order ? zero_span(hist, plan + PinnedPlanWords::kWords)
                              : zero_span(hist, tile_counters + kPasses + 1));
  // The keys' order first (a launch for random input, one read for ordered
  // input) wherever the plan is read back; then the histogram of every digit
  // in one read (skipped for ordered input), per-digit offsets and the
  // trivial-digit mask.
  int sms = 0, device = 0;
  SORTD_CUDA_TRY(cudaGetDevice(&device));
  SORTD_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const KeyMasks<Word> count_masks = KeyMasks<Word>::For(cls, flip, /*nans_present=*/true);
  const int hist_grid = static_cast<int>(std::min<size_t>(
      static_cast<size_t>(sms) * HistogramTuning::kBlocksPerSm,
      std::max<size_t>(1, (n + HistogramTuning::kBlockThreads - 1) / HistogramTuning::kBlockThreads)));
  auto count_histogram = [&](unsigned long long* order, bool ordered_skip) -> cudaError_t {
    GlobalHistogramKernel<Word, HistogramTuning::kBlockThreads>
        <<<hist_grid, HistogramTuning::kBlockThreads, 0, stream>>>(keys_in, n, count_masks, hist, plan,
                                                                  order, ordered_skip);
    return cudaGetLastError();
  };
  unsigned long long* plan_host = nullptr;
  unsigned long long* plan_host_device = nullptr;  // the same words, for PlanToHostKernel
  cudaEvent_t plan_read = nullptr;
  if (read_back) {
    SORTD_CUDA_TRY(ThreadPlanWords(&plan_host, &plan_host_device));
    SORTD_CUDA_TRY(ThreadPlanEvent(device, &plan_read));
  }
  if (detect_order) {
    // The order word is read back on its own, before anything else is
    // queued but the histogram (which stands down for ordered input, and
    // for random input counts during the round trip): ordered input then
    // leaves no stood-down launches behind it in the stream (H100, 2^26
    // sorted u32: the speculative pass alone cost 14 us of ~175).
    RunBreaks breaks;
    breaks.count = plan + 3;
    breaks.starts = plan + 4;
    breaks.counted = merge_runs;
    SORTD_CUDA_TRY(LaunchKeyOrder<Word>(p, count_masks, plan + 2, breaks, device, sms, stream));
    SORTD_CUDA_TRY(PlanToHost(plan, plan_host_device, 2, kPlanWords, stream));
    SORTD_CUDA_TRY(cudaEventRecord(plan_read, stream));
    SORTD_CUDA_TRY(count_histogram(plan + 2, true));
    SORTD_CUDA_TRY(cudaEventSynchronize(plan_read));
    const unsigned long long order = plan_host[2];
    // The histogram stood down for ordered input and a few runs: count now
    // and sort in full (the speculative pass stands down too:
    // SpeculativeRoute).
    auto count_after_all = [&]() -> cudaError_t {
      SORTD_CUDA_TRY(cudaMemsetAsync(hist, 0, kPasses * kRadixBins * sizeof(unsigned long long) +
                                                  2 * sizeof(unsigned long long), stream));
      return count_histogram(nullptr, false);
    };
    // Where the runs after the first start, sorted, between 0 and n; empty
    // when the plan words do not describe runs (never expected: then the
    // input is sorted in full rather than trusted).
    auto run_offsets_read = [&]() {
      std::vector<size_t> offsets;
      if (plan_host[3] == 0 || plan_host[3] > static_cast<unsigned long long>(kMaxRunBreaks)) return offsets;
      offsets.assign(plan_host + 4, plan_host + 4 + plan_host[3]);
      offsets.push_back(0);
      offsets.push_back(n);
      std::sort(offsets.begin(), offsets.end());
      if (std::adjacent_find(offsets.begin(), offsets.end()) != offsets.end() || offsets.back() != n) {
        offsets.clear();
      }
      return offsets;
    };
    if ((order & kOrderNeither) != kOrderNeither) {
      const PresortedDone done = FinishPresorted<Word>(p, order, stats, stream);
      if (done.finished) return done.error;
      // In reverse order, but with ties a reversal would not keep (pairs, or
      // NaNs).
      SORTD_CUDA_TRY(count_after_all());
    } else if (!SortsInFull(order)) {
      // A few sorted runs (the histogram stood down): merged, unless the
      // plan words do not describe runs.
      const std::vector<size_t> run_offsets = run_offsets_read();
      if (!run_offsets.empty()) return MergeFoundRuns(p, run_offsets, d_temp, temp_bytes, stats, stream);
      SORTD_CUDA_TRY(count_after_all());
    }
  } else {
    SORTD_CUDA_TRY(count_histogram(read_back ? plan + 2 : nullptr, false));
  }
  if (detect_order) SORTD_CUDA_TRY(zero_span(status, tile_counters + kPasses + 1));
  // (Few-digit bits only where they count: keys-only sorts that may run
  // concentrated kernels.)
  DigitOffsetsKernel<kRadixBins><<<kPasses, kRadixBins, 0, stream>>>(
      hist, n, p.skip_trivial_passes, p.value_bytes == 0 && p.concentrated_passes, offsets, plan + 1, hot_digits);
  SORTD_CUDA_TRY(cudaGetLastError());

  PassShared<Word> shared;
  shared.n = n;
  shared.masks = KeyMasks<Word>::For(cls, flip, /*nans_present=*/false);
  shared.offsets = offsets;
  shared.status = status;
  shared.tile_counters = tile_counters;
  shared.hot_digits = hot_digits;
  const PassTransform transform = TransformFor(cls, p.descending);
  // fn(value tag, transform tag, typed value buffers) for this sort's
  // value width and key transform.
  auto with_types = [&](auto&& fn) -> cudaError_t {
    return WithValueType(p.value_bytes, [&](auto value_tag) {
      using Value = decltype(value_tag);
      ValueBuffers<Value> v;
      if constexpr (!std::is_same_v<Value, NoValue>) {
        v.in = static_cast<const Value*>(p.d_values_in);
        v.out = static_cast<Value*>(p.d_values_out);
        v.alt = reinterpret_cast<Value*>(values_alt);
      }
      return WithTransform(transform, [&](auto transform_tag) { return fn(value_tag, transform_tag, v); });
    });
  };

  if (!p.skip_trivial_passes && !is_float) {  // every pass, nothing to read back
    std::vector<int> all(kPasses);
    for (int i = 0; i < kPasses; ++i) all[i] = i;
    if (stats != nullptr) stats->passes_run = kPasses;
    return with_types([&](auto value_tag, auto transform_tag, auto v) {
      using Value = decltype(value_tag);
      return RunPassChain<Word, Value, Tuning, decltype(transform_tag)::value>(
          all, 0, true, shared, keys_in, keys_out, keys_alt, v.in, v.out, v.alt, stream);
    });
  }

  // Plan: which passes run, and whether NaNs force a payload-keeping mode.
  // The host reads the plan back; meanwhile the first pass, launched
  // speculatively, already runs (it decides on the device whether it is
  // needed and where it writes), so the round trip leaves the GPU busy.
  SORTD_CUDA_TRY(PlanToHost(plan, plan_host_device, 0, PinnedPlanWords::kWords, stream));
  SORTD_CUDA_TRY(cudaEventRecord(plan_read, stream));
  SORTD_CUDA_TRY(with_types([&](auto value_tag, auto transform_tag, auto v) {
    using Value = decltype(value_tag);
    OneSweepPassArgs<Word, Value> a = shared.template Args<Value>(/*slot=*/0, /*pass=*/0);
    a.keys_in = keys_in;
    a.keys_out = keys_out;
    a.keys_alt = keys_alt;
    a.values_in = v.in;
    a.values_out = v.out;
    a.values_alt = v.alt;
    a.encode = true;
    a.plan = plan;
    return PassLauncher<Word, Value, Tuning, decltype(transform_tag)::value>(stream).Launch(a);
  }));
  SORTD_CUDA_TRY(cudaEventSynchronize(plan_read));
  const unsigned long long nans = plan_host[0];
  const unsigned long long trivial = plan_host[1];  // 0 unless skipping
  const unsigned long long concentrated =
      p.concentrated_passes ? (trivial >> kConcentratedShift) & ((1ull << kPasses) - 1) : 0;
  const unsigned long long hot = p.concentrated_passes ? (trivial >> kHotShift) & ((1ull << kPasses) - 1) : 0;
  // Ordered input (looked at) that reaches here is reversed with ties and
  // sorted in full. Input not looked at whose every key is equal (every
  // digit trivial) is in order.
  const bool ordered = (plan_host[2] & kOrderNeither) != kOrderNeither;
  const bool all_trivial = p.skip_trivial_passes &&
                           (trivial & ((1ull << kPasses) - 1)) == ((1ull << kPasses) - 1);
  if (all_trivial) {
    const PresortedDone done = FinishPresorted<Word>(p, /*order=*/0, stats, stream);
    if (done.finished) return done.error;
  }
  std::vector<int> passes;
  for (int pass = 0; pass < kPasses; ++pass) {
    if (!((trivial >> pass) & 1)) passes.push_back(pass);
  }
  // The same rule as SpeculativeRoute on the device.
  const bool few_first = (trivial >> kFewShift) & 1;
  const bool first_pass_ran = !ordered && nans == 0 && !(trivial & 1) && !few_first;
  if (stats != nullptr) {
    stats->passes_run = static_cast<int>(passes.size());
    stats->nan_mode = nans > 0;
  }

  if (nans == 0) {
    if (!first_pass_ran) {
      return with_types([&](auto value_tag, auto transform_tag, auto v) {
        using Value = decltype(value_tag);
        return RunPassChain<Word, Value, Tuning, decltype(transform_tag)::value>(
            passes, 1, true, shared, keys_in, keys_out, keys_alt, v.in, v.out, v.alt, stream, concentrated,
            hot, stats);
      });
    }
    // Pass 0 ran and wrote keys_out when the pass count is odd; the rest
    // continue from there.
    const bool first_to_out = passes.size() % 2 == 1;
    const std::vector<int> rest(passes.begin() + 1, passes.end());
    return with_types([&](auto value_tag, auto transform_tag, auto v) {
      using Value = decltype(value_tag);
      return RunPassChain<Word, Value, Tuning, decltype(transform_tag)::value>(
          rest, 1, false, shared, first_to_out ? keys_out : keys_alt, keys_out, keys_alt,
          first_to_out ? v.out : v.alt, v.out, v.alt, stream, concentrated,
          hot, stats);
    });
  }

  // NaN modes (float keys only; the speculative pass did not run).
  shared.masks = KeyMasks<Word>::For(cls, flip, /*nans_present=*/true);
  constexpr PassTransform kFloat = PassTransform::kFloat;
  if (p.value_bytes == 0) {
    // Keys-only with NaNs: all NaNs sort as one key, so the original bits
    // (payloads) ride along as values and become the output keys.
    return RunPassChain<Word, Word, Tuning, kFloat>(passes, 1, true, shared, keys_in, keys_scratch,
                                                    keys_alt, keys_in, keys_out,
                                                    reinterpret_cast<Word*>(values_alt), stream);
  }
  // Pairs with NaN keys: sort (key, index), then gather keys and values.
  auto argsort = [&](auto index_tag) -> cudaError_t {
    using Index = decltype(index_tag);
    Index* idx_in = reinterpret_cast<Index*>(index_a);
    Index* idx_out = reinterpret_cast<Index*>(index_b);
    SORTD_CUDA_TRY(Iota(idx_in, n, stream));
    SORTD_CUDA_TRY((RunPassChain<Word, Index, Tuning, kFloat>(passes, 1, true, shared, keys_in, keys_scratch,
                                                              keys_alt, idx_in, idx_out,
                                                              reinterpret_cast<Index*>(values_alt), stream)));
    SORTD_CUDA_TRY(GatherBytes<Index>(sizeof(Word), keys_in, idx_out, keys_out, n, stream));
    return GatherBytes<Index>(p.value_bytes, p.d_values_in, idx_out, p.d_values_out, n, stream);
  };
  return wide_index ? argsort(uint64_t{}) : argsort(uint32_t{});
}

template <typename Tuning32, typename Tuning64>
cudaError_t RadixSortTuned(void* d_temp_storage, size_t& temp_storage_bytes,
                           const RadixSortProblem& problem, cudaStream_t stream,
                           RadixSortStats* stats) {
  if (RadixKeyBytes(problem.key_type) == 4) {
    return SortWords<uint32_t, Tuning32>(d_temp_storage, temp_storage_bytes, problem, stream, stats);
  }
  return SortWords<uint64_t, Tuning64>(d_temp_storage, temp_storage_bytes, problem, stream, stats);
}

#undef SORTD_CUDA_TRY

}  // namespace sortd::cuda::detail

#endif  // SORTD_CORE_CUDA_RADIX_SORT_IMPL_CUH_
