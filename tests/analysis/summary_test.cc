#include "analysis/summary.h"

#include <gtest/gtest.h>

#include "analysis/pod_view.h"
#include "tests/analysis/hand_trace.h"

namespace podscope::analysis {
namespace {

using podscope::testing::HandTrace;

// Three workers, one step each, spans 100, 200 and 300 ns. The middle one runs an AllReduce
// that overlaps its compute for 50 ns and runs alone for 100 ns.
TEST(SummaryTest, HandComputedFigures) {
  common::Capture capture;
  capture.workers.push_back(HandTrace(0, 3).Step(1, 0, 1000).Kernel(100, 200, "gemm", 50).Build());
  capture.workers.push_back(HandTrace(1, 3)
                                .Step(1, 0, 1000)
                                .Kernel(100, 200, "gemm", 50)
                                .Kernel(150, 300, "ncclKernel_AllReduce", 60, 20)
                                .Build());
  capture.workers.push_back(HandTrace(2, 3).Step(1, 0, 1000).Kernel(100, 400, "gemm", 50).Build());
  for (auto& w : capture.workers) w.info.job = "j";
  const common::CaptureView view(capture);
  const std::vector<WorkerSteps> steps = FindAllSteps(view);
  const std::vector<WorkerBreakdown> breakdown = ComputeBreakdown(view, steps, nullptr);
  const SummaryReport s =
      Summarize(view, breakdown, StragglerReport{}, BandwidthReport{}, {"a warning"});
  EXPECT_EQ(s.job, "j");
  EXPECT_EQ(s.ranks, 3u);
  EXPECT_EQ(s.hosts, 0u);
  EXPECT_EQ(s.steps, 1u);
  EXPECT_EQ(s.step_min_ns, 100);
  EXPECT_EQ(s.step_p50_ns, 200);
  EXPECT_EQ(s.step_p90_ns, 300);
  EXPECT_EQ(s.step_max_ns, 300);
  EXPECT_EQ(s.median_worker.rank, 1);
  EXPECT_EQ(s.median_worker.compute_ns, 50);
  EXPECT_EQ(s.median_worker.overlap_ns, 50);
  EXPECT_EQ(s.exposed_communication_ns, 100);
  EXPECT_DOUBLE_EQ(s.exposed_communication_share, 0.5);
  EXPECT_DOUBLE_EQ(s.overlap_pct.value_or(-1), 100.0 * 50 / 150);
  EXPECT_EQ(s.worst_worker.rank, 2);  // no straggler: the longest mean step
  EXPECT_FALSE(s.worst_is_straggler);
  EXPECT_EQ(s.warnings, std::vector<std::string>{"a warning"});
}

// Four workers with step spans 100, 200, 300 and 1000 ns: the step-time median is the mean of the
// two middle spans, in the summary and in the pod view alike (one definition: statistics.h), not
// one of them (nearest rank gave 300, the lower middle 200).
TEST(SummaryTest, AnEvenCountsMedianIsTheMeanOfTheTwoMiddleValuesEverywhere) {
  common::Capture capture;
  const TimeNs ends[] = {200, 300, 400, 1100};
  for (int r = 0; r < 4; ++r) {
    capture.workers.push_back(
        HandTrace(r, 4).Step(1, 0, 2000).Kernel(100, ends[r], "gemm", 50).Build());
  }
  const common::CaptureView view(capture);
  const std::vector<WorkerSteps> steps = FindAllSteps(view);
  const std::vector<WorkerBreakdown> breakdown = ComputeBreakdown(view, steps, nullptr);
  const SummaryReport s = Summarize(view, breakdown, StragglerReport{}, BandwidthReport{}, {});
  EXPECT_EQ(s.step_p50_ns, 250);
  const PodView pod = ComputePodView(breakdown, -1, -1);
  ASSERT_EQ(pod.steps.size(), 1u);
  EXPECT_EQ(pod.steps[0].median_step_ns, 250);
}

}  // namespace
}  // namespace podscope::analysis
