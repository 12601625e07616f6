// The transfer pipeline (core/cuda/transfer.cuh) on its own: uploads and
// downloads over random lists of extents that mix pageable, pinned and
// device memory, holes and empty extents, with sizes around the staging
// chunk (a hole that fills a chunk exactly, extents that span several), in
// one call and in many (the staging turn carried across calls, as an
// arriving input's ranges are), and the widening of positions. Skips
// without a GPU.
#include "core/cuda/transfer.cuh"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace sortd::cuda {
namespace {

#define SKIP_WITHOUT_GPU()                                            \
  do {                                                                \
    int count = 0;                                                    \
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {    \
      cudaGetLastError();                                             \
      GTEST_SKIP() << "no GPU";                                       \
    }                                                                 \
  } while (0)

constexpr size_t kChunk = size_t{64} << 10;

// A slot's staging as the worker builds it.
class StagingFixture {
 public:
  StagingFixture() {
    s.chunk_bytes = kChunk;
    EXPECT_EQ(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), cudaSuccess);
    for (int b = 0; b < 2; ++b) {
      EXPECT_EQ(cudaEventCreate(&s.done[b]), cudaSuccess);
      EXPECT_EQ(cudaMallocHost(&s.chunk[b], kChunk), cudaSuccess);
    }
  }
  ~StagingFixture() {
    cudaStreamSynchronize(s.stream);
    for (int b = 0; b < 2; ++b) {
      cudaFreeHost(s.chunk[b]);
      cudaEventDestroy(s.done[b]);
    }
    cudaStreamDestroy(s.stream);
  }
  Staging s;
};

// One extent's memory: `bytes` of its kind plus a guard band after it
// (host kinds), so that a copy that overruns its extent is caught.
struct Piece {
  MemoryKind kind = MemoryKind::kPageable;
  bool hole = false;
  size_t bytes = 0;
  std::vector<uint8_t> pageable;
  uint8_t* pinned = nullptr;
  uint8_t* device = nullptr;
  static constexpr size_t kGuard = 64;

  void* data() {
    if (hole) return nullptr;
    switch (kind) {
      case MemoryKind::kPageable: return pageable.data();
      case MemoryKind::kPinned: return pinned;
      case MemoryKind::kDevice: return device;
    }
    return nullptr;
  }
  Extent extent() { return hole ? Hole(bytes) : Extent{data(), bytes, kind}; }
  // Reads (host view) or writes the extent's bytes and guard.
  std::vector<uint8_t> Read(size_t with_guard) {
    std::vector<uint8_t> out(bytes + with_guard);
    if (kind == MemoryKind::kDevice) {
      EXPECT_EQ(cudaMemcpy(out.data(), device, out.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    } else {
      std::memcpy(out.data(), data(), out.size());
    }
    return out;
  }
  void Write(const std::vector<uint8_t>& in) {
    if (kind == MemoryKind::kDevice) {
      EXPECT_EQ(cudaMemcpy(device, in.data(), in.size(), cudaMemcpyHostToDevice), cudaSuccess);
    } else {
      std::memcpy(data(), in.data(), in.size());
    }
  }
  ~Piece() {
    cudaFreeHost(pinned);
    cudaFree(device);
  }
};

// A random list: sizes around the chunk, every kind, holes (one sized to
// fill what is left of a chunk exactly), empty extents.
std::vector<std::unique_ptr<Piece>> RandomPieces(std::mt19937_64& rng, size_t count) {
  const size_t sizes[] = {0, 1, 3, 8, 100, 4096, kChunk - 1, kChunk, kChunk + 1, 3 * kChunk + 17, 200000};
  std::vector<std::unique_ptr<Piece>> pieces;
  size_t at = 0;
  for (size_t i = 0; i < count; ++i) {
    auto p = std::make_unique<Piece>();
    const unsigned pick = rng() % 10;
    p->hole = pick == 0;
    p->kind = pick == 1 ? MemoryKind::kPinned : pick == 2 ? MemoryKind::kDevice : MemoryKind::kPageable;
    p->bytes = sizes[rng() % (sizeof(sizes) / sizeof(sizes[0]))];
    if (p->hole && rng() % 2 == 0 && at % kChunk != 0) p->bytes = kChunk - at % kChunk;
    // Positions are 4-byte words: keep every extent a multiple of 4 so the
    // same lists serve the widening test.
    p->bytes = p->bytes / 4 * 4;
    at += p->bytes;
    const size_t alloc = p->bytes + Piece::kGuard;
    if (!p->hole) {
      if (p->kind == MemoryKind::kPageable) p->pageable.assign(alloc, 0);
      if (p->kind == MemoryKind::kPinned) {
        EXPECT_EQ(cudaMallocHost(reinterpret_cast<void**>(&p->pinned), alloc), cudaSuccess);
      }
      if (p->kind == MemoryKind::kDevice) {
        EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p->device), alloc), cudaSuccess);
      }
    }
    pieces.push_back(std::move(p));
  }
  return pieces;
}

std::vector<uint8_t> RandomBytes(std::mt19937_64& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

size_t TotalBytes(const std::vector<std::unique_ptr<Piece>>& pieces) {
  size_t total = 0;
  for (const auto& p : pieces) total += p->bytes;
  return total;
}

TEST(GpuTransfer, UploadGathersMixedExtentsInOrderInOneCallOrMany) {
  SKIP_WITHOUT_GPU();
  StagingFixture f;
  std::mt19937_64 rng(7);
  for (int round = 0; round < 40; ++round) {
    auto pieces = RandomPieces(rng, 1 + rng() % 24);
    const size_t total = TotalBytes(pieces);
    std::vector<std::vector<uint8_t>> contents;
    for (auto& p : pieces) {
      contents.push_back(RandomBytes(rng, p->bytes + Piece::kGuard));
      if (!p->hole) p->Write(contents.back());
    }
    uint8_t* dev = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), total + 1), cudaSuccess);
    const bool one_call = round % 2 == 0;
    if (one_call) {
      ASSERT_EQ(Upload(f.s, dev, ExtentsFrom(pieces.size(), [&](size_t i) { return pieces[i]->extent(); })),
                cudaSuccess);
    } else {
      size_t at = 0;
      for (auto& p : pieces) {
        ASSERT_EQ(Upload(f.s, dev + at, OneExtent{p->extent()}), cudaSuccess);
        at += p->bytes;
      }
    }
    ASSERT_EQ(cudaStreamSynchronize(f.s.stream), cudaSuccess);
    std::vector<uint8_t> got(total);
    ASSERT_EQ(cudaMemcpy(got.data(), dev, total, cudaMemcpyDeviceToHost), cudaSuccess);
    size_t at = 0;
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (!pieces[i]->hole) {
        ASSERT_EQ(std::memcmp(got.data() + at, contents[i].data(), pieces[i]->bytes), 0)
            << "round " << round << ", extent " << i << " at " << at;
      }
      at += pieces[i]->bytes;
    }
    cudaFree(dev);
  }
}

TEST(GpuTransfer, DownloadScattersIntoMixedExtentsWithoutOverrunningThem) {
  SKIP_WITHOUT_GPU();
  StagingFixture f;
  std::mt19937_64 rng(11);
  for (int round = 0; round < 40; ++round) {
    auto pieces = RandomPieces(rng, 1 + rng() % 24);
    const size_t total = TotalBytes(pieces);
    const std::vector<uint8_t> source = RandomBytes(rng, total);
    uint8_t* dev = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), total + 1), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dev, source.data(), total, cudaMemcpyHostToDevice), cudaSuccess);
    std::vector<std::vector<uint8_t>> before;
    for (auto& p : pieces) {
      before.push_back(RandomBytes(rng, p->bytes + Piece::kGuard));
      if (!p->hole) p->Write(before.back());
    }
    DownloadMarks marks;
    ASSERT_EQ(Download(f.s, dev, ExtentsFrom(pieces.size(), [&](size_t i) { return pieces[i]->extent(); }),
                       &marks),
              cudaSuccess);
    bool wrote = false;
    size_t at = 0;
    for (size_t i = 0; i < pieces.size(); ++i) {
      Piece& p = *pieces[i];
      if (!p.hole) {
        const std::vector<uint8_t> got = p.Read(Piece::kGuard);
        ASSERT_EQ(std::memcmp(got.data(), source.data() + at, p.bytes), 0)
            << "round " << round << ", extent " << i << " at " << at;
        ASSERT_EQ(std::memcmp(got.data() + p.bytes, before[i].data() + p.bytes, Piece::kGuard), 0)
            << "round " << round << ", extent " << i << ": its guard band was written";
        wrote = wrote || p.bytes > 0;
      }
      at += p.bytes;
    }
    EXPECT_EQ(marks.started, wrote) << "round " << round;
    EXPECT_NE(marks.last, nullptr);
    cudaFree(dev);
  }
}

// A hole that ends exactly where the open staging chunk does: the chunk
// must go out then, and the next extent start a fresh one.
TEST(GpuTransfer, AHoleThatFillsTheOpenChunkExactly) {
  SKIP_WITHOUT_GPU();
  StagingFixture f;
  std::mt19937_64 rng(17);
  const std::vector<uint8_t> head = RandomBytes(rng, 100), tail = RandomBytes(rng, kChunk + 12);
  const std::vector<Extent> source = {HostExtent(head.data(), head.size()), Hole(kChunk - 100),
                                      HostExtent(tail.data(), tail.size())};
  const size_t total = kChunk + tail.size();
  uint8_t* dev = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), total), cudaSuccess);
  ASSERT_EQ(Upload(f.s, dev, source), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(f.s.stream), cudaSuccess);
  std::vector<uint8_t> got(total);
  ASSERT_EQ(cudaMemcpy(got.data(), dev, total, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(std::memcmp(got.data(), head.data(), head.size()), 0);
  EXPECT_EQ(std::memcmp(got.data() + kChunk, tail.data(), tail.size()), 0);
  std::vector<uint8_t> head_back(head.size()), tail_back(tail.size());
  const std::vector<Extent> sink = {HostExtent(head_back.data(), head_back.size()), Hole(kChunk - 100),
                                    HostExtent(tail_back.data(), tail_back.size())};
  DownloadMarks marks;
  ASSERT_EQ(Download(f.s, dev, sink, &marks), cudaSuccess);
  EXPECT_EQ(head_back, head);
  EXPECT_EQ(tail_back, tail);
  cudaFree(dev);
}

TEST(GpuTransfer, WidenedDownloadTurnsPositionsIntoIndicesAndSkipsHoles) {
  SKIP_WITHOUT_GPU();
  StagingFixture f;
  std::mt19937_64 rng(13);
  for (int round = 0; round < 20; ++round) {
    // Host extents only (widening runs on the host), pinned ones included:
    // they go through staging too.
    auto pieces = RandomPieces(rng, 1 + rng() % 16);
    for (auto& p : pieces) {
      if (p->kind == MemoryKind::kDevice) p->hole = true;
    }
    const size_t total = TotalBytes(pieces);
    std::vector<uint32_t> positions(total / 4);
    for (auto& x : positions) x = static_cast<uint32_t>(rng());
    uint32_t* dev = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), total + 4), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dev, positions.data(), total, cudaMemcpyHostToDevice), cudaSuccess);
    // Each host extent holds twice its device bytes (uint64 per position),
    // and one guard element.
    std::vector<std::vector<uint64_t>> indices(pieces.size());
    for (size_t i = 0; i < pieces.size(); ++i) indices[i].assign(pieces[i]->bytes / 4 + 1, ~uint64_t{0});
    auto sink = ExtentsFrom(pieces.size(), [&](size_t i) {
      Piece& p = *pieces[i];
      return p.hole ? Hole(p.bytes) : Extent{indices[i].data(), p.bytes, p.kind};
    });
    DownloadMarks marks;
    ASSERT_EQ(Download(f.s, dev, sink, &marks, WidenOut()), cudaSuccess);
    size_t word = 0;
    for (size_t i = 0; i < pieces.size(); ++i) {
      const size_t words = pieces[i]->bytes / 4;
      if (!pieces[i]->hole) {
        for (size_t k = 0; k < words; ++k) {
          ASSERT_EQ(indices[i][k], positions[word + k]) << "round " << round << ", extent " << i;
        }
        ASSERT_EQ(indices[i][words], ~uint64_t{0}) << "guard of extent " << i;
      }
      word += words;
    }
    cudaFree(dev);
  }
}

}  // namespace
}  // namespace sortd::cuda
