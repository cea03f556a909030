#include "analysis/step_replay.h"

#include <gtest/gtest.h>

#include "analysis/stragglers.h"
#include "common/trace_files.h"
#include "sim/workload_model.h"
#include "tests/analysis/hand_trace.h"
#include "tests/test_paths.h"

namespace podscope::analysis {
namespace {

using podscope::testing::HandTrace;
constexpr TimeNs kUs = 1'000;

// 3 ranks, 2 steps of data-parallel training: three backward kernels, each followed by its
// gradient bucket's AllReduce (200 us of transfer once all have arrived, in order on the
// communication stream), then the optimizer after the last AllReduce. In step 0 rank 2 runs
// each backward kernel 100 us longer, so it is late by 100, 200 and 300 us at the three buckets.
common::Capture BucketedJob() {
  common::Capture capture;
  for (int r = 0; r < 3; ++r) {
    HandTrace t(r, 3);
    for (int step = 0; step < 2; ++step) {
      const TimeNs base = step * 10'000 * kUs;
      const TimeNs slow = r == 2 && step == 0 ? 100 * kUs : 0;
      t.Step(step, base, base + 10'000 * kUs);
      TimeNs compute = base + 100 * kUs, comm = 0;
      for (int bucket = 0; bucket < 3; ++bucket) {
        t.Kernel(compute, compute + 1'000 * kUs + slow, "gemm", compute - 50 * kUs);
        compute += 1'000 * kUs + slow;
        // Everyone's arrival at this bucket, as the slow rank sets it in step 0.
        const TimeNs others = std::max(base + (1'100 + 1'000 * bucket) * kUs, comm);
        const TimeNs last = step == 0 ? base + (1'200 + 1'100 * bucket) * kUs : others;
        const TimeNs arrival = std::max(compute, comm);
        t.Kernel(arrival, last + 200 * kUs, "ncclKernel_AllReduce", arrival - 10 * kUs, 20)
            .Collective("pg:0", common::CollectiveOp::kAllReduce, step * 3 + bucket, 1 << 20, 3,
                        arrival - 10 * kUs);
        comm = last + 200 * kUs;
      }
      t.Kernel(comm, comm + 100 * kUs, "adam", comm - 20 * kUs);  // waits for the last bucket
    }
    capture.workers.push_back(t.Build());
  }
  return capture;
}

struct Analysed {
  explicit Analysed(const common::Capture& capture)
      : view(capture),
        communication(ComputeCommunication(view, {.clocks = ClockTrust::kAligned})),
        steps(FindAllSteps(view)) {}
  common::CaptureView view;
  CommunicationReport communication;
  std::vector<WorkerSteps> steps;
};

TEST(StepReplayTest, ReplayingWithNobodyExcusedChangesNothing) {
  const common::Capture capture = BucketedJob();
  const Analysed a(capture);
  const StepReplay replay(a.view, a.steps, a.communication);
  const absl::StatusOr<StepTimeLoss> loss = replay.LossOf({});
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_EQ(loss->loss_ns, 0);
  ASSERT_EQ(loss->steps.size(), 2u);
  for (const StepLoss& s : loss->steps) EXPECT_EQ(s.loss_ns, 0) << "step " << s.step;
}

// Rank 2 caused 100 + 200 + 300 us of waiting, but the job lost 300 us: the waiting at the
// first two buckets overlapped the slow rank's own backward. (Without rank 2's slowness the
// last AllReduce ends at 3,300 us instead of 3,600 us.)
TEST(StepReplayTest, TheLossIsTheStepTimeSavedNotTheSummedWaiting) {
  const common::Capture capture = BucketedJob();
  const Analysed a(capture);
  const StepReplay replay(a.view, a.steps, a.communication);
  const absl::StatusOr<StepTimeLoss> loss = replay.LossOf({2});
  ASSERT_TRUE(loss.ok()) << loss.status();
  ASSERT_EQ(loss->steps.size(), 2u);
  EXPECT_EQ(loss->steps[0].step, 0);
  EXPECT_EQ(loss->steps[0].loss_ns, 300 * kUs);
  EXPECT_EQ(loss->steps[1].loss_ns, 0);
  EXPECT_EQ(loss->loss_ns, 300 * kUs);
  // Excusing an on-time rank saves nothing.
  EXPECT_EQ(replay.LossOf({0})->loss_ns, 0);

  const StragglerReport report = FindStragglers(
      a.view, a.steps, a.communication, ComputeBreakdown(a.view, a.steps, &a.communication));
  ASSERT_EQ(report.stragglers.size(), 1u);
  EXPECT_EQ(report.stragglers[0].rank, 2);
  EXPECT_EQ(report.stragglers[0].caused_delay_ns, 600 * kUs);
  EXPECT_EQ(report.stragglers[0].step_time_loss_ns, 300 * kUs);
  EXPECT_EQ(report.step_time_loss_ns, 300 * kUs);
}

// On real traces (8 ranks of a DLRM job) the replay with nobody excused reproduces every
// captured step span exactly, and no excused worker makes a step longer by more than its noise.
TEST(StepReplayTest, RealTracesReplayExactly) {
  absl::StatusOr<common::Capture> capture = common::LoadCapture(
      *common::ExpandTraceInputs({podscope::testing::KinetoFixture("dlrm_8rank")}));
  ASSERT_TRUE(capture.ok()) << capture.status();
  ASSERT_EQ(capture->workers.size(), 8u);
  const Analysed a(*capture);
  const StepReplay replay(a.view, a.steps, a.communication);
  const absl::StatusOr<StepTimeLoss> identity = replay.LossOf({});
  ASSERT_TRUE(identity.ok()) << identity.status();
  EXPECT_FALSE(identity->steps.empty());
  for (const StepLoss& s : identity->steps) EXPECT_EQ(s.loss_ns, 0) << "step " << s.step;
  for (uint32_t w = 0; w < 8; ++w) {
    const absl::StatusOr<StepTimeLoss> loss = replay.LossOf({w});
    ASSERT_TRUE(loss.ok()) << loss.status();
    EXPECT_GE(loss->loss_ns, 0) << "worker " << w;
  }
}

void ExpectSameLosses(const StepReplay& merged, const StepReplay& kept, uint32_t workers) {
  std::vector<std::vector<uint32_t>> excused = {{}};
  for (uint32_t w = 0; w < workers; ++w) excused.push_back({w});
  excused.push_back({0, workers - 1});
  for (const std::vector<uint32_t>& e : excused) {
    const absl::StatusOr<StepTimeLoss> a = merged.LossOf(e), b = kept.LossOf(e);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->loss_ns, b->loss_ns);
    ASSERT_EQ(a->steps.size(), b->steps.size());
    for (size_t s = 0; s < a->steps.size(); ++s) {
      EXPECT_EQ(a->steps[s].step, b->steps[s].step);
      EXPECT_EQ(a->steps[s].loss_ns, b->steps[s].loss_ns) << "step " << a->steps[s].step;
    }
  }
}

// Runs of operations that only follow each other on their stream are replayed as one: the losses
// are those of the replay operation by operation, on real traces and on a dense simulated job
// with a straggler, with far fewer operations held. And a capture added a worker at a time
// replays as the whole one.
TEST(StepReplayTest, MergedRunsReplayAsEveryOperationApart) {
  absl::StatusOr<common::Capture> real = common::LoadCapture(
      *common::ExpandTraceInputs({podscope::testing::KinetoFixture("dlrm_8rank")}));
  ASSERT_TRUE(real.ok()) << real.status();
  const Analysed r(*real);
  const StepReplay real_merged(r.view, r.steps, r.communication);
  const StepReplay real_kept(r.view, r.steps, r.communication, StepReplay::Runs::kKept);
  EXPECT_LT(real_merged.operations(), real_kept.operations());
  ExpectSameLosses(real_merged, real_kept, 8);

  sim::WorkloadOptions o;
  ASSERT_TRUE(sim::ApplyPreset("dense", &o).ok());
  o.ranks = 4;
  o.steps = 4;
  o.slowdowns.push_back({.rank = 2, .factor = 1.2});
  const common::Capture job = sim::SimulateJob(o).capture;
  const Analysed d(job);
  const StepReplay merged(d.view, d.steps, d.communication);
  const StepReplay kept(d.view, d.steps, d.communication, StepReplay::Runs::kKept);
  EXPECT_LT(merged.operations() * 10, kept.operations())
      << merged.operations() << " of " << kept.operations();
  ExpectSameLosses(merged, kept, 4);
  EXPECT_GT(merged.LossOf({2})->loss_ns, 0);

  StepReplay by_worker(d.communication);
  for (size_t w = 0; w < d.view.size(); ++w) by_worker.AddWorker(d.view.worker(w), d.steps[w]);
  EXPECT_EQ(by_worker.operations(), merged.operations());
  ExpectSameLosses(by_worker, kept, 4);
}

TEST(StepReplayTest, AWorkerWithoutCollectivesLosesNothing) {
  HandTrace t(0, 1);
  t.Step(0, 0, 10'000 * kUs).Kernel(100 * kUs, 900 * kUs, "gemm", 50 * kUs);
  common::Capture capture;
  capture.workers.push_back(t.Build());
  const Analysed a(capture);
  const StepReplay replay(a.view, a.steps, a.communication);
  EXPECT_EQ(replay.LossOf({0})->loss_ns, 0);
}

}  // namespace
}  // namespace podscope::analysis
