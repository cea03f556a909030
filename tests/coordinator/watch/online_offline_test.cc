// The online detector and the offline stragglers report agree on the same data (docs/watch.md):
// a simulated capture analysed offline, and the same capture summarised as an agent would
// (common::SummarizeSteps) and watched online, give every rank the same caused delay.
#include <gtest/gtest.h>

#include "analysis/analysis_run.h"
#include "common/watch_summary.h"
#include "coordinator/watch/detectors.h"
#include "coordinator/watch/job_watch.h"
#include "sim/workload_model.h"

namespace podscope::coordinator::watch {
namespace {

using sim::SlowdownKind;
using sim::Workload;
using sim::WorkloadOptions;

class OnlineOfflineTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(OnlineOfflineTest, CausedDelayIsTheSame) {
  WorkloadOptions o;
  o.ranks = 16;
  o.steps = 10;
  o.seed = GetParam();
  o.slowdowns.push_back({5, 1.05, SlowdownKind::kCompute});
  Workload job = sim::SimulateJob(o);
  for (size_t r = 0; r < job.capture.workers.size(); ++r)
    job.capture.workers[r].clock = job.true_clocks[r];

  analysis::AnalysisRequest request;
  request.reports = {"stragglers"};
  ASSERT_TRUE(analysis::ValidateRequest(&request).ok());
  const analysis::AnalysisResults offline =
      analysis::RunAnalyses(common::CaptureView(job.capture), request);
  ASSERT_TRUE(offline.stragglers->aligned);

  WatchLimits limits;
  limits.window_steps = 100;
  limits.settle_lag_steps = 0;
  JobWatch online(limits);
  for (const common::WorkerTrace& w : job.capture.workers) {
    // No clock offsets in this job: each rank's own clock is the true one.
    for (const common::StepSummary& s : common::SummarizeSteps(w)) ASSERT_TRUE(online.Add(s).ok());
  }
  const std::vector<WindowStats> windows = online.Settle();
  ASSERT_FALSE(windows.empty());
  const WindowStats& all = windows.back();
  ASSERT_EQ(all.first_step, 0);
  ASSERT_EQ(all.last_step, o.steps - 1);
  ASSERT_EQ(all.ranks.size(), offline.stragglers->workers.size());
  EXPECT_EQ(online.counters().unmatched_collectives, 0u);
  for (size_t i = 0; i < all.ranks.size(); ++i) {
    const analysis::WorkerLateness& expected = offline.stragglers->workers[i];
    EXPECT_EQ(all.ranks[i].rank, expected.rank);
    EXPECT_EQ(all.ranks[i].caused_delay_ns, expected.caused_delay_ns) << "rank " << expected.rank;
    EXPECT_EQ(all.ranks[i].last_arrivals, static_cast<int64_t>(expected.last_arrivals))
        << "rank " << expected.rank;
    EXPECT_EQ(all.ranks[i].collectives, static_cast<int64_t>(expected.collectives))
        << "rank " << expected.rank;
  }
  EXPECT_EQ(all.total_caused_delay_ns, offline.stragglers->total_caused_delay_ns);
  EXPECT_GT(all.ranks[5].caused_delay_ns, 0);

  // Both name rank 5, and only rank 5.
  ASSERT_EQ(offline.stragglers->stragglers.size(), 1u);
  EXPECT_EQ(offline.stragglers->stragglers[0].rank, 5);
  const std::vector<Finding> found = FindStragglers(all, DefaultRules().rules[0]);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].ranks, std::vector<int32_t>{5});
}

INSTANTIATE_TEST_SUITE_P(Seeds, OnlineOfflineTest, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace podscope::coordinator::watch
