// GPU discovery. On a machine without a GPU (or a build without CUDA) the
// query must report no devices, not fail; on a GPU host every visible device
// must be described.
#include <gtest/gtest.h>

#include "core/gpu_info.h"

namespace sortd {
namespace {

TEST(GpuInfoTest, ListsDevicesOrNoneWithoutFailing) {
  std::string error;
  std::vector<GpuDevice> gpus = ListGpus(&error);
  if (gpus.empty()) {
    GTEST_SKIP() << "no GPU visible (CUDA built: " << CudaBuilt() << ", query: "
                 << (error.empty() ? "ok" : error) << ")";
  }
  EXPECT_TRUE(CudaBuilt());
  for (size_t i = 0; i < gpus.size(); ++i) {
    const GpuDevice& g = gpus[i];
    EXPECT_EQ(g.ordinal, static_cast<int>(i));
    EXPECT_FALSE(g.name.empty());
    EXPECT_GT(g.memory_bytes, size_t{1} << 30);
    EXPECT_GT(g.multiprocessors, 0);
    EXPECT_GE(g.compute_major, 5);
    std::cout << "GPU " << g.ordinal << ": " << g.name << ", sm_" << g.compute_major
              << g.compute_minor << ", " << g.multiprocessors << " SMs, "
              << (g.memory_bytes >> 20) << " MiB\n";
  }
}

}  // namespace
}  // namespace sortd
