#include "analysis/steps.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/workload_model.h"
#include "tests/analysis/hand_trace.h"

namespace podscope::analysis {
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

// A one-GPU loop: every step launches gemm_a, gelu, gemm_b, gelu, sgd, 100 ns apart, then the
// host pauses 600 ns (the optimizer's bookkeeping, the next batch). The capture opens in the
// middle of a step (its gelu and sgd come first) and closes after the fifth whole step.
HandTrace OneGpuLoop(int steps, bool warmup_kernel = false) {
  HandTrace t;
  const std::vector<std::string> loop = {"gemm_a", "gelu", "gemm_b", "gelu", "sgd"};
  t.Kernel(20, 60, "gelu", 10).Kernel(120, 160, "sgd", 110);
  for (int step = 0; step < steps; ++step) {
    common::TimeNs at = 700 + step * 1000;
    for (size_t i = 0; i < loop.size(); ++i, at += 100) {
      t.Kernel(at + 10, at + 60, loop[i], at);
      if (warmup_kernel && step == 0 && i == 0) t.Kernel(at + 70, at + 80, "autotune", at + 50);
    }
  }
  return t;
}

TEST(StepsTest, WithoutMarkersOrCollectivesStepsComeFromThePeriodOfKernelLaunches) {
  const WorkerSteps steps = FindSteps(OneGpuLoop(5).Build());
  EXPECT_EQ(steps.source, StepSource::kLaunches);
  EXPECT_EQ(StepSourceName(steps.source), "launches");
  // Whole steps only, each from one gemm_a's launch to the next: the last one has no end.
  ASSERT_EQ(steps.steps.size(), 4u);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(steps.steps[k].number, k);
    EXPECT_EQ(steps.steps[k].host, (Interval{700 + k * 1000, 1700 + k * 1000})) << k;
    EXPECT_EQ(steps.steps[k].device, (Interval{710 + k * 1000, 1160 + k * 1000})) << k;
  }
  // The partial step before and the unfinished one after belong to no step.
  EXPECT_EQ(steps.kernel_step[0], -1);
  EXPECT_EQ(steps.kernel_step[2], 0);
  EXPECT_EQ(steps.kernel_step.back(), -1);
}

TEST(StepsTest, AWarmupKernelInTheFirstStepDoesNotHideTheLaunchPeriod) {
  const WorkerSteps steps = FindSteps(OneGpuLoop(12, /*warmup_kernel=*/true).Build());
  EXPECT_EQ(steps.source, StepSource::kLaunches);
  ASSERT_EQ(steps.steps.size(), 11u);
  // From the second step on, each starts at its gemm_a, after the host's pause.
  for (size_t k = 1; k < steps.steps.size(); ++k) {
    EXPECT_EQ(steps.steps[k].host, (Interval{700 + static_cast<int64_t>(k) * 1000,
                                             1700 + static_cast<int64_t>(k) * 1000}))
        << k;
  }
}

// 48 identical layers a step: their two kernels alone repeat every 2 launches for 94% of the
// sequence, but the step is the whole loop, embedding to optimizer.
TEST(StepsTest, ALoopOfIdenticalLayersIsOneStepNotOneLayer) {
  HandTrace t;
  common::TimeNs at = 0;
  for (int step = 0; step < 5; ++step) {
    at = step * 100'000;
    t.Kernel(at + 10, at + 20, "embedding", at);
    for (int layer = 0; layer < 48; ++layer) {
      t.Kernel(at + 110, at + 150, "layer_gemm", at + 100)
          .Kernel(at + 210, at + 250, "layer_act", at + 200);
      at += 200;
    }
    t.Kernel(at + 110, at + 120, "loss", at + 100).Kernel(at + 210, at + 220, "sgd", at + 200);
  }
  const WorkerSteps steps = FindSteps(t.Build());
  EXPECT_EQ(steps.source, StepSource::kLaunches);
  ASSERT_EQ(steps.steps.size(), 4u);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(steps.steps[k].host, (Interval{k * 100'000, (k + 1) * 100'000})) << k;
  }
}

// The workload model's rank, as dense as a real one, with its step markers and collectives
// taken away: the steps found from its launches last what its marked steps last.
TEST(StepsTest, ASimulatedRankWithoutMarksOrCollectivesHasItsStepsFoundFromItsLaunches) {
  for (const char* preset : {"default", "dense"}) {
    sim::WorkloadOptions o;
    ASSERT_TRUE(sim::ApplyPreset(preset, &o).ok());
    o.ranks = 1;
    o.steps = 12;
    common::WorkerTrace w = std::move(sim::SimulateJob(o).capture.workers[0]);
    const WorkerSteps marked = FindSteps(w);
    ASSERT_EQ(marked.source, StepSource::kMarkers) << preset;
    ASSERT_EQ(marked.steps.size(), 12u) << preset;
    w.steps = {};
    w.collectives = {};
    const WorkerSteps found = FindSteps(w);
    EXPECT_EQ(found.source, StepSource::kLaunches) << preset;
    ASSERT_GE(found.steps.size(), 10u) << preset;
    const auto mean_length = [](const std::vector<StepSpan>& steps, size_t from, size_t to) {
      return static_cast<double>(steps[to].host.start - steps[from].host.start) /
             static_cast<double>(to - from);
    };
    // Marked steps are back to back; found ones run from a launch to the same launch a step on.
    const double marked_mean = mean_length(marked.steps, 0, 11);
    const double found_mean = mean_length(found.steps, 0, found.steps.size() - 1);
    EXPECT_NEAR(found_mean / marked_mean, 1.0, 0.01) << preset;
    for (const StepSpan& step : found.steps) {
      EXPECT_NEAR(static_cast<double>(step.host.end - step.host.start) / marked_mean, 1.0, 0.1)
          << preset << " step " << step.number;
    }
  }
}

TEST(StepsTest, LaunchesWithoutARepeatingOrderGiveNoSteps) {
  // One kernel over and over (no step structure to see), and names in no repeating order.
  HandTrace same;
  for (int i = 0; i < 40; ++i) same.Kernel(i * 100 + 10, i * 100 + 50, "k", i * 100);
  EXPECT_EQ(FindSteps(same.Build()).source, StepSource::kNone);
  HandTrace shuffled;
  uint32_t x = 12345;
  for (int i = 0; i < 200; ++i) {
    x = x * 1103515245u + 12345u;
    shuffled.Kernel(i * 100 + 10, i * 100 + 50, "k" + std::to_string((x >> 16) % 7), i * 100);
  }
  EXPECT_EQ(FindSteps(shuffled.Build()).source, StepSource::kNone);
  // Two periods only: too few to call it a loop.
  EXPECT_EQ(FindSteps(OneGpuLoop(2).Build()).source, StepSource::kNone);
}

TEST(StepsTest, AJobWithCollectivesIsNotGivenStepsFromItsLaunches) {
  // Its collectives have no period (one of each size), so it gets no steps at all, rather than
  // steps from another source than its ranks' peers might use.
  HandTrace t = OneGpuLoop(5);
  t.Kernel(9000, 9100, "nccl_ar", 8900, 20)
      .Collective("pg:0", common::CollectiveOp::kAllReduce, 0, 4 << 20, 2, 8900);
  EXPECT_EQ(FindSteps(t.Build()).source, StepSource::kNone);
}

TEST(StepsTest, NoMarkersAndNoCollectivesMeansNoSteps) {
  const WorkerSteps steps = FindSteps(HandTrace().Kernel(0, 10, "k", 0).Build());
  EXPECT_EQ(steps.source, StepSource::kNone);
  EXPECT_TRUE(steps.steps.empty());
  EXPECT_EQ(steps.kernel_step, std::vector<int32_t>{-1});
}

}  // namespace
}  // namespace podscope::analysis
