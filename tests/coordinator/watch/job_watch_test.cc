#include "coordinator/watch/job_watch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/coordinator/watch/watch_test_util.h"

namespace podscope::coordinator::watch {
namespace {

using testing::Arrive;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::kMs;
using testing::Step;

const RankWindow& RankOf(const WindowStats& w, int32_t rank) {
  for (const RankWindow& r : w.ranks) {
    if (r.rank == rank) return r;
  }
  static const RankWindow kNone;
  ADD_FAILURE() << "no rank " << rank;
  return kNone;
}

// Three ranks arrive at 100, 130 and 160 ms; all leave at 200. Waits are 60, 30 and 0: rank 2
// arrived last and held the others for 160 - 130 = 30 ms.
TEST(JobWatchTest, CausedDelayIsTheLastArrivalMinusTheSecondLast) {
  JobWatch w;
  ASSERT_TRUE(w.Add(Step(0, 0, 0, 250, {{0, 100, 200}})).ok());
  ASSERT_TRUE(w.Add(Step(1, 0, 0, 250, {{0, 130, 200}})).ok());
  EXPECT_TRUE(w.Settle().empty()) << "rank 2 has not reported step 0 and nobody is past it";
  ASSERT_TRUE(w.Add(Step(2, 0, 0, 260, {{0, 160, 200}})).ok());
  for (int32_t r = 0; r < 3; ++r) ASSERT_TRUE(w.Add(Step(r, 1, 260, 500, {})).ok());
  const std::vector<WindowStats> settled = w.Settle();
  ASSERT_EQ(settled.size(), 1u) << "step 0 settles once every rank is past it; step 1 waits";
  const WindowStats& s = settled[0];
  EXPECT_EQ(s.first_step, 0);
  EXPECT_EQ(s.last_step, 0);
  EXPECT_EQ(RankOf(s, 2).caused_delay_ns, 30 * kMs);
  EXPECT_EQ(RankOf(s, 2).largest_step_caused_ns, 30 * kMs);
  EXPECT_EQ(RankOf(s, 2).last_arrivals, 1);
  EXPECT_EQ(RankOf(s, 0).caused_delay_ns, 0);
  EXPECT_EQ(RankOf(s, 0).collectives, 1);
  EXPECT_THAT(RankOf(s, 2).late_steps, ElementsAre(0));
  EXPECT_EQ(s.total_caused_delay_ns, 30 * kMs);
  EXPECT_EQ(s.window_step_time_ns, 250 * kMs) << "median over ranks of 250, 250 and 260 ms";
  EXPECT_EQ(s.step_time_ns, std::vector<TimeNs>{250 * kMs});
}

// Ties go to the lowest rank, as the offline report does; the wait is capped at the kernel's
// duration (a kernel cannot wait longer than it ran).
TEST(JobWatchTest, TiesGoToTheLowestRankAndWaitsAreCappedAtTheDuration) {
  JobWatch w;
  ASSERT_TRUE(w.Add(Step(0, 0, 0, 300, {{0, 100, 110}})).ok());  // ran 10 ms: waits at most 10
  ASSERT_TRUE(w.Add(Step(1, 0, 0, 300, {{0, 160, 200}})).ok());
  ASSERT_TRUE(w.Add(Step(2, 0, 0, 300, {{0, 160, 200}})).ok());
  for (int32_t r = 0; r < 3; ++r) ASSERT_TRUE(w.Add(Step(r, 1, 300, 400, {})).ok());
  const WindowStats s = w.Settle().front();
  EXPECT_EQ(RankOf(s, 1).last_arrivals, 1) << "ranks 1 and 2 tie; the lowest is the last arriver";
  EXPECT_EQ(RankOf(s, 1).caused_delay_ns, 0) << "rank 2 waited 0 for it";
  EXPECT_EQ(RankOf(s, 2).last_arrivals, 0);
}

TEST(JobWatchTest, ASilentRankDoesNotHoldTheWindowBack) {
  WatchLimits limits;
  limits.settle_lag_steps = 2;
  JobWatch w(limits);
  for (int64_t step = 0; step < 6; ++step) {
    for (int32_t r = 0; r < 3; ++r) {
      if (r == 2 && step >= 1) continue;  // rank 2 went quiet after step 0
      ASSERT_TRUE(w.Add(Step(r, step, step * 100, step * 100 + 90, {})).ok());
    }
  }
  const std::vector<WindowStats> settled = w.Settle();
  ASSERT_EQ(settled.size(), 4u) << "steps 0..3 settle: 2 steps behind the newest (5)";
  EXPECT_EQ(settled.back().last_step, 3);
}

// A rank that stops: absent once it misses 3 settled steps (the window is not full), not
// reporting after 15 s of that, and retired after 10 minutes (the job goes on without it: its
// windows are full again). Steps are 10 s apart on the coordinator's clock.
TEST(JobWatchTest, ARankThatStopsIsAbsentThenNotReportingThenRetired) {
  WatchLimits limits;
  limits.window_steps = 2;
  JobWatch w(limits);
  constexpr TimeNs kStepMs = 10'000;
  std::vector<WindowStats> windows;
  for (int64_t step = 0; step < 80; ++step) {
    for (int32_t r = 0; r < 2; ++r) {
      if (r == 1 && step > 4) continue;  // rank 1 stops after step 4
      ASSERT_TRUE(w.Add(Step(r, step, step * kStepMs, step * kStepMs + 9'000, {})).ok());
    }
    for (WindowStats& s : w.Settle(step * kStepMs * kMs + 9'000 * kMs + limits.settle_after_ns))
      windows.push_back(std::move(s));
  }
  auto at = [&](int64_t step) -> const WindowStats& {
    for (const WindowStats& s : windows)
      if (s.last_step == step) return s;
    ADD_FAILURE() << "step " << step << " never settled";
    return windows.front();
  };
  EXPECT_TRUE(at(6).full) << "a step or two behind is not absent";
  EXPECT_THAT(at(8).absent_ranks, ElementsAre(1));
  EXPECT_FALSE(at(8).full);
  EXPECT_TRUE(at(8).missing_ranks.empty()) << "absent for under 15 s";
  EXPECT_THAT(at(10).missing_ranks, ElementsAre(1));
  EXPECT_EQ(at(10).missing_since_step, 4);
  EXPECT_THAT(at(60).absent_ranks, ElementsAre(1)) << "under 10 minutes";
  EXPECT_TRUE(at(75).absent_ranks.empty()) << "retired after 10 minutes";
  EXPECT_TRUE(at(75).missing_ranks.empty());
  EXPECT_TRUE(at(75).full);
}

TEST(JobWatchTest, TheWindowSlidesAndFeedsTheBaseline) {
  WatchLimits limits;
  limits.window_steps = 2;
  limits.baseline_steps = 3;
  JobWatch w(limits);
  for (int64_t step = 0; step < 7; ++step) {
    for (int32_t r = 0; r < 2; ++r) {
      ASSERT_TRUE(w.Add(Step(r, step, step * 1000, step * 1000 + 100 + step, {}, 2)).ok());
    }
  }
  // Both ranks reported step 6, so steps 0..5 settle; 6 waits for a later one (or the lag).
  const std::vector<WindowStats> settled = w.Settle();
  ASSERT_EQ(settled.size(), 6u);
  EXPECT_FALSE(settled[0].full) << "one step of two";
  EXPECT_TRUE(settled[1].full);
  const WindowStats& last = settled.back();
  EXPECT_EQ(last.first_step, 4);
  EXPECT_EQ(last.last_step, 5);
  EXPECT_EQ(last.step_time_ns, (std::vector<TimeNs>{104 * kMs, 105 * kMs}));
  EXPECT_EQ(last.baseline_step_time_ns, (std::vector<TimeNs>{101 * kMs, 102 * kMs, 103 * kMs}))
      << "the three steps before the window; step 0 fell out of the bounded baseline";
}

TEST(JobWatchTest, MalformedSummariesAreRefusedWithTheReason) {
  JobWatch w;
  absl::Status s = w.Add(Step(0, 0, 100, 50, {}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("ends before it starts"));
  EXPECT_THAT(std::string(w.Add(Step(-1, 0, 0, 1, {})).message()), HasSubstr("negative rank"));
  EXPECT_THAT(std::string(w.Add(Step(0, -3, 0, 1, {})).message()), HasSubstr("negative step"));
  EXPECT_THAT(std::string(w.Add(Step(0, 0, 0, 10, {{5, 8, 4}})).message()),
              HasSubstr("collective 5 is malformed"));
  EXPECT_EQ(w.counters().rejected_summaries, 4u);
  EXPECT_EQ(w.counters().summaries, 0u);
}

TEST(JobWatchTest, LateAndResentSummariesAreCountedNotDoubleCounted) {
  WatchLimits limits;
  limits.window_steps = 2;
  limits.settle_lag_steps = 1;
  JobWatch w(limits);
  for (int64_t step = 0; step < 5; ++step) {
    for (int32_t r = 0; r < 2; ++r) {
      ASSERT_TRUE(w.Add(Step(r, step, step * 100, step * 100 + 50,
                             {{step, step * 100 + 10, step * 100 + 20}}, 2))
                      .ok());
    }
  }
  w.Settle();  // 0..3 settled; the window holds 2 and 3
  ASSERT_TRUE(
      w.Add(Step(2, 0, 0, 50, {}, 2)).ok());  // rank 2's step 0 comes after it left the window
  EXPECT_EQ(w.counters().late_summaries, 1u);
  ASSERT_TRUE(w.Add(Step(0, 4, 400, 450, {{4, 410, 420}}, 2)).ok());  // resent
  EXPECT_EQ(w.counters().summaries, 11u);
  for (int32_t r = 0; r < 2; ++r) ASSERT_TRUE(w.Add(Step(r, 5, 500, 550, {}, 2)).ok());
  const WindowStats last = w.Settle().back();
  EXPECT_EQ(last.last_step, 4);
  EXPECT_EQ(RankOf(last, 0).steps, 2);
  EXPECT_EQ(RankOf(last, 0).collectives, 2) << "steps 3 and 4, the resent one counted once";
}

TEST(JobWatchTest, StepsGoingBackMeanANewRun) {
  WatchLimits limits;
  limits.window_steps = 3;
  JobWatch w(limits);
  w.SetHost(0, "node-a");
  for (int64_t step = 0; step < 10; ++step)
    ASSERT_TRUE(w.Add(Step(0, step, step * 100, step * 100 + 50, {}, 1)).ok());
  ASSERT_TRUE(w.Add(Step(0, 0, 2000, 2050, {}, 1)).ok());
  EXPECT_EQ(w.counters().restarts, 1u);
  EXPECT_EQ(w.newest_step(), 0);
  ASSERT_TRUE(w.Add(Step(0, 1, 2100, 2150, {}, 1)).ok());
  const std::vector<WindowStats> settled = w.Settle();
  ASSERT_FALSE(settled.empty());
  EXPECT_EQ(settled.front().first_step, 0);
  EXPECT_EQ(settled.front().hosts, std::vector<std::string>{"node-a"})
      << "a new run keeps the hosts";
}

TEST(JobWatchTest, PendingCollectivesAreBounded) {
  WatchLimits limits;
  limits.max_pending_collectives = 2;
  JobWatch w(limits);
  // Three collectives of 3 ranks that only rank 0 reports: the third does not fit.
  ASSERT_TRUE(w.Add(Step(0, 0, 0, 100, {{0, 10, 20}, {1, 30, 40}, {2, 50, 60}})).ok());
  EXPECT_EQ(w.counters().unmatched_collectives, 1u);
}

TEST(JobWatchTest, AllReduceBusBandwidthFromTheMedianTransfer) {
  JobWatch w;
  // 2 ranks, 1 GB; rank 1 arrives 5 ms late; both end at 15 ms: transfers 10 and 10 ms.
  // algbw = 1e9 B / 10 ms = 100 GB/s; busbw = algbw x 2(n-1)/n = 100 GB/s for n = 2.
  ASSERT_TRUE(w.Add(Step(0, 0, 0, 20, {{0, 0, 15}}, 2, 1'000'000'000)).ok());
  ASSERT_TRUE(w.Add(Step(1, 0, 0, 20, {{0, 5, 15}}, 2, 1'000'000'000)).ok());
  for (int32_t r = 0; r < 2; ++r) ASSERT_TRUE(w.Add(Step(r, 1, 20, 40, {}, 2)).ok());
  const WindowStats s = w.Settle().front();
  EXPECT_DOUBLE_EQ(s.allreduce_bytes, 1e9);
  EXPECT_NEAR(s.allreduce_busbw_gbytes_per_s, 100.0, 1e-9);
  EXPECT_EQ(RankOf(s, 1).caused_delay_ns, 5 * kMs);
  EXPECT_EQ(RankOf(s, 0).exposed_comm_ns, 15 * kMs)
      << "the step's last collective, wait and transfer";
}

TEST(JobWatchTest, ProgressKeepsEachRanksNewestEnteredAndCompleted) {
  JobWatch w;
  common::RankProgress p;
  p.rank = 1;
  p.communicator = 9;
  p.nranks = 2;
  p.entered_sequence = 4;
  p.entered_ns = 40;
  p.completed_sequence = 3;
  p.completed_ns = 35;
  w.Add(p);
  common::RankProgress older = p;
  older.entered_sequence = 2;
  older.completed_sequence = 2;
  w.Add(older);
  const std::vector<CommunicatorProgress> progress = w.Progress();
  ASSERT_EQ(progress.size(), 1u);
  ASSERT_EQ(progress[0].ranks.size(), 1u);
  EXPECT_EQ(progress[0].ranks[0].entered_sequence, 4);
  EXPECT_EQ(progress[0].ranks[0].completed_sequence, 3);
}

}  // namespace
}  // namespace podscope::coordinator::watch
