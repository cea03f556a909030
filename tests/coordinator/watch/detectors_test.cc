#include "coordinator/watch/detectors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/coordinator/watch/watch_test_util.h"

namespace podscope::coordinator::watch {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::kMs;

AlertRule RuleOf(AlertKind kind) {
  for (const AlertRule& r : DefaultRules().rules) {
    if (r.kind == kind) return r;
  }
  return {};
}

double EvidenceOf(const Finding& f, const std::string& name) {
  for (const Evidence& e : f.evidence) {
    if (e.name == name) return e.number;
  }
  ADD_FAILURE() << "no evidence " << name;
  return -1;
}

// 8 ranks over a window whose median rank spent 1000 ms in steps; 40 ms of waiting was caused.
WindowStats EightRanks(TimeNs rank5_caused_ms, int64_t rank5_last, int64_t collectives = 10) {
  WindowStats w;
  w.first_step = 10;
  w.last_step = 19;
  for (int32_t r = 0; r < 8; ++r) {
    RankWindow rw;
    rw.rank = r;
    rw.collectives = collectives;
    rw.step_time_ns = 1000 * kMs;
    rw.steps = 10;
    rw.caused_delay_ns = r == 5 ? rank5_caused_ms * kMs : 1 * kMs;
    rw.last_arrivals = r == 5 ? rank5_last : 1;
    if (r == 5) rw.late_steps = {12, 13};
    w.total_caused_delay_ns += rw.caused_delay_ns;
    w.ranks.push_back(rw);
  }
  w.window_step_time_ns = 1000 * kMs;
  return w;
}

// A hiccup is not a straggler: the criterion's share of step time leaves out the rank's worst
// step, so 30 of its 33 ms in one step (a process descheduled once) fires nothing, while the
// same 33 ms spread over the window does.
TEST(DetectorsTest, OneBadStepDoesNotMakeAStraggler) {
  const AlertRule rule = RuleOf(AlertKind::kStraggler);
  WindowStats once = EightRanks(33, 5);
  once.ranks[5].largest_step_caused_ns = 30 * kMs;
  EXPECT_TRUE(FindStragglers(once, rule).empty())
      << "3 ms without its worst step: 0.3% of the step time";
  WindowStats spread = EightRanks(33, 5);
  spread.ranks[5].largest_step_caused_ns = 5 * kMs;
  const std::vector<Finding> found = FindStragglers(spread, rule);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_DOUBLE_EQ(EvidenceOf(found[0], "caused_delay_ms"), 33)
      << "the evidence keeps the whole delay";
  EXPECT_DOUBLE_EQ(EvidenceOf(found[0], "share_of_step_time"), 0.028);
}

// Rank 5 caused 33 of 40 ms (83%), 3.3% of the step time, and arrived last at 5 of 10: all
// three terms of the offline criterion hold.
TEST(DetectorsTest, StragglerByTheOfflineCriterion) {
  const std::vector<Finding> found =
      FindStragglers(EightRanks(33, 5), RuleOf(AlertKind::kStraggler));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].subject, "rank 5");
  EXPECT_THAT(found[0].ranks, ElementsAre(5));
  EXPECT_THAT(found[0].steps, ElementsAre(12, 13));
  EXPECT_DOUBLE_EQ(EvidenceOf(found[0], "caused_delay_ms"), 33);
  EXPECT_DOUBLE_EQ(EvidenceOf(found[0], "share_of_caused_delay"), 33.0 / 40);
  EXPECT_DOUBLE_EQ(EvidenceOf(found[0], "share_of_step_time"), 0.033);
  EXPECT_DOUBLE_EQ(EvidenceOf(found[0], "last_arriver_share"), 0.5);
  EXPECT_THAT(found[0].message, HasSubstr("rank 5 held the others for 33.0 ms over steps 10-19"));
}

TEST(DetectorsTest, NoStragglerWhenAnyTermFails) {
  const AlertRule rule = RuleOf(AlertKind::kStraggler);
  EXPECT_TRUE(FindStragglers(EightRanks(4, 5), rule).empty())
      << "4 ms is 0.4% of the step time, under 0.5%";
  EXPECT_TRUE(FindStragglers(EightRanks(33, 0), rule).empty()) << "never the last to arrive";
  EXPECT_TRUE(FindStragglers(EightRanks(1, 1), rule).empty())
      << "a fair share of a clean job's waiting";
  AlertRule strict = rule;
  strict.min_share_of_caused_delay = 0.9;
  EXPECT_TRUE(FindStragglers(EightRanks(33, 5), strict).empty()) << "83% is under a 90% rule";
}

WindowStats Steps(std::vector<TimeNs> window_ms, size_t baseline_steps, TimeNs baseline_ms) {
  WindowStats w;
  w.first_step = 100;
  w.last_step = 100 + static_cast<int64_t>(window_ms.size()) - 1;
  for (TimeNs t : window_ms) w.step_time_ns.push_back(t * kMs);
  w.baseline_step_time_ns.assign(baseline_steps, baseline_ms * kMs);
  return w;
}

TEST(DetectorsTest, RegressionAgainstTheJobsOwnBaseline) {
  const AlertRule rule = RuleOf(AlertKind::kRegression);  // 10%, at least 40 baseline steps
  const std::vector<Finding> found = FindRegression(Steps({114, 115, 116}, 40, 100), rule);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].subject, "job");
  EXPECT_NEAR(EvidenceOf(found[0], "slowdown"), 0.15, 1e-12);
  EXPECT_DOUBLE_EQ(EvidenceOf(found[0], "step_time_ms"), 115);
  EXPECT_DOUBLE_EQ(EvidenceOf(found[0], "baseline_step_time_ms"), 100);
  EXPECT_TRUE(FindRegression(Steps({109, 110, 110}, 40, 100), rule).empty())
      << "10% is not more than 10%";
  EXPECT_TRUE(FindRegression(Steps({150, 150}, 39, 100), rule).empty())
      << "too little baseline yet";
}

TEST(DetectorsTest, ExposedCommunicationOfTheMedianRank) {
  WindowStats w;
  for (int32_t r = 0; r < 3; ++r) {
    RankWindow rw;
    rw.rank = r;
    rw.step_time_ns = 1000 * kMs;
    rw.exposed_comm_ns = (r == 0 ? 100 : r == 1 ? 300 : 600) * kMs;
    w.ranks.push_back(rw);
  }
  const std::vector<Finding> found =
      FindExposedCommunication(w, RuleOf(AlertKind::kExposedCommunication));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_DOUBLE_EQ(EvidenceOf(found[0], "exposed_share"), 0.3);
  EXPECT_DOUBLE_EQ(EvidenceOf(found[0], "max_rank_exposed_share"), 0.6);
  w.ranks[1].exposed_comm_ns = 250 * kMs;
  EXPECT_TRUE(FindExposedCommunication(w, RuleOf(AlertKind::kExposedCommunication)).empty())
      << "25% is the limit";
}

TEST(DetectorsTest, AllReduceEfficiencyNeedsALink) {
  WindowStats w;
  w.allreduce_bytes = 1e9;
  w.allreduce_busbw_gbytes_per_s = 40;
  AlertRule rule = RuleOf(AlertKind::kAllReduceEfficiency);
  EXPECT_TRUE(FindAllReduceInefficiency(w, rule).empty()) << "no link bandwidth configured";
  rule.link_gbytes_per_s = 100;
  const std::vector<Finding> found = FindAllReduceInefficiency(w, rule);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_DOUBLE_EQ(EvidenceOf(found[0], "efficiency"), 0.4);
  EXPECT_THAT(found[0].message, HasSubstr("bus bandwidth 40.0 GB/s is 40.0% of the 100 GB/s link"));
  w.allreduce_busbw_gbytes_per_s = 50;  // exactly half the link
  EXPECT_TRUE(FindAllReduceInefficiency(w, rule).empty());
}

common::RankProgress At(int32_t rank, int64_t entered, TimeNs entered_s, int64_t completed) {
  common::RankProgress p;
  p.rank = rank;
  p.communicator = 0xabc;
  p.nranks = 4;
  p.entered_sequence = entered;
  p.entered_ns = entered_s * 1'000'000'000;
  p.entered_op = common::CollectiveOp::kAllReduce;
  p.entered_bytes = 4096;
  p.completed_sequence = completed;
  p.completed_ns = entered_s * 1'000'000'000 - 5;
  return p;
}

// Ranks 0, 1 and 3 entered AllReduce #17 at 10-12 s; rank 2 completed #16 and never entered #17.
TEST(DetectorsTest, HangNamesTheMissingRanksAndTheCollective) {
  CommunicatorProgress c;
  c.communicator = 0xabc;
  c.nranks = 4;
  c.ranks = {At(0, 17, 10, 16), At(1, 17, 11, 16), At(2, 16, 9, 16), At(3, 17, 12, 16)};
  const AlertRule rule = RuleOf(AlertKind::kHang);  // 60 s
  EXPECT_TRUE(FindHangs({c}, 70'000'000'000, rule).empty())
      << "60 s after the first rank entered: not yet";
  const std::vector<Finding> found = FindHangs({c}, 70'000'000'001, rule);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_THAT(found[0].ranks, ElementsAre(2));
  EXPECT_EQ(found[0].subject, "communicator 0000000000000abc");
  EXPECT_DOUBLE_EQ(EvidenceOf(found[0], "sequence"), 17);
  EXPECT_DOUBLE_EQ(EvidenceOf(found[0], "bytes"), 4096);
  EXPECT_DOUBLE_EQ(EvidenceOf(found[0], "waiting_ranks"), 3);
  EXPECT_THAT(found[0].last_completed,
              ElementsAre(std::pair<int32_t, int64_t>{0, 16}, std::pair<int32_t, int64_t>{1, 16},
                          std::pair<int32_t, int64_t>{2, 16}, std::pair<int32_t, int64_t>{3, 16}));
  EXPECT_THAT(found[0].message, HasSubstr("rank(s) 2 never entered AllReduce #17"));
}

// Rank 1 entered #17 at 10 s, having completed #16, so every rank entered #16. Ranks 0 and 2
// last reported #12 (their reports of #16 and #17 not in yet); rank 3 completed #16 and stopped.
TEST(DetectorsTest, HangWaitsForReportsOlderThanTheNewestCompletedCollective) {
  CommunicatorProgress c;
  c.communicator = 0xabc;
  c.nranks = 4;
  c.ranks = {At(0, 12, 5, 12), At(1, 17, 10, 16), At(2, 12, 5, 12), At(3, 16, 9, 16)};
  const AlertRule rule = RuleOf(AlertKind::kHang);  // 60 s
  EXPECT_TRUE(FindHangs({c}, 70'000'000'001, rule).empty())
      << "ranks 0 and 2 have entered #16 since their reports: wait for their newer ones";
  // Their newer reports: both entered #17 and wait in it with rank 1.
  CommunicatorProgress fresh = c;
  fresh.ranks[0] = At(0, 17, 11, 16);
  fresh.ranks[2] = At(2, 17, 12, 16);
  std::vector<Finding> found = FindHangs({fresh}, 70'000'000'001, rule);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_THAT(found[0].ranks, ElementsAre(3));
  EXPECT_DOUBLE_EQ(EvidenceOf(found[0], "waiting_ranks"), 3);
  // Without newer reports, after twice the threshold the silent ranks are named too.
  EXPECT_TRUE(FindHangs({c}, 130'000'000'000, rule).empty());
  found = FindHangs({c}, 130'000'000'001, rule);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_THAT(found[0].ranks, ElementsAre(0, 2, 3));
  EXPECT_DOUBLE_EQ(EvidenceOf(found[0], "waiting_ranks"), 1);
}

TEST(DetectorsTest, NoHangWhenEveryoneCompletedOrEveryoneEntered) {
  const AlertRule rule = RuleOf(AlertKind::kHang);
  CommunicatorProgress done;
  done.nranks = 2;
  done.ranks = {At(0, 17, 10, 17), At(1, 16, 9, 17)};  // rank 1's newer entry not reported yet
  EXPECT_TRUE(FindHangs({done}, 1'000'000'000'000, rule).empty());
  CommunicatorProgress all_in;
  all_in.nranks = 2;
  all_in.ranks = {At(0, 17, 10, 16), At(1, 17, 10, 16)};
  EXPECT_TRUE(FindHangs({all_in}, 1'000'000'000'000, rule).empty()) << "nobody is missing";
}

}  // namespace
}  // namespace podscope::coordinator::watch
