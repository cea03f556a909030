#include "coordinator/analysis/steps.h"

#include <gtest/gtest.h>

#include "tests/coordinator/analysis/hand_trace.h"

namespace podscope::coordinator::analysis {
namespace {

using podscope::testing::HandTrace;

TEST(StepsTest, DeviceSpanRunsFromFirstToLastActivityLaunchedInTheStep) {
  // Step 1 on the host is [0, 1000); its kernels are launched at 100 and 900 but the second
  // runs until 1500, past the host step. Step 2 is [1000, 2000) and launches one kernel.
  common::WorkerTrace w = HandTrace()
                              .Step(1, 0, 1000)
                              .Step(2, 1000, 2000)
                              .Kernel(200, 400, "a", 100)
                              .Kernel(950, 1500, "b", 900)
                              .Kernel(1600, 1900, "c", 1100)
                              .Kernel(5000, 5100, "orphan", 3000)
                              .Build();
  const WorkerSteps steps = FindSteps(w);
  EXPECT_EQ(steps.source, StepSource::kMarkers);
  ASSERT_EQ(steps.steps.size(), 2u);
  EXPECT_EQ(steps.steps[0].device, (Interval{200, 1500}));
  EXPECT_EQ(steps.steps[1].device, (Interval{1600, 1900}));
  EXPECT_EQ(steps.kernel_step, (std::vector<int32_t>{0, 0, 1, -1}));
}

TEST(StepsTest, MarkerPatternWithCapturedNumber) {
  common::WorkerTrace w = HandTrace()
                              .Span(0, 100, "train_step_7", common::HostSpanCategory::kAnnotation)
                              .Span(100, 200, "train_step_8", common::HostSpanCategory::kAnnotation)
                              .Span(10, 20, "forward", common::HostSpanCategory::kAnnotation)
                              .Kernel(50, 60, "k", 10)
                              .Build();
  const WorkerSteps steps = FindSteps(w, {.marker_pattern = R"(^train_step_(\d+)$)"});
  EXPECT_EQ(steps.source, StepSource::kPattern);
  ASSERT_EQ(steps.steps.size(), 2u);
  EXPECT_EQ(steps.steps[0].number, 7);
  EXPECT_EQ(steps.steps[1].number, 8);
  EXPECT_EQ(steps.steps[0].device, (Interval{50, 60}));
  EXPECT_FALSE(steps.steps[1].has_device());
}

TEST(StepsTest, WithoutMarkersStepsComeFromTheCollectivePeriod) {
  // Three steps, each: AllReduce 4 MB then AllReduce 1 MB; plus a trailing partial step.
  HandTrace t;
  int64_t seq = 0;
  for (int step = 0; step < 4; ++step) {
    const common::TimeNs base = step * 10'000;
    t.Kernel(base + 1000, base + 2000, "nccl_ar", base + 900, 20)
        .Collective("pg:0", common::CollectiveOp::kAllReduce, seq++, 4 << 20, 2, base + 900);
    if (step < 3) {
      t.Kernel(base + 3000, base + 3500, "nccl_ar", base + 2900, 20)
          .Collective("pg:0", common::CollectiveOp::kAllReduce, seq++, 1 << 20, 2, base + 2900);
    }
  }
  const WorkerSteps steps = FindSteps(t.Build());
  EXPECT_EQ(steps.source, StepSource::kInferred);
  ASSERT_EQ(steps.steps.size(), 3u);
  EXPECT_EQ(steps.steps[0].host, (Interval{900, 10'900}));
  EXPECT_EQ(steps.steps[2].host, (Interval{20'900, 30'900}));
  EXPECT_EQ(steps.steps[1].device, (Interval{11'000, 13'500}));
}

TEST(StepsTest, NoMarkersAndNoCollectivesMeansNoSteps) {
  const WorkerSteps steps = FindSteps(HandTrace().Kernel(0, 10, "k", 0).Build());
  EXPECT_EQ(steps.source, StepSource::kNone);
  EXPECT_TRUE(steps.steps.empty());
  EXPECT_EQ(steps.kernel_step, std::vector<int32_t>{-1});
}

}  // namespace
}  // namespace podscope::coordinator::analysis
