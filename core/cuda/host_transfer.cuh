// Host <-> device transfers of the GPU worker's jobs: DMA straight from and
// to pinned host memory, or through a slot's two pinned staging chunks
// (the host copy of one chunk overlapping the DMA of the other), host
// arrays seen as one concatenation, and the widening of 4-byte positions to
// the callers' uint64. Every job kind moves its data through these.
// `Staged` is the worker's slot: a stream, staging[2] (pinned) and
// chunk_done[2] (events).
#ifndef SORTD_CORE_CUDA_HOST_TRANSFER_CUH_
#define SORTD_CORE_CUDA_HOST_TRANSFER_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sortd::cuda {

// Where an array lies, as the copies see it: pageable host memory (moved
// through the staging chunks), page-locked host memory (by DMA: session
// buffers, shared-memory regions) or device memory (device to device: CUDA
// IPC regions; the CPU must never touch it). The direct copies use
// cudaMemcpyDefault, so page-locked and device memory take the same path.
enum class MemoryKind { kPageable, kPinned, kDevice };

inline MemoryKind MemoryKindOf(const void* memory) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, memory) != cudaSuccess) {
    cudaGetLastError();  // not sticky: plain host memory on old runtimes
    return MemoryKind::kPageable;
  }
  switch (attributes.type) {
    case cudaMemoryTypeHost: return MemoryKind::kPinned;
    case cudaMemoryTypeDevice:
    case cudaMemoryTypeManaged: return MemoryKind::kDevice;
    default: return MemoryKind::kPageable;
  }
}

// Whether copies move `kind` directly (no staging chunks).
inline bool CopiesDirectly(MemoryKind kind) { return kind != MemoryKind::kPageable; }

// Host -> device through the two pinned chunks: fill(staging, offset, len)
// puts bytes [offset, offset + len) of the upload into a chunk, and that
// host copy overlaps the DMA of the other chunk. `turn` (optional) carries
// the alternation across calls, so that a series of small uploads (the
// ranges of an arriving input) also fills one chunk while the other moves.
template <typename Staged, typename Fill>
cudaError_t Upload(Staged& s, size_t chunk, void* dev, size_t bytes, Fill fill,
                   unsigned* turn = nullptr) {
  char* dst = static_cast<char*>(dev);
  const unsigned first = turn != nullptr ? *turn : 0;
  for (size_t c = 0, off = 0; off < bytes; ++c, off += chunk) {
    const int b = static_cast<int>((first + c) & 1);
    if (turn != nullptr) *turn = static_cast<unsigned>(first + c + 1);
    const size_t len = std::min(chunk, bytes - off);
    // The chunk's previous transfer (this upload's, or an earlier copy of
    // the job's) must be done before its bytes are overwritten.
    cudaError_t err = cudaEventSynchronize(s.chunk_done[b]);
    if (err != cudaSuccess) return err;
    fill(static_cast<char*>(s.staging[b]), off, len);
    err = cudaMemcpyAsync(dst + off, s.staging[b], len, cudaMemcpyHostToDevice, s.stream);
    if (err == cudaSuccess) err = cudaEventRecord(s.chunk_done[b], s.stream);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

// Host -> device of `bytes` at `host`: one DMA queued on the stream when
// the memory is pinned, else a plain copy through the staging chunks
// (Upload, `turn` as there).
template <typename Staged>
cudaError_t UploadFrom(Staged& s, size_t chunk, void* dev, const void* host, size_t bytes,
                       bool pinned, unsigned* turn = nullptr) {
  if (pinned) return cudaMemcpyAsync(dev, host, bytes, cudaMemcpyDefault, s.stream);
  const char* src = static_cast<const char*>(host);
  return Upload(
      s, chunk, dev, bytes,
      [src](char* staged, size_t off, size_t len) { std::memcpy(staged, src + off, len); }, turn);
}

// Device -> host through the two pinned chunks; consume(staged, offset, len)
// copies each chunk out while the next one transfers. `*last` becomes the
// event recorded after the last chunk's copy.
template <typename Staged, typename Consume>
cudaError_t Download(Staged& s, size_t chunk, const void* dev, size_t bytes, Consume consume,
                     cudaEvent_t* last) {
  const char* src = static_cast<const char*>(dev);
  const size_t chunks = (bytes + chunk - 1) / chunk;
  auto enqueue = [&](size_t c) {
    const int b = static_cast<int>(c & 1);
    const size_t off = c * chunk;
    cudaError_t err = cudaMemcpyAsync(s.staging[b], src + off, std::min(chunk, bytes - off),
                                      cudaMemcpyDeviceToHost, s.stream);
    *last = s.chunk_done[b];
    return err == cudaSuccess ? cudaEventRecord(s.chunk_done[b], s.stream) : err;
  };
  for (size_t c = 0; c < std::min<size_t>(chunks, 2); ++c) {
    cudaError_t err = enqueue(c);
    if (err != cudaSuccess) return err;
  }
  for (size_t c = 0; c < chunks; ++c) {
    const int b = static_cast<int>(c & 1);
    cudaError_t err = cudaEventSynchronize(s.chunk_done[b]);
    if (err != cudaSuccess) return err;
    const size_t off = c * chunk;
    consume(s.staging[b], off, std::min(chunk, bytes - off));
    if (c + 2 < chunks) {
      err = enqueue(c + 2);
      if (err != cudaSuccess) return err;
    }
  }
  return cudaSuccess;
}

// dst[i] = positions[i] for `count` 4-byte positions (device order) into
// the caller's uint64 indices.
inline void WidenPositions(const void* positions, size_t count, uint64_t* dst) {
  const uint32_t* src = static_cast<const uint32_t*>(positions);
  for (size_t i = 0; i < count; ++i) dst[i] = src[i];
}

// Walks the concatenation of `count` host pieces in order (piece i is
// bytes_of(i) bytes): Next(len, fn) calls fn(piece, byte offset in that
// piece, byte offset in this step, bytes) for the next `len` bytes.
template <typename BytesOf>
class ConcatWalker {
 public:
  ConcatWalker(size_t count, BytesOf bytes_of) : count_(count), bytes_of_(bytes_of) {}
  template <typename Fn>
  void Next(size_t len, Fn fn) {
    size_t done = 0;
    while (done < len && piece_ < count_) {
      const size_t piece_bytes = bytes_of_(piece_);
      if (within_ == piece_bytes) {
        ++piece_;
        within_ = 0;
        continue;
      }
      const size_t take = std::min(len - done, piece_bytes - within_);
      fn(piece_, within_, done, take);
      within_ += take;
      done += take;
    }
  }

 private:
  size_t count_;
  BytesOf bytes_of_;
  size_t piece_ = 0;
  size_t within_ = 0;
};

template <typename BytesOf>
ConcatWalker<BytesOf> Concat(size_t count, BytesOf bytes_of) {
  return ConcatWalker<BytesOf>(count, bytes_of);
}

// One upload of a header (header_bytes, padded to header_span; the gap is
// never read) followed by payload_bytes that fill_payload(staged, len)
// writes in order.
template <typename Staged, typename FillPayload>
cudaError_t UploadAfterHeader(Staged& s, size_t chunk, void* dev, const void* header,
                              size_t header_bytes, size_t header_span, size_t payload_bytes,
                              FillPayload fill_payload) {
  const char* h = static_cast<const char*>(header);
  return Upload(s, chunk, dev, header_span + payload_bytes,
                [&](char* staged, size_t off, size_t len) {
                  if (off < header_span) {
                    const size_t head = std::min(len, header_span - off);
                    const size_t real = off < header_bytes ? std::min(head, header_bytes - off) : 0;
                    std::memcpy(staged, h + off, real);
                    staged += head;
                    len -= head;
                  }
                  fill_payload(staged, len);
                });
}

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_HOST_TRANSFER_CUH_
