// The GPU worker's transfer pipeline. Every job kind describes what it
// moves as a list of extents: pieces of host or device memory, each tagged
// with its kind (the shape Triton gives its inputs). An upload fills one
// contiguous device range from the list in order; a download empties one
// into it. Per extent the pipeline picks the copy: one DMA for page-locked
// host memory (session buffers, shared-memory regions) and device memory
// (CUDA IPC regions, cudaMemcpyDefault), or the slot's two pinned staging
// chunks for pageable memory, where the host copy of one chunk overlaps the
// DMA of the other and consecutive small extents (a batch's arrays, byte
// strings, the slices of sorted runs) share a chunk. Input that is still
// arriving is uploaded range by range as it lands (core/arriving_input.h):
// each range is a one-extent upload, and the staging turn carries over.
#ifndef SORTD_CORE_CUDA_TRANSFER_CUH_
#define SORTD_CORE_CUDA_TRANSFER_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace sortd::cuda {

// Where an array lies, as the copies see it: pageable host memory (moved
// through the staging chunks), page-locked host memory (DMA) or device
// memory (device to device; the CPU must never touch it).
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

// `bytes` of device-side data at `data`, of `kind`. A null `data` is a
// hole: an upload leaves those device bytes unwritten (padding that is
// never read), a download skips them (an array nobody wants back).
struct Extent {
  void* data = nullptr;
  size_t bytes = 0;
  MemoryKind kind = MemoryKind::kPageable;
};

inline Extent HostExtent(const void* data, size_t bytes, MemoryKind kind = MemoryKind::kPageable) {
  return Extent{const_cast<void*>(data), bytes, kind};
}
inline Extent Hole(size_t bytes) { return Extent{nullptr, bytes, MemoryKind::kPageable}; }

// Extent lists are views: anything with size() and operator[](i) returning
// an Extent (std::vector<Extent> is one). These two build the others without
// materializing a list: a single extent, and extents computed per index (a
// batch's arrays, a request's strings, a block's slices of sorted runs).
struct OneExtent {
  Extent extent;
  size_t size() const { return 1; }
  Extent operator[](size_t) const { return extent; }
};

template <typename At>
struct ExtentsOf {
  size_t count;
  At at;
  size_t size() const { return count; }
  Extent operator[](size_t i) const { return at(i); }
};

template <typename At>
ExtentsOf<At> ExtentsFrom(size_t count, At at) {
  return ExtentsOf<At>{count, at};
}

// A slot's staging: two pinned chunks alternating on the slot's stream,
// each with an event that marks its last transfer. `turn` names the chunk
// the next transfer takes and carries across calls, so that a series of
// small uploads (the ranges of an arriving input) also fills one chunk
// while the other moves.
// The chunks are pinned on first use (AllocateChunks): a slot that only
// ever moves pinned or device memory (sort sessions, shared regions) holds
// none, which keeps the server's resident memory at the arrays it serves
// (issue #17: 2 x 8 MiB per slot, 48 MiB per GPU by default).
struct Staging {
  cudaStream_t stream = nullptr;
  void* chunk[2] = {nullptr, nullptr};
  cudaEvent_t done[2] = {nullptr, nullptr};
  size_t chunk_bytes = 0;
  unsigned turn = 0;

  cudaError_t AllocateChunks() {
    for (void*& p : chunk) {
      if (p != nullptr) continue;
      if (cudaError_t err = cudaMallocHost(&p, chunk_bytes); err != cudaSuccess) {
        p = nullptr;
        return err;
      }
    }
    return cudaSuccess;
  }
};

// Host -> device: the extents, in order, fill dev[0, sum of their bytes).
template <typename Extents>
cudaError_t Upload(Staging& s, void* dev, const Extents& source) {
  char* const base = static_cast<char*>(dev);
  size_t at = 0;           // device offset of the next byte
  char* chunk = nullptr;   // the chunk being filled (null: none open)
  size_t chunk_at = 0;     // its device offset
  size_t fill = 0;         // its bytes so far
  int b = 0;
  auto flush = [&]() -> cudaError_t {
    if (chunk == nullptr) return cudaSuccess;
    chunk = nullptr;
    cudaError_t err = cudaMemcpyAsync(base + chunk_at, s.chunk[b], fill, cudaMemcpyHostToDevice, s.stream);
    return err == cudaSuccess ? cudaEventRecord(s.done[b], s.stream) : err;
  };
  auto open = [&]() -> cudaError_t {
    if (cudaError_t err = s.AllocateChunks(); err != cudaSuccess) return err;
    b = static_cast<int>(s.turn++ & 1);
    // The chunk's previous transfer (this job's or an earlier one's) must
    // be done before its bytes are overwritten.
    chunk = static_cast<char*>(s.chunk[b]);
    chunk_at = at;
    fill = 0;
    return cudaEventSynchronize(s.done[b]);
  };
  cudaError_t err = cudaSuccess;
  for (size_t i = 0; i < source.size(); ++i) {
    const Extent e = source[i];
    if (e.bytes == 0) continue;
    if (e.data == nullptr) {
      if (chunk != nullptr && fill + e.bytes <= s.chunk_bytes) {
        fill += e.bytes;  // a gap inside the chunk; its bytes are never read
        at += e.bytes;
        if (fill == s.chunk_bytes && (err = flush()) != cudaSuccess) return err;
        continue;
      }
      if ((err = flush()) != cudaSuccess) return err;
      at += e.bytes;
      continue;
    }
    if (CopiesDirectly(e.kind)) {
      if ((err = flush()) != cudaSuccess) return err;
      err = cudaMemcpyAsync(base + at, e.data, e.bytes, cudaMemcpyDefault, s.stream);
      if (err != cudaSuccess) return err;
      at += e.bytes;
      continue;
    }
    const char* src = static_cast<const char*>(e.data);
    for (size_t left = e.bytes; left > 0;) {
      if (chunk == nullptr && (err = open()) != cudaSuccess) return err;
      const size_t take = std::min(left, s.chunk_bytes - fill);
      std::memcpy(chunk + fill, src, take);
      fill += take;
      at += take;
      src += take;
      left -= take;
      if (fill == s.chunk_bytes && (err = flush()) != cudaSuccess) return err;
    }
  }
  return flush();
}

// How a download writes device bytes into host extents. CopyOut copies
// them; WidenOut turns 4-byte positions (device) into the callers' uint64
// indices, the one place positions are widened (an extent's bytes count
// device bytes, its data holds twice as many). Widened extents always go
// through staging, so they must be host memory (the planner sends 8-byte
// positions by DMA to pinned and device destinations instead).
struct CopyOut {
  static constexpr bool kDirect = true;
  void operator()(void* host, size_t within, const char* staged, size_t len) const {
    std::memcpy(static_cast<char*>(host) + within, staged, len);
  }
};

struct WidenOut {
  static constexpr bool kDirect = false;
  void operator()(void* host, size_t within, const char* staged, size_t len) const {
    uint64_t* dst = static_cast<uint64_t*>(host) + within / 4;
    const uint32_t* src = reinterpret_cast<const uint32_t*>(staged);
    for (size_t i = 0; i < len / 4; ++i) dst[i] = src[i];
  }
};

// Where a download stands once it returns: `started` became true when the
// first byte was written into a sink (the callers' arrays are dirty from
// then on), and `last` is the event recorded after its last transfer (the
// end of its span on the stream, for timing).
struct DownloadMarks {
  bool started = false;
  cudaEvent_t last = nullptr;
  double host_seconds = 0;  // copying out of staging
};

// Device -> host: dev[0, sum of the extents' bytes) into the extents, in
// order. Direct extents take one DMA each; the others are copied out of the
// staging chunks, two transfers in flight, so that the host copy of one
// chunk overlaps the DMA of the next. Queued behind whatever the stream
// holds (the sort), so a job waits once, for its data.
template <typename Extents, typename Out = CopyOut>
cudaError_t Download(Staging& s, const void* dev, const Extents& sink, DownloadMarks* marks,
                     Out out = Out()) {
  const char* const base = static_cast<const char*>(dev);
  // The plan: direct extents, and staged steps of up to one chunk over
  // consecutive pageable extents (holes included) starting at extent
  // `first`, `within` bytes into it.
  struct Step {
    bool direct;
    int chunk;  // staged: the chunk it went through
    size_t at, len, first, within;
  };
  std::vector<Step> steps;
  {
    size_t at = 0;
    bool open = false;
    for (size_t i = 0; i < sink.size(); ++i) {
      const Extent e = sink[i];
      if (e.bytes == 0) continue;
      if (e.data == nullptr) {
        if (open && steps.back().len + e.bytes <= s.chunk_bytes) {
          steps.back().len += e.bytes;
          if (steps.back().len == s.chunk_bytes) open = false;
        } else {
          open = false;
        }
        at += e.bytes;
        continue;
      }
      if (Out::kDirect && CopiesDirectly(e.kind)) {
        open = false;
        steps.push_back(Step{true, 0, at, e.bytes, i, 0});
        at += e.bytes;
        continue;
      }
      for (size_t done = 0; done < e.bytes;) {
        if (!open) {
          steps.push_back(Step{false, 0, at, 0, i, done});
          open = true;
        }
        const size_t take = std::min(e.bytes - done, s.chunk_bytes - steps.back().len);
        steps.back().len += take;
        done += take;
        at += take;
        if (steps.back().len == s.chunk_bytes) open = false;
      }
    }
  }
  // Steps are queued in order, at most two staged ones in flight (one per
  // chunk), and the staged ones copied out in the same order.
  size_t next = 0, consumed = 0;
  int pending = 0;
  auto enqueue = [&]() -> cudaError_t {
    for (; next < steps.size(); ++next) {
      Step& st = steps[next];
      cudaError_t err;
      if (st.direct) {
        marks->started = true;
        err = cudaMemcpyAsync(sink[st.first].data, base + st.at, st.len, cudaMemcpyDefault, s.stream);
      } else {
        if (pending == 2) break;
        if ((err = s.AllocateChunks()) != cudaSuccess) return err;
        const int b = static_cast<int>(s.turn++ & 1);
        st.chunk = b;
        ++pending;
        err = cudaMemcpyAsync(s.chunk[b], base + st.at, st.len, cudaMemcpyDeviceToHost, s.stream);
        if (err == cudaSuccess) err = cudaEventRecord(s.done[b], s.stream);
      }
      if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
  };
  cudaError_t err = enqueue();
  while (err == cudaSuccess && pending > 0) {
    while (steps[consumed].direct) ++consumed;
    const Step& st = steps[consumed++];
    const int b = st.chunk;
    if ((err = cudaEventSynchronize(s.done[b])) != cudaSuccess) return err;
    marks->started = true;
    const auto start = std::chrono::steady_clock::now();
    const char* staged = static_cast<const char*>(s.chunk[b]);
    size_t i = st.first, within = st.within;
    for (size_t off = 0; off < st.len; ++i, within = 0) {
      const Extent e = sink[i];
      const size_t take = std::min(st.len - off, e.bytes - within);
      if (e.data != nullptr) out(e.data, within, staged + off, take);
      off += take;
    }
    marks->host_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    --pending;
    err = enqueue();
  }
  if (err != cudaSuccess) return err;
  // One mark after everything the download queued (the direct DMAs too).
  marks->last = s.done[0];
  if ((err = cudaEventRecord(s.done[0], s.stream)) != cudaSuccess) return err;
  return cudaEventSynchronize(s.done[0]);
}

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_TRANSFER_CUH_
