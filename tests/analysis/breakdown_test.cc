#include "analysis/breakdown.h"

#include <gtest/gtest.h>

#include "common/trace_files.h"
#include "tests/analysis/hand_trace.h"
#include "tests/test_paths.h"

namespace podscope::analysis {
namespace {

using common::MemcpyKind;
using podscope::testing::HandTrace;

TEST(BreakdownTest, HandComputedPartition) {
  // Host step [0, 10000). Device activity launched inside it:
  //   H2D copy     [1000, 1500)  launched at 900 (call ends 905)
  //   compute      [2000, 5000)  stream 7, launched at 1950
  //   nccl (comm)  [4000, 7000)  stream 20, launched at 1960 -> overlaps compute in [4000,5000)
  //   compute      [8000, 9000)  launched at 7990
  // Host: dataloader span [5500, 6500) (device busy with comm then: not idle),
  //       dataloader span [7000, 7500), an op [7500, 7980).
  common::WorkerTrace w =
      HandTrace()
          .Step(1, 0, 10'000)
          .Memcpy(1000, 1500, MemcpyKind::kHostToDevice, 900)
          .Kernel(2000, 5000, "gemm", 1950)
          .Kernel(4000, 7000, "ncclKernel_AllReduce", 1960, 20)
          .Kernel(8000, 9000, "gemm", 7990)
          .Span(5500, 6500, "enumerate(DataLoader)", common::HostSpanCategory::kInput)
          .Span(7000, 7500, "enumerate(DataLoader)", common::HostSpanCategory::kInput)
          .Span(7500, 7980, "aten::add", common::HostSpanCategory::kOp)
          .Build();
  const WorkerBreakdown b = ComputeWorkerBreakdown(w, FindSteps(w), nullptr);
  ASSERT_EQ(b.steps.size(), 1u);
  const StepBreakdown& s = b.steps[0];
  EXPECT_EQ(s.span, (Interval{1000, 9000}));
  EXPECT_EQ(s.memcpy_ns, 500);
  EXPECT_EQ(s.memcpy_h2d_ns, 500);
  EXPECT_EQ(s.compute_ns, 2000 + 1000);  // [2000,4000) + [8000,9000)
  EXPECT_EQ(s.overlap_ns, 1000);         // [4000,5000)
  EXPECT_EQ(s.communication_ns, 2000);   // [5000,7000)
  EXPECT_EQ(s.comm_transfer_ns, 2000);   // no wait information: all transfer
  EXPECT_EQ(s.idle_input_ns, 500);       // [7000,7500)
  // Device idle in [1500,2000): nothing on the host until the launch calls at 1950 and
  // 1960 and their in-flight latency up to 2000 -> 450 other + 50 launch. Device idle in
  // [7000,8000): input [7000,7500), op [7500,7980), nothing [7980,7990), the last launch
  // call [7990,7995) and its latency [7995,8000).
  EXPECT_EQ(s.idle_launch_ns, 50 + 10);
  EXPECT_EQ(s.idle_host_ns, 7980 - 7500);
  EXPECT_EQ(s.idle_other_ns, 450 + 10);
  EXPECT_EQ(s.Sum(), s.span_ns);
  EXPECT_DOUBLE_EQ(s.OverlapPercent().value_or(-1), 100.0 * 1000 / 3000);
}

// The device idle between two steps' spans is the second step's `before`, split by what the
// host did: here a dataloader, an operator and a launch, as an input-bound step would show.
TEST(BreakdownTest, TheIdleBeforeAStepIsSplitByTheHost) {
  // Step 1's span ends at 3000. Step 2's host: nothing in [3000, 3500), dataloader
  // [3500, 6000), an op [6000, 6900), the launch call [6950, 6955) and its latency to 7000.
  common::WorkerTrace w =
      HandTrace()
          .Step(1, 0, 3'200)
          .Kernel(1000, 3000, "gemm", 900)
          .Step(2, 3'200, 10'000)
          .Span(3500, 6000, "enumerate(DataLoader)", common::HostSpanCategory::kInput)
          .Span(6000, 6900, "aten::cat", common::HostSpanCategory::kOp)
          .Kernel(7000, 8000, "gemm", 6950)
          .Build();
  const WorkerBreakdown b = ComputeWorkerBreakdown(w, FindSteps(w), nullptr);
  ASSERT_EQ(b.steps.size(), 2u);
  EXPECT_EQ(b.steps[0].before_ns, 0);  // nothing known before the first step
  const StepBreakdown& s = b.steps[1];
  EXPECT_EQ(s.span, (Interval{7000, 8000}));
  EXPECT_EQ(s.before_ns, 4000);
  EXPECT_EQ(s.before_input_ns, 2500);
  EXPECT_EQ(s.before_host_ns, 900);
  EXPECT_EQ(s.before_launch_ns, 50);
  EXPECT_EQ(s.before_other_ns, 500 + 50);  // [3000, 3500) and [6900, 6950)
  EXPECT_EQ(s.Sum(), s.span_ns);           // `before` is not part of the span
}

TEST(BreakdownTest, WaitComesFromTheCommunicationReport) {
  common::WorkerTrace w = HandTrace()
                              .Step(1, 0, 10'000)
                              .Kernel(1000, 4000, "ncclKernel_AllReduce", 900, 20)
                              .Collective("pg:0", common::CollectiveOp::kAllReduce, 0, 4096, 2, 900)
                              .Build();
  const std::vector<TimeNs> wait = {1200};
  const WorkerBreakdown b = ComputeWorkerBreakdown(w, FindSteps(w), &wait);
  const StepBreakdown& s = b.steps.at(0);
  EXPECT_EQ(s.comm_wait_ns, 1200);
  EXPECT_EQ(s.comm_transfer_ns, 1800);
  EXPECT_EQ(s.communication_ns, 3000);
  EXPECT_EQ(s.Sum(), s.span_ns);
}

TEST(BreakdownTest, KernelsCrossingStepBoundariesAreCutAtTheSpan) {
  // Step 1's last kernel runs into step 2's device span; each instant is counted once.
  common::WorkerTrace w = HandTrace()
                              .Step(1, 0, 1000)
                              .Step(2, 1000, 2000)
                              .Kernel(100, 1200, "gemm", 50)
                              .Kernel(1100, 1500, "gemm", 1050, 8)
                              .Build();
  const WorkerBreakdown b = ComputeWorkerBreakdown(w, FindSteps(w), nullptr);
  ASSERT_EQ(b.steps.size(), 2u);
  EXPECT_EQ(b.steps[0].span, (Interval{100, 1200}));
  EXPECT_EQ(b.steps[1].span, (Interval{1100, 1500}));
  EXPECT_EQ(b.steps[0].compute_ns, 1100);
  EXPECT_EQ(b.steps[1].compute_ns, 400);
}

// The partition invariant on every step of every shared fixture.
TEST(BreakdownTest, CategoriesSumToTheSpanOnRealFixtures) {
  for (const char* job : {"trace_filter", "dlrm_8rank"}) {
    absl::StatusOr<common::Capture> capture =
        common::LoadCapture(*common::ExpandTraceInputs({podscope::testing::KinetoFixture(job)}));
    ASSERT_TRUE(capture.ok()) << capture.status();
    const common::CaptureView view(*capture);
    const CommunicationReport comm = ComputeCommunication(view);
    const std::vector<WorkerBreakdown> all = ComputeBreakdown(view, FindAllSteps(view), &comm);
    size_t steps = 0;
    for (const WorkerBreakdown& w : all) {
      for (const StepBreakdown& s : w.steps) {
        ++steps;
        EXPECT_EQ(s.Sum(), s.span_ns) << job << " rank " << w.rank << " step " << s.step;
        EXPECT_EQ(s.communication_ns, s.comm_wait_ns + s.comm_transfer_ns);
        EXPECT_EQ(s.memcpy_ns,
                  s.memcpy_h2d_ns + s.memcpy_d2h_ns + s.memcpy_d2d_ns + s.memcpy_other_ns);
        EXPECT_GT(s.compute_ns, 0);
      }
    }
    EXPECT_EQ(steps, std::string(job) == "trace_filter" ? 4u : 8u) << job;
  }
}

}  // namespace
}  // namespace podscope::analysis
