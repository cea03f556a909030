#include "coordinator/analysis/summary.h"

#include <gtest/gtest.h>

#include "tests/coordinator/analysis/hand_trace.h"

namespace podscope::coordinator::analysis {
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

}  // namespace
}  // namespace podscope::coordinator::analysis
