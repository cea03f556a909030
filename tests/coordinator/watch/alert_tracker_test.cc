#include "coordinator/watch/alert_tracker.h"

#include <gtest/gtest.h>

#include <string>

namespace podscope::coordinator::watch {
namespace {

AlertRule Straggler() {
  AlertRule r;
  r.name = "straggler";
  r.kind = AlertKind::kStraggler;
  return r;  // fire after 3 of 5, resolve after 5 clean
}

Finding Rank(int32_t rank) {
  Finding f;
  f.kind = AlertKind::kStraggler;
  f.subject = "rank " + std::to_string(rank);
  f.ranks = {rank};
  f.hosts = {"node-0"};
  return f;
}

// One evaluation per second (an injected clock: the evaluation index); `pattern` says whether
// rank 5 was found. Returns the transitions in order as "F@t" / "R@t".
std::string Evaluations(AlertTracker& tracker, const AlertRule& rule, const std::string& pattern,
                        int64_t t0 = 0) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const TimeNs now = (t0 + static_cast<TimeNs>(i)) * 1'000'000'000;
    std::vector<Finding> findings;
    if (pattern[i] == 'x') findings.push_back(Rank(5));
    for (const AlertEvent& e : tracker.Observe(rule, "job-a", findings, now)) {
      out += (e.transition == Transition::kFired ? "F@" : "R@") +
             std::to_string(now / 1'000'000'000) + " ";
    }
  }
  return out;
}

TEST(AlertTrackerTest, FiresAfterKOfMAndResolvesAfterRCleanInARow) {
  AlertTracker tracker;
  EXPECT_EQ(Evaluations(tracker, Straggler(), "x.x.x....."), "F@4 R@9 ");
  const std::vector<Alert> alerts = tracker.Alerts();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].state, AlertState::kResolved);
  EXPECT_EQ(alerts[0].first_seen_ns, 4'000'000'000);
  EXPECT_EQ(alerts[0].last_seen_ns, 4'000'000'000);
  EXPECT_EQ(alerts[0].resolved_ns, 9'000'000'000);
  EXPECT_EQ(alerts[0].job, "job-a");
  EXPECT_EQ(alerts[0].rule, "straggler");
  EXPECT_EQ(alerts[0].ranks, std::vector<int32_t>{5});
  EXPECT_EQ(alerts[0].hosts, std::vector<std::string>{"node-0"});
}

TEST(AlertTrackerTest, TwoOfFiveNeverFires) {
  AlertTracker tracker;
  EXPECT_EQ(Evaluations(tracker, Straggler(), "x..x..x..x..x..x..x..x..x..x"), "");
  EXPECT_EQ(tracker.firing(), 0u);
}

// A flapping rank fires once and stays firing: no alert storm.
TEST(AlertTrackerTest, AFlappingRankFiresOnce) {
  AlertTracker tracker;
  EXPECT_EQ(Evaluations(tracker, Straggler(), "x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x"), "F@4 ");
  EXPECT_EQ(tracker.firing(), 1u);
  EXPECT_EQ(tracker.Alerts()[0].last_seen_ns, 30'000'000'000) << "last seen follows the findings";
}

TEST(AlertTrackerTest, RefiringAfterResolutionIsANewAlert) {
  AlertTracker tracker;
  EXPECT_EQ(Evaluations(tracker, Straggler(), "xxx.....xxx"), "F@2 R@7 F@10 ");
  const std::vector<Alert> alerts = tracker.Alerts();
  ASSERT_EQ(alerts.size(), 2u);
  EXPECT_EQ(alerts[0].state, AlertState::kFiring);
  EXPECT_EQ(alerts[1].state, AlertState::kResolved);
  EXPECT_NE(alerts[0].id, alerts[1].id);
}

TEST(AlertTrackerTest, JobsAndRulesAreTrackedApart) {
  AlertTracker tracker;
  AlertRule other = Straggler();
  other.name = "straggler-strict";
  for (int i = 0; i < 3; ++i) {
    tracker.Observe(Straggler(), "job-a", {Rank(1)}, i);
    tracker.Observe(Straggler(), "job-b", {}, i);  // job-b's clean evaluations do not clear job-a
    tracker.Observe(other, "job-a", {}, i);
  }
  ASSERT_EQ(tracker.firing(), 1u);
  EXPECT_EQ(tracker.Alerts()[0].job, "job-a");
}

TEST(AlertTrackerTest, DroppingARuleResolvesItsAlerts) {
  AlertTracker tracker;
  Evaluations(tracker, Straggler(), "xxx");
  ASSERT_EQ(tracker.firing(), 1u);
  const std::vector<AlertEvent> events = tracker.Drop("straggler", 99);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].transition, Transition::kResolved);
  EXPECT_EQ(events[0].alert.resolved_ns, 99);
  EXPECT_EQ(tracker.firing(), 0u);
}

TEST(AlertTrackerTest, SubjectsAndHistoryAreBounded) {
  TrackerLimits limits;
  limits.max_subjects = 4;
  limits.max_resolved = 2;
  AlertTracker tracker(limits);
  AlertRule once = Straggler();
  once.hysteresis = {1, 1, 1};
  std::vector<Finding> many;
  for (int32_t r = 0; r < 10; ++r) many.push_back(Rank(r));
  EXPECT_EQ(tracker.Observe(once, "job", many, 1).size(), 4u);
  EXPECT_EQ(tracker.dropped_subjects(), 6u);
  EXPECT_EQ(tracker.Observe(once, "job", {}, 2).size(), 4u) << "all four resolve";
  EXPECT_EQ(tracker.Alerts().size(), 2u) << "only the newest resolved alerts are kept";
}

TEST(AlertTrackerTest, CaptureIdLinksToTheAlert) {
  AlertTracker tracker;
  AlertRule once = Straggler();
  once.hysteresis = {1, 1, 1};
  const std::vector<AlertEvent> fired = tracker.Observe(once, "job", {Rank(3)}, 1);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_TRUE(tracker.SetCaptureId(fired[0].alert.id, "cap-1"));
  EXPECT_EQ(tracker.Alerts()[0].capture_id, "cap-1");
  EXPECT_FALSE(tracker.SetCaptureId("nope", "cap-2"));
}

}  // namespace
}  // namespace podscope::coordinator::watch
