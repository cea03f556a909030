// The detector alone on many simulated jobs, faster than real time (docs/watch.md): with the
// default rules, clean jobs of 8 to 1024 ranks (20 seeds x 1,000 steps each) fire nothing, and
// a 5% compute straggler starting at a random step is found within 10 steps in every seed.
#include <gtest/gtest.h>

#include <random>

#include "coordinator/watch/watch_engine.h"
#include "sim/summary_model.h"

namespace podscope::coordinator::watch {
namespace {

using sim::SlowdownKind;
using sim::SummaryModel;
using sim::WorkloadOptions;

constexpr int kSeeds = 20;

WorkloadOptions Job(int32_t ranks, int32_t steps, uint64_t seed) {
  WorkloadOptions o;
  o.ranks = ranks;
  o.steps = steps;
  o.seed = seed;
  o.ranks_per_host = 8;
  return o;
}

class DetectorSweepTest : public ::testing::TestWithParam<int32_t> {};

TEST_P(DetectorSweepTest, CleanJobsFireNothing) {
  const int32_t ranks = GetParam();
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    SummaryModel model(Job(ranks, 1000, seed));
    WatchEngine engine(DefaultRules());
    std::vector<common::StepSummary> step;
    while (model.Next(&step)) {
      for (const common::StepSummary& s : step) ASSERT_TRUE(engine.Add("job", s).ok());
      step.clear();
      for (const AlertEvent& e : engine.Evaluate(model.now())) {
        ADD_FAILURE() << ranks << " ranks, seed " << seed << ": " << e.alert.rule << ": "
                      << e.alert.finding.message;
      }
    }
    ASSERT_EQ(engine.latest().at("job").last_step, 998)
        << "every step was watched (999 waits for a later one)";
  }
}

TEST_P(DetectorSweepTest, AFivePercentStragglerIsFoundWithinTenSteps) {
  const int32_t ranks = GetParam();
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    std::mt19937_64 rng(seed * 7919 + static_cast<uint64_t>(ranks));
    const int32_t start_step = std::uniform_int_distribution<int32_t>(25, 975)(rng);
    const int32_t straggler = std::uniform_int_distribution<int32_t>(0, ranks - 1)(rng);
    // The slowdown starts at the first step that begins at or after that step's clean start.
    WorkloadOptions o = Job(ranks, start_step + 11, seed);
    TimeNs from = 0;
    {
      SummaryModel clean(o);
      std::vector<common::StepSummary> step;
      for (int32_t s = 0; s <= start_step && clean.Next(&step); ++s) {
        from = step[0].start_ns;
        step.clear();
      }
    }
    o.slowdowns.push_back({straggler, 1.05, SlowdownKind::kCompute, from});
    SummaryModel model(o);
    WatchEngine engine(DefaultRules());
    std::vector<common::StepSummary> step;
    int64_t found_at = -1;
    while (found_at < 0 && model.Next(&step)) {
      const int64_t newest = step[0].step;
      for (const common::StepSummary& s : step) ASSERT_TRUE(engine.Add("job", s).ok());
      step.clear();
      for (const AlertEvent& e : engine.Evaluate(model.now())) {
        ASSERT_EQ(e.alert.kind, AlertKind::kStraggler) << e.alert.finding.message;
        ASSERT_EQ(e.alert.ranks, std::vector<int32_t>{straggler}) << e.alert.finding.message;
        ASSERT_GE(newest, start_step) << "fired before the slowdown";
        found_at = newest;
      }
    }
    EXPECT_GE(found_at, start_step)
        << ranks << " ranks, seed " << seed << ": rank " << straggler << " slowed at step "
        << start_step << " was not found within 10 steps";
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, DetectorSweepTest, ::testing::Values(8, 64, 256, 1024),
                         [](const ::testing::TestParamInfo<int32_t>& info) {
                           return std::to_string(info.param);
                         });

}  // namespace
}  // namespace podscope::coordinator::watch
