// The watch engine on simulated jobs (sim/summary_model.h), step by step on the model's
// own clock: stragglers that start and stop, clean jobs, hangs.
#include "coordinator/watch/watch_engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/summary_model.h"

namespace podscope::coordinator::watch {
namespace {

using sim::SlowdownKind;
using sim::SummaryModel;
using sim::WorkloadOptions;
using ::testing::HasSubstr;

constexpr TimeNs kSecond = 1'000'000'000;

WorkloadOptions Job(int32_t ranks, int32_t steps, uint64_t seed) {
  WorkloadOptions o;
  o.ranks = ranks;
  o.steps = steps;
  o.seed = seed;
  return o;
}

// When each step of a clean run of the job starts (rank 0), to place slowdowns at steps.
std::vector<TimeNs> StepStarts(const WorkloadOptions& o) {
  SummaryModel model(o);
  std::vector<TimeNs> starts;
  std::vector<common::StepSummary> step;
  while (model.Next(&step)) {
    starts.push_back(step[0].start_ns);
    step.clear();
  }
  return starts;
}

struct Seen {
  AlertEvent event;
  int64_t newest_step;  // the model's newest step when it happened
};

// Feeds the model to the engine one step at a time, evaluating after each.
std::vector<Seen> Watch(WatchEngine& engine, SummaryModel& model, const std::string& job = "job") {
  std::vector<Seen> seen;
  std::vector<common::StepSummary> step;
  int64_t newest = -1;
  while (model.Next(&step)) {
    for (const common::StepSummary& s : step) EXPECT_TRUE(engine.Add(job, s).ok());
    newest = step[0].step;
    step.clear();
    for (AlertEvent& e : engine.Evaluate(model.now())) seen.push_back({std::move(e), newest});
  }
  return seen;
}

TEST(WatchEngineTest, AStragglerFiresNamingItsRankAndResolvesAfterItStops) {
  WorkloadOptions o = Job(8, 160, 7);
  const std::vector<TimeNs> starts = StepStarts(o);
  o.slowdowns.push_back({5, 1.05, SlowdownKind::kCompute, starts[40], starts[90]});
  SummaryModel model(o);
  WatchEngine engine(DefaultRules());
  for (int32_t r = 0; r < 8; ++r) engine.SetHost("job", r, "node-" + std::to_string(r / 4));
  const std::vector<Seen> seen = Watch(engine, model);
  ASSERT_EQ(seen.size(), 2u) << "one straggler alert, fired then resolved";
  const Alert& fired = seen[0].event.alert;
  EXPECT_EQ(seen[0].event.transition, Transition::kFired);
  EXPECT_EQ(fired.kind, AlertKind::kStraggler);
  EXPECT_EQ(fired.ranks, std::vector<int32_t>{5});
  EXPECT_EQ(fired.hosts, std::vector<std::string>{"node-1"});
  EXPECT_GE(seen[0].newest_step, 40);
  EXPECT_LE(seen[0].newest_step, 50) << "within 10 steps of the slowdown";
  EXPECT_THAT(fired.finding.message, HasSubstr("rank 5 held the others"));
  EXPECT_EQ(seen[1].event.transition, Transition::kResolved);
  EXPECT_EQ(seen[1].event.alert.id, fired.id);
  EXPECT_GT(seen[1].newest_step, 90);
  EXPECT_LE(seen[1].newest_step, 90 + 20 + 5 + 3 + 2)
      << "a window, the resolve hysteresis and the settle lag";
}

// Half a job's ranks stop reporting (their agent was killed) while rank 5 is still slow: the
// straggler alert stays firing (windows without every rank judge nothing), and a ranks-not-
// reporting alert names the missing ranks and their agent. Before, the window shrank to the ranks
// left, rank 5's caused delay fell to 0 and the alert resolved.
TEST(WatchEngineTest, RanksThatStopReportingFireTheirOwnAlertAndResolveNothing) {
  WorkloadOptions o = Job(16, 400, 3);
  const std::vector<TimeNs> starts = StepStarts(o);
  o.slowdowns.push_back({5, 1.2, SlowdownKind::kCompute, starts[0], starts[399]});
  SummaryModel model(o);
  WatchEngine engine(DefaultRules());
  for (int32_t r = 0; r < 16; ++r) engine.SetHost("job", r, "node-" + std::to_string(r / 8));
  std::vector<Seen> seen;
  std::vector<common::StepSummary> step;
  while (model.Next(&step)) {
    const int64_t number = step[0].step;
    for (const common::StepSummary& s : step) {
      if (number >= 100 && s.rank >= 8) continue;  // node-1's agent is gone from step 100
      EXPECT_TRUE(engine.Add("job", s).ok());
      engine.NoteAgent("job", s.rank, s.rank < 8 ? "agent-0" : "agent-1");
    }
    step.clear();
    for (AlertEvent& e : engine.Evaluate(model.now())) seen.push_back({std::move(e), number});
  }
  const Seen* straggler = nullptr;
  const Seen* missing = nullptr;
  for (const Seen& s : seen) {
    if (s.event.alert.kind == AlertKind::kStraggler) {
      EXPECT_EQ(s.event.transition, Transition::kFired)
          << s.event.alert.finding.message << " at step " << s.newest_step;
      straggler = &s;
    }
    if (s.event.alert.kind == AlertKind::kRanksNotReporting) missing = &s;
  }
  ASSERT_NE(straggler, nullptr) << "the straggler fired before the agent went";
  EXPECT_LT(straggler->newest_step, 100);
  ASSERT_NE(missing, nullptr);
  EXPECT_EQ(missing->event.transition, Transition::kFired);
  EXPECT_GE(missing->newest_step, 100);
  // Steps wait for every rank up to settle_after (5 s) and settle without it; 15 s after that
  // the ranks count as not reporting; then the hysteresis.
  EXPECT_LE(starts[missing->newest_step] - starts[100], (5 + 15 + 2) * kSecond)
      << "within the settle time, the 15 s and the hysteresis of the ranks' last step";
  EXPECT_EQ(missing->event.alert.ranks, (std::vector<int32_t>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(missing->event.alert.hosts, std::vector<std::string>{"node-1"});
  EXPECT_THAT(missing->event.alert.finding.message, HasSubstr("ranks (8-15) reported no step"));
  EXPECT_THAT(missing->event.alert.finding.message, HasSubstr("(agent-1)"));
  EXPECT_FALSE(engine.latest().at("job").full);
  EXPECT_EQ(engine.latest().at("job").missing_ranks.size(), 8u);
}

TEST(WatchEngineTest, ACleanJobFiresNothing) {
  SummaryModel model(Job(32, 600, 11));
  WatchEngine engine(DefaultRules());
  const std::vector<Seen> seen = Watch(engine, model);
  for (const Seen& s : seen) ADD_FAILURE() << s.event.alert.finding.message;
  ASSERT_FALSE(engine.latest().empty());
  EXPECT_EQ(engine.latest().at("job").last_step, 598)
      << "every rank reported step 599, so 598 settled";
}

TEST(WatchEngineTest, AHangNamesTheRankAndTheCollectiveWithinTwiceTheThreshold) {
  const WorkloadOptions o = Job(8, 100, 3);
  const std::vector<TimeNs> starts = StepStarts(o);
  const TimeNs hang_at = starts[30] + 50'000'000;  // inside step 30's backward pass
  SummaryModel model(o, sim::Hang{3, hang_at});
  RuleSet rules = DefaultRules();
  rules.rules[1].hang_after_ns = 5 * kSecond;  // as a test would lower it through the rules API
  WatchEngine engine(rules);
  EXPECT_TRUE(Watch(engine, model).empty());
  ASSERT_TRUE(model.hung());
  // The agents keep reporting where every rank stands; time moves on with nobody finishing.
  std::vector<Seen> seen;
  TimeNs fired_at = 0;
  for (TimeNs now = model.now(); now < model.now() + 20 * kSecond && fired_at == 0;
       now += kSecond / 2) {
    for (const common::RankProgress& p : model.progress()) ASSERT_TRUE(engine.Add("job", p).ok());
    for (AlertEvent& e : engine.Evaluate(now)) {
      fired_at = now;
      seen.push_back({std::move(e), -1});
    }
  }
  ASSERT_EQ(seen.size(), 1u);
  const Alert& a = seen[0].event.alert;
  EXPECT_EQ(a.kind, AlertKind::kHang);
  EXPECT_EQ(a.ranks, std::vector<int32_t>{3});
  EXPECT_LE(fired_at - hang_at, 10 * kSecond) << "within twice the 5 s threshold";
  int64_t sequence = -1;
  for (const Evidence& e : a.finding.evidence) {
    if (e.name == "sequence") sequence = static_cast<int64_t>(e.number);
  }
  EXPECT_EQ(sequence, model.progress()[0].entered_sequence);
  EXPECT_EQ(sequence / o.buckets, 30) << "a collective of step 30";
  for (const auto& [rank, completed] : a.finding.last_completed)
    EXPECT_EQ(completed, sequence - 1) << rank;
}

TEST(WatchEngineTest, DisabledRulesAndOtherJobsRulesStaySilent) {
  WorkloadOptions o = Job(8, 80, 7);
  o.slowdowns.push_back({2, 1.2, SlowdownKind::kCompute});
  RuleSet rules = DefaultRules();
  rules.rules[0].job = "another-job";
  SummaryModel model(o);
  WatchEngine engine(rules);
  EXPECT_TRUE(Watch(engine, model).empty());
  rules.rules[0].job = "";
  rules.rules[0].enabled = false;
  SummaryModel again(o);
  WatchEngine disabled(rules);
  EXPECT_TRUE(Watch(disabled, again).empty());
}

TEST(WatchEngineTest, ChangingARuleResolvesItsAlerts) {
  WorkloadOptions o = Job(8, 40, 7);
  o.slowdowns.push_back({2, 1.2, SlowdownKind::kCompute});
  SummaryModel model(o);
  WatchEngine engine(DefaultRules());
  const std::vector<Seen> seen = Watch(engine, model);
  ASSERT_EQ(seen.size(), 1u);
  ASSERT_EQ(engine.tracker().firing(), 1u);
  RuleSet stricter = DefaultRules();
  stricter.rules[0].min_share_of_step_time = 0.5;
  const std::vector<AlertEvent> events = engine.SetRules(stricter, model.now());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].transition, Transition::kResolved);
  EXPECT_EQ(engine.tracker().firing(), 0u);
}

TEST(WatchEngineTest, JobsAreBounded) {
  EngineLimits limits;
  limits.max_jobs = 2;
  WatchEngine engine(DefaultRules(), limits);
  common::StepSummary s;
  s.end_ns = 1;
  EXPECT_TRUE(engine.Add("a", s).ok());
  EXPECT_TRUE(engine.Add("b", s).ok());
  EXPECT_EQ(engine.Add("c", s).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(engine.jobs(), (std::vector<std::string>{"a", "b"}));
}

// A job with no data for longer than its rules could still need is forgotten, and its slot
// goes to the next job: jobs end, and a long-running coordinator once stopped watching every
// new job after 1,024 job names.
TEST(WatchEngineTest, QuietJobsAreForgottenAndTheirSlotsGoToNewJobs) {
  EngineLimits limits;
  limits.max_jobs = 2;
  limits.forget_quiet_after_ns = 60 * kSecond;
  WatchEngine engine(DefaultRules(), limits);  // the hang rule's 60 s: never before 120 s
  EXPECT_EQ(engine.ForgetQuietAfter(), 120 * kSecond);
  common::StepSummary s;
  s.end_ns = 1;
  const TimeNs t0 = 1'000 * kSecond;
  ASSERT_TRUE(engine.Add("a", s).ok());
  ASSERT_TRUE(engine.Add("b", s).ok());
  engine.Evaluate(t0);
  EXPECT_EQ(engine.Add("c", s).code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(engine.Add("b", s).ok());  // b goes on; a went quiet at t0
  engine.Evaluate(t0 + 100 * kSecond);
  engine.Evaluate(t0 + 120 * kSecond);
  EXPECT_TRUE(engine.TakeForgotten().empty()) << "120 s is not longer than 120 s";
  engine.Evaluate(t0 + 121 * kSecond);
  EXPECT_EQ(engine.TakeForgotten(), std::vector<std::string>{"a"});
  EXPECT_EQ(engine.jobs(), std::vector<std::string>{"b"});
  EXPECT_TRUE(engine.Add("c", s).ok());
  EXPECT_EQ(engine.jobs(), (std::vector<std::string>{"b", "c"}));
  // A longer hang threshold keeps quiet jobs longer: a hang is named before its job goes.
  RuleSet slow = DefaultRules();
  slow.rules[1].hang_after_ns = 600 * kSecond;
  engine.SetRules(slow, t0 + 122 * kSecond);
  EXPECT_EQ(engine.ForgetQuietAfter(), 1'200 * kSecond);
  slow.rules[1].enabled = false;
  engine.SetRules(slow, t0 + 122 * kSecond);
  EXPECT_EQ(engine.ForgetQuietAfter(), 60 * kSecond);
}

// A hung job whose agents went silent: its hang fires first, and resolves when the job is
// forgotten.
TEST(WatchEngineTest, AForgottenJobsAlertsResolve) {
  const WorkloadOptions o = Job(8, 60, 3);
  const std::vector<TimeNs> starts = StepStarts(o);
  SummaryModel model(o, sim::Hang{3, starts[30] + 50'000'000});
  RuleSet rules = DefaultRules();
  rules.rules[1].hang_after_ns = 5 * kSecond;
  EngineLimits limits;
  limits.forget_quiet_after_ns = 5 * kSecond;  // twice the hang threshold wins: 10 s
  WatchEngine engine(rules, limits);
  EXPECT_TRUE(Watch(engine, model).empty());
  for (const common::RankProgress& p : model.progress()) ASSERT_TRUE(engine.Add("job", p).ok());
  std::vector<AlertEvent> events;
  for (TimeNs now = model.now(); now < model.now() + 30 * kSecond; now += kSecond / 2) {
    for (AlertEvent& e : engine.Evaluate(now)) events.push_back(std::move(e));
  }
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].transition, Transition::kFired);
  EXPECT_EQ(events[0].alert.kind, AlertKind::kHang);
  EXPECT_EQ(events[1].transition, Transition::kResolved);
  EXPECT_EQ(engine.TakeForgotten(), std::vector<std::string>{"job"});
  EXPECT_TRUE(engine.jobs().empty());
}

}  // namespace
}  // namespace podscope::coordinator::watch
