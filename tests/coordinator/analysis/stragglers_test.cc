#include "coordinator/analysis/stragglers.h"

#include <gtest/gtest.h>

#include "tests/coordinator/analysis/hand_trace.h"

namespace podscope::coordinator::analysis {
namespace {

using podscope::testing::HandTrace;

// 4 ranks, 10 steps of 1 ms compute + one AllReduce. Rank 2 computes `slow` longer in step 7
// only (on time everywhere else): a heavy-tailed straggler.
common::Capture Job(TimeNs slow, int slow_rank = 2) {
  common::Capture capture;
  for (int r = 0; r < 4; ++r) {
    HandTrace t(r, 4);
    for (int step = 0; step < 10; ++step) {
      const TimeNs base = step * 10'000'000;
      const TimeNs compute_end = base + 1'000'000 + r * 1'000 + (r == slow_rank && step == 7 ? slow : 0);
      t.Step(step, base, base + 10'000'000).Kernel(base + 100'000, compute_end, "gemm", base + 50'000);
      const TimeNs all_arrived = base + 1'000'000 + 3'000 + (step == 7 ? slow : 0);
      t.Kernel(compute_end, all_arrived + 500'000, "ncclKernel_AllReduce", compute_end - 1'000, 20)
          .Collective("pg:0", common::CollectiveOp::kAllReduce, step, 1 << 24, 4, compute_end - 1'000);
    }
    capture.workers.push_back(t.Build());
  }
  return capture;
}

StragglerReport Analyze(const common::Capture& capture) {
  const common::CaptureView view(capture);
  const CommunicationReport comm = ComputeCommunication(view, {.clocks = ClockTrust::kAligned});
  const std::vector<WorkerSteps> steps = FindAllSteps(view);
  return FindStragglers(view, steps, comm, ComputeBreakdown(view, steps, &comm));
}

TEST(StragglersTest, CausedDelayIsLastArrivalMinusSecondLast) {
  const StragglerReport r = Analyze(Job(800'000));
  // Rank 3 is last by 1 us in 9 steps (caused 1 us each); rank 2 is last in step 7 by 800 us
  // minus rank 3's 1 us lag... rank 2 arrives at +800 us, rank 3 at +3 us: caused 797 us.
  EXPECT_EQ(r.workers[3].last_arrivals, 9u);
  EXPECT_EQ(r.workers[3].caused_delay_ns, 9 * 1'000);
  EXPECT_EQ(r.workers[2].last_arrivals, 1u);
  EXPECT_EQ(r.workers[2].caused_delay_ns, 800'000 + 2'000 - 3'000);
  EXPECT_EQ(r.total_caused_delay_ns, 9'000 + 799'000);
  ASSERT_EQ(r.stragglers.size(), 1u);
  EXPECT_EQ(r.stragglers[0].rank, 2);
  EXPECT_EQ(r.stragglers[0].steps, std::vector<int64_t>{7});
  EXPECT_EQ(r.stragglers[0].category, "compute");
  EXPECT_EQ(r.stragglers[0].reason, "caused_delay");
}

TEST(StragglersTest, JitterAloneNamesNobody) {
  const StragglerReport r = Analyze(Job(0));
  EXPECT_TRUE(r.stragglers.empty());
}

}  // namespace
}  // namespace podscope::coordinator::analysis
