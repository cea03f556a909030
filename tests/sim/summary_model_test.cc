#include "sim/summary_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "common/watch_summary.h"
#include "sim/workload_model.h"

namespace podscope::sim {
namespace {

WorkloadOptions Options(int32_t ranks, int32_t steps, uint64_t seed = 1) {
  WorkloadOptions o;
  o.ranks = ranks;
  o.steps = steps;
  o.seed = seed;
  return o;
}

std::vector<std::vector<common::StepSummary>> RunSteps(const WorkloadOptions& o,
                                                       const Hang& hang = {}) {
  SummaryModel model(o, hang);
  std::vector<std::vector<common::StepSummary>> steps;
  std::vector<common::StepSummary> one;
  while (model.Next(&one)) steps.push_back(std::exchange(one, {}));
  return steps;
}

TEST(SummaryModelTest, CollectivesAreCausalAndNumberedAsInTheFullModel) {
  const WorkloadOptions o = Options(4, 3);
  const auto steps = RunSteps(o);
  ASSERT_EQ(steps.size(), 3u);
  for (size_t s = 0; s < steps.size(); ++s) {
    ASSERT_EQ(steps[s].size(), 4u);
    for (int32_t b = 0; b < o.buckets; ++b) {
      common::TimeNs last = 0, end = -1;
      for (const common::StepSummary& r : steps[s]) {
        ASSERT_EQ(r.collectives.size(), static_cast<size_t>(o.buckets));
        const common::CollectiveArrival& a = r.collectives[b];
        EXPECT_EQ(a.sequence, static_cast<int64_t>(s) * o.buckets + b);
        EXPECT_EQ(a.communicator, common::CommunicatorHash("pg:0"));
        EXPECT_EQ(a.nranks, 4);
        last = std::max(last, a.start_ns);
        if (end < 0) end = a.end_ns;
        EXPECT_EQ(a.end_ns, end) << "every rank leaves together";
        EXPECT_GE(a.start_ns, a.enqueue_ns);
        EXPECT_GE(r.end_ns, a.end_ns) << "the step ends after its last collective";
      }
      EXPECT_GT(end, last) << "transfer starts at the last arrival";
    }
  }
}

// The summed draws keep the full model's step time: within a few percent over a run.
TEST(SummaryModelTest, StepTimeMatchesTheFullModel) {
  const WorkloadOptions o = Options(8, 12, 3);
  const auto fast = RunSteps(o);
  const Workload full = SimulateJob(o);
  const std::vector<common::StepSummary> full_rank0 =
      common::SummarizeSteps(full.capture.workers[0]);
  ASSERT_EQ(full_rank0.size(), fast.size());
  double fast_sum = 0, full_sum = 0;
  for (size_t s = 0; s < fast.size(); ++s) {
    fast_sum += static_cast<double>(fast[s][0].end_ns - fast[s][0].start_ns);
    full_sum += static_cast<double>(full_rank0[s].end_ns - full_rank0[s].start_ns);
    EXPECT_EQ(fast[s][0].collectives.size(), full_rank0[s].collectives.size());
  }
  EXPECT_NEAR(fast_sum / full_sum, 1.0, 0.02);
}

TEST(SummaryModelTest, SlowdownAppliesOnlyInItsWindow) {
  WorkloadOptions o = Options(8, 30, 5);
  const auto clean = RunSteps(o);
  const common::TimeNs from = clean[10][0].start_ns, until = clean[20][0].start_ns;
  o.slowdowns.push_back({3, 1.05, SlowdownKind::kCompute, from, until});
  const auto slow = RunSteps(o);
  // Before the window, the same job bit for bit.
  for (int s = 0; s < 10; ++s) EXPECT_EQ(slow[s][3].end_ns, clean[s][3].end_ns) << s;
  // Inside it, rank 3 arrives last at every collective.
  for (int s = 12; s < 19; ++s) {
    for (size_t b = 0; b < slow[s][3].collectives.size(); ++b) {
      common::TimeNs latest = 0;
      for (const auto& r : slow[s]) latest = std::max(latest, r.collectives[b].start_ns);
      EXPECT_EQ(slow[s][3].collectives[b].start_ns, latest) << "step " << s << " bucket " << b;
    }
  }
}

TEST(SummaryModelTest, HangStopsTheJobWithProgressNamingTheMissingRank) {
  WorkloadOptions o = Options(4, 50, 2);
  const auto clean = RunSteps(o);
  const common::TimeNs at =
      clean[5][2].collectives[3].start_ns;  // rank 2 never enters step 5's 4th bucket
  SummaryModel model(o, Hang{2, at});
  std::vector<common::StepSummary> out;
  int steps = 0;
  while (model.Next(&out)) ++steps;
  EXPECT_TRUE(model.hung());
  EXPECT_EQ(steps, 5);
  EXPECT_EQ(out.size(), 5u * 4);
  const int64_t sequence = 5 * o.buckets + 3;
  for (const common::RankProgress& p : model.progress()) {
    EXPECT_EQ(p.completed_sequence, sequence - 1) << p.rank;
    EXPECT_EQ(p.entered_sequence, p.rank == 2 ? sequence - 1 : sequence) << p.rank;
  }
  EXPECT_FALSE(model.Next(&out));
}

// The agent runs one model per segment of time, each starting at a later step. A hang in such a
// model's first collective still says where every rank stands: every collective before its first
// step completed. (Under load, the previous segment's last step can overrun it and be reported by
// neither, so the coordinator had only older steps to go by: a hang test saw every rank 33
// collectives behind.)
TEST(SummaryModelTest, AHangInALaterModelsFirstCollectiveNamesTheOneBeforeAsCompleted) {
  WorkloadOptions o = Options(4, 50, 2);
  o.first_step = 40;
  o.epoch_ns += 7'000'000'000;
  const auto clean = RunSteps(o);
  const common::TimeNs at = clean[0][1].collectives[0].start_ns;  // rank 1 never enters it
  SummaryModel model(o, Hang{1, at});
  std::vector<common::StepSummary> out;
  EXPECT_FALSE(model.Next(&out));
  EXPECT_TRUE(model.hung());
  const int64_t sequence = 40 * o.buckets;
  for (const common::RankProgress& p : model.progress()) {
    EXPECT_EQ(p.completed_sequence, sequence - 1) << p.rank;
    EXPECT_EQ(p.entered_sequence, p.rank == 1 ? sequence - 1 : sequence) << p.rank;
  }
}

}  // namespace
}  // namespace podscope::sim
