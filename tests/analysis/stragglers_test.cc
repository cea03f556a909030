#include "analysis/stragglers.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "common/trace_files.h"
#include "tests/analysis/hand_trace.h"
#include "tests/test_paths.h"

namespace podscope::analysis {
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
      const TimeNs compute_end =
          base + 1'000'000 + r * 1'000 + (r == slow_rank && step == 7 ? slow : 0);
      t.Step(step, base, base + 10'000'000)
          .Kernel(base + 100'000, compute_end, "gemm", base + 50'000);
      const TimeNs all_arrived = base + 1'000'000 + 3'000 + (step == 7 ? slow : 0);
      t.Kernel(compute_end, all_arrived + 500'000, "ncclKernel_AllReduce", compute_end - 1'000, 20)
          .Collective("pg:0", common::CollectiveOp::kAllReduce, step, 1 << 24, 4,
                      compute_end - 1'000);
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
  EXPECT_EQ(r.stragglers[0].category, "compute+overlap");
  EXPECT_EQ(r.stragglers[0].reason, "caused_delay");
}

// Rank 2's host is busy in step 7 (an operator on the CPU holds the next launch), so its device
// idles before the step's first kernel: its extra time is idle_host, and the evidence names the
// operator.
common::Capture HostBoundJob(TimeNs slow) {
  common::Capture capture;
  for (int r = 0; r < 4; ++r) {
    HandTrace t(r, 4);
    for (int step = 0; step < 10; ++step) {
      const TimeNs base = step * 10'000'000;
      const TimeNs held = r == 2 && step == 7 ? slow : 0;
      const TimeNs first_kernel = base + 100'000 + held;
      t.Step(step, base, base + 10'000'000).Span(base + 50'000, first_kernel, "aten::matmul");
      t.Kernel(first_kernel, base + 1'000'000 + r * 1'000 + held, "gemm", first_kernel - 5'000);
      const TimeNs all_arrived = base + 1'000'000 + 3'000 + (step == 7 ? slow : 0);
      const TimeNs compute_end = base + 1'000'000 + r * 1'000 + held;
      t.Kernel(compute_end, all_arrived + 500'000, "ncclKernel_AllReduce", compute_end - 1'000, 20)
          .Collective("pg:0", common::CollectiveOp::kAllReduce, step, 1 << 24, 4,
                      compute_end - 1'000);
    }
    capture.workers.push_back(t.Build());
  }
  return capture;
}

TEST(StragglersTest, TheCategoryIsThePartitionCategoryThatGrewWithItsEvidence) {
  const StragglerReport r = Analyze(HostBoundJob(800'000));
  ASSERT_EQ(r.stragglers.size(), 1u);
  const Straggler& s = r.stragglers[0];
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.category, "idle_host");
  // Per step, over 10 steps: the device idles 45 us behind the operator before each step's
  // first kernel but the first (the last 5 us are the launch), and 800 us more in step 7.
  EXPECT_EQ(s.evidence.worker_ns, (9 * 45'000 + 800'000) / 10);
  EXPECT_EQ(s.evidence.median_ns, 9 * 45'000 / 10);
  ASSERT_FALSE(s.evidence.top.empty());
  EXPECT_EQ(s.evidence.top[0].name, "aten::matmul");
  EXPECT_EQ(s.evidence.top[0].worker_ns, (10 * 50'000 + 800'000) / 10);
  EXPECT_EQ(s.evidence.top[0].median_ns, 50'000);
}

// On the real DLRM traces, every named rank's category is the partition category (compute and
// overlap as one; the device idle before each step in the idle ones) that grew most against the
// median worker, and the evidence shows that growth.
TEST(StragglersTest, OnRealTracesTheCategoryIsWhatGrewMost) {
  absl::StatusOr<common::Capture> capture = common::LoadCapture(
      *common::ExpandTraceInputs({podscope::testing::KinetoFixture("dlrm_8rank")}));
  ASSERT_TRUE(capture.ok()) << capture.status();
  const common::CaptureView view(*capture);
  const CommunicationReport comm = ComputeCommunication(view);
  const std::vector<WorkerSteps> steps = FindAllSteps(view);
  const std::vector<WorkerBreakdown> breakdown = ComputeBreakdown(view, steps, &comm);
  const StragglerReport r = FindStragglers(view, steps, comm, breakdown);
  ASSERT_FALSE(r.stragglers.empty());
  const char* names[] = {"compute+overlap", "comm_transfer", "comm_wait", "memcpy",
                         "idle_input",      "idle_launch",   "idle_host", "idle_other"};
  std::vector<std::array<double, 8>> mean(breakdown.size());
  for (size_t w = 0; w < breakdown.size(); ++w) {
    for (const StepBreakdown& s : breakdown[w].steps) {
      const TimeNs v[] = {s.compute_ns + s.overlap_ns,
                          s.comm_transfer_ns,
                          s.comm_wait_ns,
                          s.memcpy_ns,
                          s.idle_input_ns + s.before_input_ns,
                          s.idle_launch_ns + s.before_launch_ns,
                          s.idle_host_ns + s.before_host_ns,
                          s.idle_other_ns + s.before_other_ns};
      for (size_t c = 0; c < 8; ++c)
        mean[w][c] += static_cast<double>(v[c]) / static_cast<double>(breakdown[w].steps.size());
    }
  }
  for (const Straggler& s : r.stragglers) {
    size_t best = 0;
    double best_growth = -1e300;
    for (size_t c = 0; c < 8; ++c) {
      std::vector<double> all;
      for (const auto& m : mean) all.push_back(m[c]);
      std::sort(all.begin(), all.end());
      const double median = all.size() % 2 ? all[all.size() / 2]
                                           : (all[all.size() / 2 - 1] + all[all.size() / 2]) / 2;
      if (mean[s.worker][c] - median > best_growth) {
        best_growth = mean[s.worker][c] - median;
        best = c;
      }
    }
    EXPECT_EQ(s.category, names[best]) << "rank " << s.rank;
    EXPECT_NEAR(static_cast<double>(s.evidence.worker_ns - s.evidence.median_ns), best_growth, 2.0)
        << "rank " << s.rank;
    EXPECT_GT(s.evidence.worker_ns, s.evidence.median_ns) << "rank " << s.rank;
    if (s.category != "idle_other") {
      EXPECT_FALSE(s.evidence.top.empty()) << "rank " << s.rank;
    }
  }
}

TEST(StragglersTest, JitterAloneNamesNobody) {
  const StragglerReport r = Analyze(Job(0));
  EXPECT_TRUE(r.stragglers.empty());
}

}  // namespace
}  // namespace podscope::analysis
