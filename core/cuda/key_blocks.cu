// The device encoder of key_blocks.cuh. One thread block a key block
// (65536 keys); each thread takes one group (4 keys of 32 bits: one
// StreamVByte control byte; 2 keys of 64 bits: one nibble control byte) at
// a time, the groups of a pass over the block side by side, so the loads
// coalesce; a block-wide scan of the groups' data bytes places each
// group's bytes after the ones before it.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <type_traits>

#include "core/cuda/key_blocks.cuh"
#include "sortd/v1/sorted_blocks_mix.h"

namespace sortd::cuda {
namespace {

using Kind = KeyBlocksProblem::Kind;

constexpr int kThreads = 256;
constexpr int kScanThreads = 1024;

// sorted_blocks.cc's order words: signed with the sign bit flipped, floats
// by their order-preserving bits (every bit flipped when negative, else the
// sign bit set; no canonical NaN: every key round-trips), inverted for a
// descending sort.
template <typename W, Kind K, bool kDescending>
__device__ __forceinline__ W ToOrder(W x) {
  constexpr W kSign = W{1} << (sizeof(W) * 8 - 1);
  W y = x;
  if constexpr (K == Kind::kSigned) y = x ^ kSign;
  if constexpr (K == Kind::kFloat) y = (x & kSign) ? static_cast<W>(~x) : static_cast<W>(x | kSign);
  if constexpr (kDescending) y = static_cast<W>(~y);
  return y;
}

// The format's check mixers (sortd/v1/sorted_blocks_mix.h) by width.
__device__ __forceinline__ uint64_t Mix(uint32_t word, uint32_t index) {
  return v1::blocks::Mix32(word, index);
}
__device__ __forceinline__ uint64_t Mix(uint64_t word, uint32_t index) {
  return v1::blocks::Mix64(word, index);
}

// Data bytes of one gap: StreamVByte's 1-4 (32-bit), the nibble codec's
// 0-8 (64-bit).
__device__ __forceinline__ uint32_t GapBytes(uint32_t d) {
  return 1 + (d > 0xFFu) + (d > 0xFFFFu) + (d > 0xFFFFFFu);
}
__device__ __forceinline__ uint32_t GapBytes(uint64_t d) {
  return d == 0 ? 0 : static_cast<uint32_t>((64 - __clzll(static_cast<long long>(d)) + 7) / 8);
}

template <typename W>
struct Group {
  static constexpr uint32_t kKeys = sizeof(W) == 4 ? 4 : 2;
  W gap[kKeys];
  uint32_t length[kKeys];
  uint32_t code = 0;   // the control byte
  uint32_t bytes = 0;  // data bytes
  uint64_t sum = 0;    // the group's share of the block's check
};

// Group g of a block of `count` keys at `keys`: keys [g * kKeys, ...), the
// gap of the first taken from the key before it (from itself for the
// block's first key, whose order word the header holds).
template <typename W, Kind K, bool kDescending>
__device__ __forceinline__ Group<W> LoadGroup(const W* keys, uint32_t count, uint32_t g) {
  constexpr uint32_t kKeys = Group<W>::kKeys;
  Group<W> out;
  const uint32_t first = g * kKeys;
  W prev = ToOrder<W, K, kDescending>(keys[first == 0 ? 0 : first - 1]);
#pragma unroll
  for (uint32_t j = 0; j < kKeys; ++j) {
    const uint32_t i = first + j;
    if (i < count) {
      const W w = ToOrder<W, K, kDescending>(keys[i]);
      out.gap[j] = w - prev;
      prev = w;
      out.length[j] = GapBytes(out.gap[j]);
      out.code |= sizeof(W) == 4 ? (out.length[j] - 1) << (2 * j) : out.length[j] << (4 * j);
      out.bytes += out.length[j];
      out.sum += Mix(w, i);
    } else {
      out.length[j] = 0;
    }
  }
  return out;
}

struct BlockSpan {
  size_t begin;
  uint32_t count;
  uint32_t groups;
};

template <typename W>
__device__ __forceinline__ BlockSpan SpanOf(size_t n) {
  BlockSpan s;
  s.begin = static_cast<size_t>(blockIdx.x) * kKeyBlockKeys;
  s.count = static_cast<uint32_t>(min(static_cast<size_t>(kKeyBlockKeys), n - s.begin));
  s.groups = (s.count + Group<W>::kKeys - 1) / Group<W>::kKeys;
  return s;
}

// A block's payload: coded (one control byte a group, then the data bytes)
// when that is smaller than the keys, else the keys as they are.
template <typename W>
__device__ __forceinline__ uint32_t PayloadBytes(const BlockSpan& s, uint32_t data_bytes) {
  const uint32_t coded = s.groups + data_bytes;
  const uint32_t raw = s.count * static_cast<uint32_t>(sizeof(W));
  return coded < raw ? coded : raw;
}

template <typename W, Kind K, bool kDescending>
__global__ void __launch_bounds__(kThreads) SizeBlocksKernel(const W* keys, size_t n,
                                                             uint64_t* sizes) {
  using Reduce = cub::BlockReduce<uint32_t, kThreads>;
  __shared__ typename Reduce::TempStorage temp;
  const BlockSpan s = SpanOf<W>(n);
  const W* block = keys + s.begin;
  uint32_t bytes = 0;
  for (uint32_t g = threadIdx.x; g < s.groups; g += kThreads) {
    bytes += LoadGroup<W, K, kDescending>(block, s.count, g).bytes;
  }
  const uint32_t data = Reduce(temp).Sum(bytes);
  if (threadIdx.x == 0) sizes[blockIdx.x] = kKeyBlockHeaderBytes + PayloadBytes<W>(s, data);
}

// Exclusive scan of sizes[0, blocks) in place, sizes[blocks] = the total;
// one thread block, each thread a run of entries.
__global__ void __launch_bounds__(kScanThreads) ScanSizesKernel(uint64_t* sizes, size_t blocks) {
  using Scan = cub::BlockScan<uint64_t, kScanThreads>;
  __shared__ typename Scan::TempStorage temp;
  const size_t per = (blocks + kScanThreads - 1) / kScanThreads;
  const size_t begin = min(blocks, threadIdx.x * per);
  const size_t end = min(blocks, begin + per);
  uint64_t local = 0;
  for (size_t i = begin; i < end; ++i) local += sizes[i];
  uint64_t offset = 0, total = 0;
  Scan(temp).ExclusiveSum(local, offset, total);
  for (size_t i = begin; i < end; ++i) {
    const uint64_t size = sizes[i];
    sizes[i] = offset;
    offset += size;
  }
  if (threadIdx.x == 0) sizes[blocks] = total;
}

__device__ __forceinline__ void StoreLE(uint8_t* at, uint64_t v, int bytes) {
  for (int k = 0; k < bytes; ++k) at[k] = static_cast<uint8_t>(v >> (8 * k));
}

template <typename W, Kind K, bool kDescending>
__global__ void __launch_bounds__(kThreads) WriteBlocksKernel(const W* keys, size_t n,
                                                              const uint64_t* offsets,
                                                              uint8_t* body) {
  using Scan = cub::BlockScan<uint32_t, kThreads>;
  using Reduce = cub::BlockReduce<uint64_t, kThreads>;
  __shared__ union {
    typename Scan::TempStorage scan;
    typename Reduce::TempStorage reduce;
  } temp;
  const BlockSpan s = SpanOf<W>(n);
  const W* block = keys + s.begin;
  uint8_t* at = body + offsets[blockIdx.x];
  const uint32_t payload =
      static_cast<uint32_t>(offsets[blockIdx.x + 1] - offsets[blockIdx.x] - kKeyBlockHeaderBytes);
  const uint32_t raw = s.count * static_cast<uint32_t>(sizeof(W));
  uint8_t* out = at + kKeyBlockHeaderBytes;
  uint64_t sum = 0;
  // A coded payload is always smaller than the raw keys (SizeBlocksKernel).
  const bool coded = payload < raw;
  if (coded) {
    uint8_t* control = out;
    uint8_t* data = out + s.groups;
    uint32_t pass_start = 0;  // data bytes of the groups of earlier passes
    for (uint32_t g0 = 0; g0 < s.groups; g0 += kThreads) {
      const uint32_t g = g0 + threadIdx.x;
      Group<W> group;
      if (g < s.groups) group = LoadGroup<W, K, kDescending>(block, s.count, g);
      uint32_t offset = 0, pass_bytes = 0;
      Scan(temp.scan).ExclusiveSum(group.bytes, offset, pass_bytes);
      if (g < s.groups) {
        control[g] = static_cast<uint8_t>(group.code);
        uint8_t* to = data + pass_start + offset;
#pragma unroll
        for (uint32_t j = 0; j < Group<W>::kKeys; ++j) {
          StoreLE(to, group.gap[j], static_cast<int>(group.length[j]));
          to += group.length[j];
        }
      }
      sum += group.sum;
      pass_start += pass_bytes;
      __syncthreads();  // temp.scan is reused by the next pass
    }
  } else {
    const uint8_t* from = reinterpret_cast<const uint8_t*>(block);
    for (uint32_t i = threadIdx.x; i < raw; i += kThreads) out[i] = from[i];
    for (uint32_t i = threadIdx.x; i < s.count; i += kThreads) {
      sum += Mix(ToOrder<W, K, kDescending>(block[i]), i);
    }
  }
  const uint64_t check = Reduce(temp.reduce).Sum(sum);
  if (threadIdx.x == 0) {
    // codec, width, 0 (u16), count, payload, 0 (u32), first, check.
    at[0] = coded ? (sizeof(W) == 4 ? 1 : 2) : 0;
    at[1] = sizeof(W);
    StoreLE(at + 2, 0, 2);
    StoreLE(at + 4, s.count, 4);
    StoreLE(at + 8, payload, 4);
    StoreLE(at + 12, 0, 4);
    StoreLE(at + 16, ToOrder<W, K, kDescending>(block[0]), 8);
    StoreLE(at + 24, check, 8);
  }
}

// The launches, one template instance per (word, kind, order).
struct SizeLaunch {
  const KeyBlocksProblem& p;
  uint64_t* d_offsets;
  cudaStream_t stream;
  template <typename W, Kind K, bool D>
  cudaError_t Run() const {
    SizeBlocksKernel<W, K, D><<<static_cast<unsigned>(KeyBlockCount(p.num_items)), kThreads, 0,
                                stream>>>(static_cast<const W*>(p.d_keys), p.num_items, d_offsets);
    return cudaGetLastError();
  }
};

struct WriteLaunch {
  const KeyBlocksProblem& p;
  const uint64_t* d_offsets;
  uint8_t* d_body;
  cudaStream_t stream;
  template <typename W, Kind K, bool D>
  cudaError_t Run() const {
    WriteBlocksKernel<W, K, D><<<static_cast<unsigned>(KeyBlockCount(p.num_items)), kThreads, 0,
                                 stream>>>(static_cast<const W*>(p.d_keys), p.num_items, d_offsets,
                                           d_body);
    return cudaGetLastError();
  }
};

template <typename W, bool D, typename Launch>
cudaError_t ByKind(const KeyBlocksProblem& p, const Launch& launch) {
  switch (p.kind) {
    case Kind::kSigned: return launch.template Run<W, Kind::kSigned, D>();
    case Kind::kFloat: return launch.template Run<W, Kind::kFloat, D>();
    default: return launch.template Run<W, Kind::kUnsigned, D>();
  }
}

template <typename W, typename Launch>
cudaError_t ByOrder(const KeyBlocksProblem& p, const Launch& launch) {
  return p.descending ? ByKind<W, true>(p, launch) : ByKind<W, false>(p, launch);
}

template <typename Launch>
cudaError_t Dispatch(const KeyBlocksProblem& p, const Launch& launch) {
  if (p.width == 4) return ByOrder<uint32_t>(p, launch);
  if (p.width == 8) return ByOrder<uint64_t>(p, launch);
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t SizeKeyBlocks(const KeyBlocksProblem& p, uint64_t* d_offsets, cudaStream_t stream) {
  const size_t blocks = KeyBlockCount(p.num_items);
  if (blocks > 0) {
    const cudaError_t err = Dispatch(p, SizeLaunch{p, d_offsets, stream});
    if (err != cudaSuccess) return err;
  }
  ScanSizesKernel<<<1, kScanThreads, 0, stream>>>(d_offsets, blocks);
  return cudaGetLastError();
}

cudaError_t WriteKeyBlocks(const KeyBlocksProblem& p, const uint64_t* d_offsets, uint8_t* d_body,
                           cudaStream_t stream) {
  const size_t blocks = KeyBlockCount(p.num_items);
  if (blocks == 0) return cudaSuccess;
  return Dispatch(p, WriteLaunch{p, d_offsets, d_body, stream});
}

}  // namespace sortd::cuda
