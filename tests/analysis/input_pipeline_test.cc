#include "analysis/input_pipeline.h"

#include <gtest/gtest.h>

#include "tests/analysis/hand_trace.h"

namespace podscope::analysis {
namespace {

using podscope::testing::HandTrace;

// Rank 0: step 1 (host 0-100) loads 0-40, then runs 50-100 (launched at 45): its device span is
// 50-100 and it starts the job, so nothing waits. Step 2 (host 100-200) loads 100-160, launches
// at 165, runs 170-200: the device waited 100-170 before its span, 60 of it on the dataloader.
// Rank 1 never loads.
TEST(InputPipelineTest, DeviceTimeWaitingOnTheDataloaderByHand) {
  common::Capture capture;
  capture.workers.push_back(
      HandTrace(0, 2)
          .Step(1, 0, 100)
          .Span(0, 40, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                common::HostSpanCategory::kInput)
          .Kernel(50, 100, "gemm", 45)
          .Step(2, 100, 200)
          .Span(100, 160, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                common::HostSpanCategory::kInput)
          .Kernel(170, 200, "gemm", 165)
          .Build());
  capture.workers.push_back(HandTrace(1, 2).Step(1, 0, 100).Kernel(10, 100, "gemm", 5).Build());
  const common::CaptureView view(capture);
  const std::vector<WorkerBreakdown> breakdown =
      ComputeBreakdown(view, FindAllSteps(view), nullptr);
  const InputReport r = ComputeInputPipeline(view, breakdown);
  ASSERT_EQ(r.workers.size(), 2u);
  const WorkerInput& w = r.workers[0];
  ASSERT_EQ(w.steps.size(), 2u);
  EXPECT_EQ(w.steps[0].step_ns, 50);
  EXPECT_EQ(w.steps[0].input_wait_ns, 0);
  EXPECT_EQ(w.steps[0].dataloader_ns,
            0);  // its loading ran before its span and before the job's first step
  EXPECT_EQ(w.steps[1].step_ns, 100);  // 30 of span, 70 before it
  EXPECT_EQ(w.steps[1].input_wait_ns, 60);
  EXPECT_EQ(w.steps[1].dataloader_ns, 60);
  EXPECT_DOUBLE_EQ(w.steps[1].input_share(), 0.6);
  EXPECT_EQ(w.step_ns, 150);
  EXPECT_EQ(w.input_wait_ns, 60);
  EXPECT_DOUBLE_EQ(w.input_share, 0.4);
  EXPECT_EQ(w.verdict, InputVerdict::kHighly);
  EXPECT_EQ(r.workers[1].verdict, InputVerdict::kNotInputBound);
  EXPECT_EQ(r.workers[1].input_wait_ns, 0);
  ASSERT_TRUE(r.median_input_share.has_value());
  EXPECT_DOUBLE_EQ(*r.median_input_share, 0.2);
  EXPECT_EQ(r.input_bound, (std::vector<int32_t>{0}));

  // The thresholds are TensorFlow's unless given: at 50% rank 0 is only moderately input-bound.
  const InputReport strict =
      ComputeInputPipeline(view, breakdown, {.moderate_share = 0.3, .high_share = 0.5});
  EXPECT_EQ(strict.workers[0].verdict, InputVerdict::kModerately);
  EXPECT_EQ(InputVerdictName(InputVerdict::kHighly), "highly input-bound");
}

}  // namespace
}  // namespace podscope::analysis
