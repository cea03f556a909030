#include "analysis/job_check.h"

#include <gtest/gtest.h>

#include "tests/analysis/hand_trace.h"

namespace podscope::analysis {
namespace {

using podscope::testing::HandTrace;

common::Capture Ranks(std::initializer_list<std::pair<int32_t, int32_t>> rank_and_world,
                      const std::string& job = "j") {
  common::Capture capture;
  for (const auto& [rank, world] : rank_and_world) {
    capture.workers.push_back(HandTrace(rank, world).Build());
    capture.workers.back().info.job = job;
  }
  return capture;
}

TEST(JobCheckTest, OneWholeJobHasNothingToSay) {
  const JobCheck check = CheckOneJob(common::CaptureView(Ranks({{0, 4}, {1, 4}, {2, 4}, {3, 4}})));
  EXPECT_FALSE(check.mixed);
  EXPECT_TRUE(check.warnings.empty());
}

TEST(JobCheckTest, WorldSizesThatDisagreeAreNotOneJob) {
  const JobCheck check = CheckOneJob(common::CaptureView(Ranks({{3, 8}, {1, 2}})));
  EXPECT_TRUE(check.mixed);
  ASSERT_EQ(check.warnings.size(), 1u);
  EXPECT_EQ(check.warnings[0], "the ranks disagree on the world size (2: ranks 1; 8: ranks 3)");
}

TEST(JobCheckTest, MissingRanksAreAWarningOnly) {
  common::Capture capture;
  for (int32_t r = 0; r < 128; ++r) {
    if (r == 5 || r == 77) continue;
    capture.workers.push_back(HandTrace(r, 128).Build());
  }
  const JobCheck check = CheckOneJob(common::CaptureView(capture));
  EXPECT_FALSE(check.mixed);
  ASSERT_EQ(check.warnings.size(), 1u);
  EXPECT_EQ(check.warnings[0],
            "2 of 128 ranks are missing (5,77): pod-wide figures cover the others only");
}

TEST(JobCheckTest, StaleFilesAndOtherJobsAreNotOneJob) {
  // An earlier 4-rank run left its files beside an 8-rank one: ranks 0-3 twice, two world sizes.
  const JobCheck stale = CheckOneJob(common::CaptureView(Ranks({{0, 8},
                                                                {1, 8},
                                                                {2, 8},
                                                                {3, 8},
                                                                {4, 8},
                                                                {5, 8},
                                                                {6, 8},
                                                                {7, 8},
                                                                {0, 4},
                                                                {1, 4},
                                                                {2, 4},
                                                                {3, 4}})));
  EXPECT_TRUE(stale.mixed);
  ASSERT_EQ(stale.warnings.size(), 2u);
  EXPECT_EQ(
      stale.warnings[1],
      "ranks 0-3 appear more than once (stale files from an earlier run in the same folder?)");
  common::Capture two_jobs = Ranks({{0, 2}, {1, 2}}, "a");
  two_jobs.workers[1].info.job = "b";
  const JobCheck jobs = CheckOneJob(common::CaptureView(two_jobs));
  EXPECT_TRUE(jobs.mixed);
  EXPECT_EQ(jobs.warnings.at(0), "the inputs hold 2 jobs (a: ranks 0; b: ranks 1)");
  EXPECT_TRUE(
      CheckOneJob(common::CaptureView(Ranks({{0, 2}, {2, 2}}))).mixed);  // rank 2 of a world of 2
}

}  // namespace
}  // namespace podscope::analysis
