// Engine selection: parsing --engine and creating the dispatcher on a
// machine (or build) without a usable GPU engine.
#include "core/dispatcher.h"
#include "core/gpu_engine.h"
#include "core/gpu_info.h"

#include <string>
#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "core/cpu/cpu_tuning.h"
#include "core/types.h"
#include "gtest/gtest.h"

namespace sortd {
namespace {

TEST(ParseEngineChoiceTest, AcceptsAutoCpuGpu) {
  auto a = ParseEngineChoice("auto");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, EngineChoice::kAuto);
  auto c = ParseEngineChoice("cpu");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, EngineChoice::kCpu);
  auto g = ParseEngineChoice("gpu");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(*g, EngineChoice::kGpu);
}

TEST(ParseEngineChoiceTest, RejectsOthers) {
  for (const char* text : {"", "CPU", "Auto", "gpu ", " cpu", "cuda", "radix", "c"}) {
    auto r = ParseEngineChoice(text);
    ASSERT_FALSE(r.ok()) << "\"" << text << "\"";
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

// Each branch asserts what this machine must do; neither is skipped
// silently (the GPU host runs the other one).
TEST(DispatcherTest, GpuChoiceServesOnAGpuOrFailsWithoutOne) {
  DispatcherOptions options;
  options.engine = EngineChoice::kGpu;
  auto d = Dispatcher::Create(options);
  if (ListGpus().empty()) {
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition) << d.status();
  } else {
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_GT((*d)->gpu_count(), 0);
    EXPECT_TRUE((*d)->RoutesToGpu(DataType::kUint32, size_t{1} << 20));
  }
}

TEST(DispatcherTest, AutoRoutesLargeArraysToTheGpuWhenOneServes) {
  if (ListGpus().empty()) GTEST_SKIP() << "no GPU here: auto serves on the CPU (next test)";
  DispatcherOptions options;
  options.engine = EngineChoice::kAuto;
  auto d = Dispatcher::Create(options);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_GT((*d)->gpu_count(), 0);
  EXPECT_TRUE((*d)->RoutesToGpu(DataType::kUint64, size_t{1} << 24));
  EXPECT_FALSE((*d)->RoutesToGpu(DataType::kUint64, 10));
}

// The description (sortd's startup line) names the CPU tuning in force:
// the one asked for, or this CPU's for auto.
TEST(DispatcherTest, DescriptionNamesTheCpuTuning) {
  for (cpu::CpuTuning asked : {cpu::CpuTuning::kAvx2, cpu::CpuTuning::kZen4, cpu::CpuTuning::kZen5, cpu::CpuTuning::kAvx512,
                               cpu::CpuTuning::kAuto}) {
    DispatcherOptions options;
    options.engine = EngineChoice::kCpu;
    options.cpu.tuning = asked;
    auto d = Dispatcher::Create(options);
    ASSERT_TRUE(d.ok()) << d.status();
    const cpu::CpuTuning expected = asked == cpu::CpuTuning::kAuto ? cpu::CpuTuningForThisCpu() : asked;
    EXPECT_TRUE(absl::EndsWith((*d)->description(),
                               std::string(", cpu_sort_tuning=") + cpu::CpuTuningName(expected)))
        << (*d)->description();
  }
}

TEST(DispatcherTest, AutoAndCpuServeOnTheCpuEngine) {
  // With a GPU, auto routes large arrays there (previous test): only the
  // CPU choice is checked here then.
  std::vector<EngineChoice> choices = {EngineChoice::kCpu};
  if (ListGpus().empty()) choices.push_back(EngineChoice::kAuto);
  for (EngineChoice choice : choices) {
    SCOPED_TRACE(choice == EngineChoice::kCpu ? "engine=cpu" : "engine=auto");
    DispatcherOptions options;
    options.engine = choice;
    options.cpu.max_threads = 2;
    auto d = Dispatcher::Create(options);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_FALSE((*d)->description().empty());
    for (DataType t : {DataType::kUint32, DataType::kInt32, DataType::kFloat32,
                       DataType::kUint64, DataType::kInt64, DataType::kFloat64}) {
      for (size_t n : {size_t{0}, size_t{10}, size_t{1} << 30}) {
        EXPECT_EQ((*d)->ForNumeric(t, n).kind(), EngineKind::kCpu);
        EXPECT_FALSE((*d)->RoutesToGpu(t, n));
      }
    }
    EXPECT_EQ((*d)->ForBytes(100).kind(), EngineKind::kCpu);

    // And the engine it hands out sorts.
    std::vector<int32_t> keys = {3, -1, 2};
    ASSERT_TRUE((*d)->ForNumeric(DataType::kInt32, keys.size())
                    .SortNumeric(NumericSpan(keys.data(), keys.size()),
                                 SortOrder::kAscending, {})
                    .ok());
    EXPECT_EQ(keys, (std::vector<int32_t>{-1, 2, 3}));
    // Dispatcher::SortNumeric reports the engine that ran.
    std::vector<double> more = {2.5, -0.0, 0.0, -7};
    auto ran = (*d)->SortNumeric(NumericSpan(more.data(), more.size()), SortOrder::kDescending, {});
    ASSERT_TRUE(ran.ok()) << ran.status();
    EXPECT_EQ(*ran, EngineKind::kCpu);
    EXPECT_EQ(more[0], 2.5);
    EXPECT_EQ(more[3], -7);
    EXPECT_FALSE(std::signbit(more[1]));  // descending: +0.0 before -0.0
    EXPECT_TRUE(std::signbit(more[2]));
    EXPECT_EQ((*d)->gpu_count(), 0);
  }
}

TEST(GpuThresholdTest, AutoOrACount) {
  absl::StatusOr<std::optional<size_t>> t = ParseGpuThreshold("gpu_min_keys", "auto");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->has_value());
  t = ParseGpuThreshold("gpu_min_keys", "24576");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->value_or(0), 24576u);
  t = ParseGpuThreshold("gpu_merge_argsort_max_keys", "0");  // never
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->value_or(1), 0u);
  for (const char* bad : {"lots", "-1", "", "Auto", "12k"}) {
    t = ParseGpuThreshold("gpu_min_keys", bad);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(t.status().message(), std::string("--gpu_min_keys=") + bad + ": must be auto or a number of keys");
  }
}

// Each tuning profile names its own crossovers (measured per kind; since
// 2026-11-28 both kinds measure the same values); names without a profile
// of their own get the H100's (the tuning GPUs outside the H200 class
// get). Merge argsorts start above the radix core's single-launch size, so
// every profile's range is not empty.
TEST(GpuThresholdTest, ProfilesPerGpuKind) {
  const GpuDispatchProfile h100 = GpuDispatchProfileFor("h100");
  const GpuDispatchProfile h200 = GpuDispatchProfileFor("h200");
  for (const char* other : {"auto", "a100", ""}) {
    EXPECT_EQ(GpuDispatchProfileFor(other).min_keys, h100.min_keys) << other;
    EXPECT_EQ(GpuDispatchProfileFor(other).merge_argsort_max_keys, h100.merge_argsort_max_keys) << other;
  }
  for (const GpuDispatchProfile& p : {h100, h200}) {
    EXPECT_GT(p.min_keys, 0u);
    EXPECT_GT(p.merge_argsort_max_keys, kGpuRadixSingleLaunchMaxKeys + 1);
  }
}

TEST(TypesTest, Names) {
  EXPECT_EQ(std::string(DataTypeName(DataType::kFloat64)), "float64");
  EXPECT_EQ(std::string(DataTypeName(DataType::kBytes)), "bytes");
  EXPECT_EQ(std::string(EngineKindName(EngineKind::kCpu)), "cpu");
  EXPECT_EQ(ElementSize(DataType::kInt32), 4u);
  EXPECT_EQ(ElementSize(DataType::kUint64), 8u);
  EXPECT_EQ(ElementSize(DataType::kBytes), 0u);
}

}  // namespace
}  // namespace sortd
