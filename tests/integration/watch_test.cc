// Watching jobs end to end: real podscope-agent processes stream their simulated
// ranks' step summaries to a real podscope-coordinator, whose detectors raise alerts read back
// over REST. As deployed: HTTPS, mutual TLS, tokens.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>

#include "agent/collectors/simulated_ranks.h"
#include "common/parse_number.h"
#include "common/protocol_version.h"
#include "common/watch_wire.h"
#include "tests/integration/live_cluster_fixture.h"
#include "tests/sanitizers.h"
#include "tests/wait_for.h"

namespace podscope::testing {
namespace {

using common::TimeNs;

class WatchTest : public LiveClusterTest {
 protected:
  void SetUp() override {
    // Evidence captures of 32 default-profile ranks: under the sanitizers, with another suite
    // beside it on two cores, an agent takes longer than the live tests' 20 s to upload.
    config_ = dir_.Write("coordinator.json",
                         R"({"capture": {"capture_grace_ms": 4000, "upload_timeout_ms": 120000},
                                               "agents": {"heartbeat_interval_ms": 300}})");
  }

  // The alerts of `job` in `state` ("firing" or "resolved"), as GET /v1/alerts gives them.
  std::vector<simdjson::dom::element> Alerts(const std::string& job, const std::string& state) {
    const HttpResult r = HttpCall(http_port_, "GET", "/v1/alerts?job=" + job + "&state=" + state);
    EXPECT_EQ(r.status, 200) << r.body;
    std::vector<simdjson::dom::element> out;
    if (r.status != 200) return out;
    for (simdjson::dom::element a : Json(r.body)["alerts"].get_array()) out.push_back(a);
    return out;
  }

  // Polls until an alert of `kind` is in `state`, or until Unix time `deadline_ns`.
  std::optional<simdjson::dom::element> WaitForAlert(const std::string& job,
                                                     const std::string& kind,
                                                     const std::string& state, TimeNs deadline_ns) {
    // Looks at least once, even past the deadline (a resolved alert stays listed).
    std::optional<simdjson::dom::element> found;
    testing::WaitFor(
        [&] {
          for (simdjson::dom::element a : Alerts(job, state)) {
            if (a["kind"].get_string().value() == kind) found = a;
          }
          return found.has_value();
        },
        std::chrono::milliseconds(std::max<int64_t>(0, (deadline_ns - UnixNowNs()) / 1'000'000)),
        std::chrono::milliseconds(200));
    return found;
  }

  // "4 agents x 8 ranks" of `job`, each with `extra` simulation keys.
  void StartFourAgents(const std::string& job, const std::string& extra) {
    const int offsets_ms[] = {35, -50, 12, -20};
    for (int a = 0; a < 4; ++a) {
      StartAgent("a" + std::to_string(a),
                 "ranks=" + std::to_string(8 * a) + "-" + std::to_string(8 * a + 7) +
                     ",world=32,job=" + job +
                     ",seed=11,clock-offset-ms=" + std::to_string(offsets_ms[a]) + extra);
    }
    WaitForAgents(4);
  }
};

// A 5% compute straggler from a segment boundary 20 s into the run: the alert names exactly that
// rank and its host within 10 steps of the first slow step, and resolves once the slowdown stops.
TEST_F(WatchTest, AFivePercentStragglerFiresWithinTenStepsNamingItsRankThenResolves) {
  StartCoordinator();
  constexpr TimeNs kSegment = agent::SimulatedRanksCollector::kSegmentNs;
  const TimeNs onset = (UnixNowNs() + 20'000'000'000) / kSegment * kSegment + kSegment;
  const TimeNs end = onset + 12'000'000'000;
  const std::string at =
      ",straggler=13:1.05,straggler-at=" + std::to_string(onset / 1'000'000'000) + "-" +
      std::to_string(end / 1'000'000'000);
  StartFourAgents("watched", at);
  // The first slow step: the first of the onset's segment (its steps start at the boundary).
  absl::StatusOr<agent::SimulationSpec> spec =
      agent::ParseSimulationSpec("ranks=0-7,world=32,job=watched");
  ASSERT_TRUE(spec.ok());
  const agent::AgentClock host_clock;
  const int64_t first_slow_step =
      onset / kSegment * agent::SimulatedRanksCollector(*spec, "h", host_clock).steps_per_segment();

  // Nothing fires while the job is clean.
  // Sampled until the onset: an alert at any look fails the test, so this is an observation
  // window, not a timing assertion.
  while (UnixNowNs() < onset) {
    ASSERT_TRUE(Alerts("watched", "firing").empty())
        << HttpCall(http_port_, "GET", "/v1/alerts").body;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // not a timing assertion
  }
  std::optional<simdjson::dom::element> fired = WaitForAlert("watched", "straggler", "firing", end);
  ASSERT_TRUE(fired.has_value()) << "no straggler alert while rank 13 was slow: "
                                 << HttpCall(http_port_, "GET", "/v1/alerts").body;
  simdjson::dom::element alert = *fired;
  ASSERT_EQ(alert["ranks"].get_array().size(), 1u) << simdjson::to_string(alert);
  EXPECT_EQ(alert["ranks"].at(0).get_int64().value(), 13);
  EXPECT_EQ(alert["hosts"].at(0).get_string().value(), "host-a1");
  const int64_t fired_at = alert["fired_at_step"].get_int64().value();
  std::printf(
      "straggler alert fired at step %lld, %lld steps after the first slow one (%lld), %.2f s "
      "after it began\n",
      static_cast<long long>(fired_at), static_cast<long long>(fired_at - first_slow_step),
      static_cast<long long>(first_slow_step),
      static_cast<double>(alert["first_seen_ns"].get_int64().value() - onset) / 1e9);
  EXPECT_GE(fired_at, first_slow_step) << "fired before rank 13 slowed down";
  EXPECT_LE(fired_at - first_slow_step, 10) << simdjson::to_string(alert);
  EXPECT_GT(alert["evidence"]["share_of_caused_delay"].get_double().value(), 0.5)
      << simdjson::to_string(alert);
  const std::string id(alert["id"].get_string().value());

  // The alert links the evidence capture it started: complete, every rank, and its offline
  // straggler report names the same rank.
  // The alert is listed as it fires; its capture is started right after, outside the watch's
  // lock, so the link may follow it by a moment.
  std::string capture;
  testing::WaitFor([&] {
    const HttpResult r = HttpCall(http_port_, "GET", "/v1/alerts?job=watched");
    if (r.status != 200) return false;
    for (simdjson::dom::element a : Json(r.body)["alerts"].get_array()) {
      std::string_view linked;
      if (a["id"].get_string().value() == id &&
          a["capture_id"].get_string().get(linked) == simdjson::SUCCESS)
        capture = linked;
    }
    return !capture.empty();
  });
  ASSERT_FALSE(capture.empty()) << "the alert links no evidence capture: "
                                << HttpCall(http_port_, "GET", "/v1/alerts").body;
  EXPECT_EQ(WaitForState(capture, {"complete", "partial", "failed"}, 180'000), "complete")
      << Capture(capture);
  EXPECT_EQ(Capture(capture)["workers"].get_array().size(), 32u);
  const HttpResult stragglers =
      HttpCall(http_port_, "GET", "/v1/captures/" + capture + "/stragglers");
  ASSERT_EQ(stragglers.status, 200) << stragglers.body;
  simdjson::dom::element report = Json(stragglers.body);
  ASSERT_GE(report["stragglers"].get_array().size(), 1u) << stragglers.body;
  EXPECT_EQ(report["stragglers"].at(0)["rank"].get_int64().value(), 13) << stragglers.body;

  std::optional<simdjson::dom::element> resolved =
      WaitForAlert("watched", "straggler", "resolved", end + 30'000'000'000);
  ASSERT_TRUE(resolved.has_value()) << "the alert did not resolve after the slowdown stopped: "
                                    << HttpCall(http_port_, "GET", "/v1/alerts").body;
  EXPECT_EQ((*resolved)["id"].get_string().value(), id);
  EXPECT_GE((*resolved)["resolved_ns"].get_int64().value(), end);
  EXPECT_TRUE(Alerts("watched", "firing").empty())
      << HttpCall(http_port_, "GET", "/v1/alerts").body;

  const HttpResult metrics = HttpCall(http_port_, "GET", "/metrics");
  EXPECT_NE(metrics.body.find("podscope_watch_batches_total"), std::string::npos);
  EXPECT_NE(metrics.body.find("podscope_watch_refused_batches_total 0"), std::string::npos)
      << metrics.body;
}

// An agent killed while a rank it does not serve is slow: through the real daemons, a
// ranks-not-reporting alert names its ranks, its host and the agent, and the straggler alert stays
// firing (before, the window shrank to the ranks left and the straggler alert resolved).
TEST_F(WatchTest, AKilledAgentFiresRanksNotReportingAndResolvesNothing) {
  StartCoordinator();
  StartAgent("keep", "ranks=0-7,world=16,job=lost,seed=5,straggler=5:1.3,profile=light");
  Daemon& doomed =
      StartAgent("gone", "ranks=8-15,world=16,job=lost,seed=5,straggler=5:1.3,profile=light");
  WaitForAgents(2);
  std::optional<simdjson::dom::element> straggler =
      WaitForAlert("lost", "straggler", "firing", UnixNowNs() + 90'000'000'000);
  ASSERT_TRUE(straggler.has_value()) << HttpCall(http_port_, "GET", "/v1/alerts").body;
  const std::string straggler_id((*straggler)["id"].get_string().value());
  doomed.Kill();
  std::optional<simdjson::dom::element> missing =
      WaitForAlert("lost", "ranks_not_reporting", "firing", UnixNowNs() + 60'000'000'000);
  ASSERT_TRUE(missing.has_value()) << HttpCall(http_port_, "GET", "/v1/alerts").body;
  std::vector<int64_t> ranks;
  for (simdjson::dom::element r : (*missing)["ranks"].get_array()) ranks.push_back(r.get_int64());
  EXPECT_EQ(ranks, (std::vector<int64_t>{8, 9, 10, 11, 12, 13, 14, 15}))
      << simdjson::to_string(*missing);
  EXPECT_EQ((*missing)["hosts"].at(0).get_string().value(), "host-gone");
  const std::string message((*missing)["message"].get_string().value());
  EXPECT_NE(message.find("(gone)"), std::string::npos) << message;
  // Observed for a while after: the straggler alert is not resolved by the ranks' absence.
  const TimeNs until = UnixNowNs() + 8'000'000'000;
  while (UnixNowNs() < until) {
    for (simdjson::dom::element a : Alerts("lost", "resolved"))
      ASSERT_NE(a["id"].get_string().value(), straggler_id) << simdjson::to_string(a);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // not a timing assertion
  }
  bool still_firing = false;
  for (simdjson::dom::element a : Alerts("lost", "firing"))
    still_firing = still_firing || a["id"].get_string().value() == straggler_id;
  EXPECT_TRUE(still_firing) << HttpCall(http_port_, "GET", "/v1/alerts").body;
  const HttpResult watch = HttpCall(http_port_, "GET", "/v1/watch/jobs/lost");
  EXPECT_NE(
      watch.body.find(
          R"("full":false,"absent_ranks":[8,9,10,11,12,13,14,15],"missing_ranks":[8,9,10,11,12,13,14,15])"),
      std::string::npos)
      << watch.body;
}

// Two minutes of a clean 32-rank job through the real daemons: every rule evaluated on every
// settled step, and nothing fires (nor fired and resolved in between). Twenty seconds under a
// sanitizer, which looks at the same code.
TEST_F(WatchTest, ACleanJobWatchedForTwoMinutesFiresNothing) {
  StartCoordinator();
  StartFourAgents("clean", "");
  const int64_t seconds = testing::SanitizedOr<int64_t>(20, 120);
  const TimeNs until = UnixNowNs() + seconds * 1'000'000'000;
  while (UnixNowNs() < until) {
    const HttpResult r = HttpCall(http_port_, "GET", "/v1/alerts?job=clean");
    ASSERT_EQ(r.status, 200) << r.body;
    ASSERT_EQ(r.body, R"({"alerts":[]})") << "a clean job raised an alert";
    // Sampling a two-minute observation window; not a timing assertion.
    std::this_thread::sleep_for(std::chrono::seconds(2));  // not a timing assertion
  }
  // podscope watch, piped: one JSON line per refresh, every rank with its figures.
  const auto [lines, lines_code] = Cli("watch --job clean --count 2 --interval 200ms");
  ASSERT_EQ(lines_code, 0) << lines;
  ASSERT_EQ(std::count(lines.begin(), lines.end(), '\n'), 2) << lines;
  simdjson::dom::element window = Json(lines.substr(0, lines.find('\n')));
  EXPECT_EQ(window["ranks"].get_array().size(), 32u) << lines;
  EXPECT_TRUE(window["full"].get_bool().value()) << lines;
  for (simdjson::dom::element r : window["ranks"].get_array()) {
    EXPECT_GT(r["step_time_ms"].get_double().value(), 50) << simdjson::to_string(r);
    EXPECT_LT(std::abs(r["lag_ms"].get_double().value()), 10)
        << "a clean job: nobody lags " << simdjson::to_string(r);
  }
  EXPECT_EQ(Cli("watch --job nosuch --count 1").second, 1);
  // And the data really flowed: about 10 steps a second of 32 ranks all along.
  const HttpResult metrics = HttpCall(http_port_, "GET", "/metrics");
  const size_t at = metrics.body.find("\npodscope_watch_steps_total ");
  ASSERT_NE(at, std::string::npos) << metrics.body;
  const size_t from = at + std::string("\npodscope_watch_steps_total ").size();
  absl::StatusOr<int64_t> steps =
      common::ParseInt(metrics.body.substr(from, metrics.body.find('\n', from) - from));
  ASSERT_TRUE(steps.ok()) << steps.status();
  std::printf("%lld step summaries watched\n", static_cast<long long>(*steps));
  EXPECT_GT(*steps, 32 * 10 * seconds * 3 / 4);
  EXPECT_NE(metrics.body.find("podscope_watch_job_ranks{training_job=\"clean\"} 32"),
            std::string::npos)
      << metrics.body;
}

// A rank that stops entering collectives: the hang alert names it, the collective it never
// entered and where every rank stands, within twice the threshold (lowered to 5 s here).
TEST_F(WatchTest, AHangIsNamedWithItsRankAndCollectiveWithinTwiceTheThreshold) {
  StartCoordinator();
  // Through the CLI: a bad rule set is refused naming the key and changes nothing; a good one is in
  // force.
  const auto [refused, refused_code] =
      Cli("rules set " +
          dir_.Write("bad.json", R"({"rules":[{"name":"h","kind":"hang","hang_after":5}]})"));
  EXPECT_EQ(refused_code, 1) << refused;
  EXPECT_NE(refused.find("hang_after"), std::string::npos) << refused;
  const auto [set, set_code] = Cli(
      "rules set " +
      dir_.Write("rules.json", R"({"rules":[{"name":"hang","kind":"hang","hang_after_s":5}]})"));
  ASSERT_EQ(set_code, 0) << set;
  // Its one rule and the built-in ranks_not_reporting rule (docs/watch.md).
  EXPECT_NE(set.find("2 rules in force"), std::string::npos) << set;
  const TimeNs hang_at = UnixNowNs() + 8'000'000'000;
  char at[64];
  std::snprintf(at, sizeof(at), ",hang=21@%.3f", static_cast<double>(hang_at) / 1e9);
  StartFourAgents("stuck", at);
  std::optional<simdjson::dom::element> fired =
      WaitForAlert("stuck", "hang", "firing", hang_at + 30'000'000'000);
  ASSERT_TRUE(fired.has_value()) << HttpCall(http_port_, "GET", "/v1/alerts").body;
  simdjson::dom::element alert = *fired;
  const TimeNs after = alert["first_seen_ns"].get_int64().value() - hang_at;
  std::printf("hang alert %.1f s after the hang (threshold 5 s)\n",
              static_cast<double>(after) / 1e9);
  EXPECT_LE(after, 10'000'000'000) << simdjson::to_string(alert);
  EXPECT_GE(after, 5'000'000'000) << "fired before the threshold";
  ASSERT_EQ(alert["ranks"].get_array().size(), 1u) << simdjson::to_string(alert);
  EXPECT_EQ(alert["ranks"].at(0).get_int64().value(), 21);
  EXPECT_EQ(alert["hosts"].at(0).get_string().value(), "host-a2");
  simdjson::dom::element evidence = alert["evidence"];
  EXPECT_EQ(evidence["op"].get_string().value(), "AllReduce");
  EXPECT_EQ(evidence["nranks"].get_double().value(), 32);
  EXPECT_EQ(evidence["waiting_ranks"].get_double().value(), 31);
  const int64_t sequence = static_cast<int64_t>(evidence["sequence"].get_double().value());
  EXPECT_GT(evidence["bytes"].get_double().value(), 0);
  // Where each rank stands: 31 completed the collective before, the hung one too, none this one.
  size_t ranks = 0;
  for (simdjson::dom::element r : evidence["last_completed"].get_array()) {
    ++ranks;
    EXPECT_EQ(r["sequence"].get_int64().value(), sequence - 1) << simdjson::to_string(r);
  }
  EXPECT_EQ(ranks, 32u);
  const auto [listed, listed_code] = Cli("alerts --job stuck");
  EXPECT_EQ(listed_code, 0) << listed;
  EXPECT_NE(listed.find("hang"), std::string::npos) << listed;
  EXPECT_NE(listed.find(" 21 "), std::string::npos) << listed;
  EXPECT_NE(listed.find("host-a2"), std::string::npos) << listed;
  EXPECT_NE(listed.find("never entered AllReduce"), std::string::npos) << listed;
}

// Scheduled captures through the CLI and the real daemons: the schedule captures on its own,
// survives a coordinator restart, and stops when deleted.
TEST_F(WatchTest, ScheduledCapturesRunSurviveARestartAndStop) {
  StartCoordinator();
  StartAgent("s0", "ranks=0-1,world=4,job=sched,profile=light");
  StartAgent("s1", "ranks=2-3,world=4,job=sched,profile=light");
  WaitForAgents(2);
  const auto [bad, bad_code] = Cli("schedules add --job sched --every 5s --duration 500ms");
  EXPECT_EQ(bad_code, 1) << bad;
  EXPECT_NE(bad.find("every_s: must be 10 to"), std::string::npos) << bad;
  // A job no agent serves is taken (jobs come and go) but said to be unserved.
  const auto [unserved, unserved_code] =
      Cli("schedules add --job nosuchjob --every 10m --duration 500ms");
  ASSERT_EQ(unserved_code, 0) << unserved;
  EXPECT_NE(unserved.find("warning: no connected agent serves job nosuchjob now"),
            std::string::npos)
      << unserved;
  const size_t unserved_id = unserved.find("sch-");  // stderr's warning may come first
  ASSERT_NE(unserved_id, std::string::npos) << unserved;
  const auto [removed, removed_code] =
      Cli("schedules delete " +
          unserved.substr(unserved_id, unserved.find(':', unserved_id) - unserved_id));
  EXPECT_EQ(removed_code, 0) << removed;
  const auto [added, added_code] = Cli("schedules add --job sched --every 10s --duration 500ms");
  ASSERT_EQ(added_code, 0) << added;
  EXPECT_EQ(added.find("warning"), std::string::npos) << added;
  const std::string id = added.substr(0, added.find(':'));
  ASSERT_EQ(id.rfind("sch-", 0), 0u) << added;
  // The first run comes 9 to 11 s after the schedule was made; its capture completes.
  std::string capture;
  testing::WaitFor([&] {
    simdjson::dom::element s = Json(HttpCall(http_port_, "GET", "/v1/schedules/" + id).body);
    std::string_view c;
    if (s["last_capture_id"].get_string().get(c) == simdjson::SUCCESS) capture = std::string(c);
    return !capture.empty();
  });
  ASSERT_FALSE(capture.empty()) << HttpCall(http_port_, "GET", "/v1/schedules").body;
  EXPECT_EQ(WaitForState(capture, {"complete", "partial", "failed"}, 60'000), "complete")
      << Capture(capture);
  EXPECT_EQ(Capture(capture)["workers"].get_array().size(), 4u);

  const int64_t runs_before =
      Json(HttpCall(http_port_, "GET", "/v1/schedules/" + id).body)["runs"].get_int64().value();
  coordinator_->Terminate();
  StartCoordinator();  // same ports, same store
  const auto [listed, listed_code] = Cli("schedules list");
  EXPECT_EQ(listed_code, 0) << listed;
  EXPECT_NE(listed.find(id), std::string::npos) << listed;
  EXPECT_NE(listed.find("cap-"), std::string::npos) << "its last capture is remembered: " << listed;
  EXPECT_GE(
      Json(HttpCall(http_port_, "GET", "/v1/schedules/" + id).body)["runs"].get_int64().value(),
      runs_before);
  const auto [deleted, deleted_code] = Cli("schedules delete " + id);
  EXPECT_EQ(deleted_code, 0) << deleted;
  EXPECT_EQ(HttpCall(http_port_, "GET", "/v1/schedules/" + id).status, 404);
  EXPECT_EQ(Cli("schedules delete " + id).second, 1);
  EXPECT_NE(Cli("schedules list").first.find("no schedules"), std::string::npos);
}

// The Watch call is held to what the other agent calls are: the caller is its certificate, it
// holds a control stream, its batches are well formed, and it speaks only for its own ranks.
TEST_F(WatchTest, WatchStreamsAreCheckedLikeEveryOtherAgentCall) {
  StartCoordinator();
  common::WatchBatchBuilder builder;
  common::StepSummary step;
  step.rank = 0;
  step.step = 1;
  step.start_ns = UnixNowNs();
  step.end_ns = step.start_ns + 1'000'000;
  builder.Add("j", step);
  const v1::WatchBatch good = builder.Take();
  auto send = [&](RawAgentSession& session, v1::WatchBatch batch) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::WatchAck ack;
    std::unique_ptr<grpc::ClientWriter<v1::WatchBatch>> writer =
        session.stub->Watch(&context, &ack);
    writer->Write(batch);
    writer->WritesDone();
    return writer->Finish();
  };

  std::unique_ptr<RawAgentSession> mallory = OpenRawAgentSession("mallory");
  v1::WatchBatch as_other = good;
  as_other.set_agent_id("node-1");
  grpc::Status s = send(*mallory, as_other);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  // Logged under the certificate's name, with the claim beside it: never as node-1's refusal.
  EXPECT_NE(coordinator_->WaitForLog("agent mallory \\(claiming to be node-1\\): watch stream "
                                     "refused"),
            "")
      << coordinator_->Log();

  v1::WatchBatch as_self = good;
  as_self.set_agent_id("mallory");
  s = send(*mallory, as_self);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("connect before sending watch data"), std::string::npos)
      << s.error_message();

  // Connected, serving job j's rank 0: an out-of-table index is refused, another rank dropped.
  v1::AgentMessage hello;
  v1::AgentHello* h = hello.mutable_hello();
  h->set_protocol_major(common::kAgentProtocolMajor);
  h->set_agent_id("mallory");
  h->set_instance_id("i1");
  v1::WorkerDescriptor* w = h->add_workers();
  w->set_job("j");
  w->set_rank(0);
  ASSERT_TRUE(mallory->stream->Write(hello));
  v1::CoordinatorMessage welcome;
  ASSERT_TRUE(mallory->stream->Read(&welcome));
  v1::WatchBatch broken = as_self;
  broken.mutable_steps(0)->set_job(3);
  s = send(*mallory, broken);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("names job #3 of 1"), std::string::npos) << s.error_message();
  // Until its first clock burst, an agent's batches are dropped, not taken on an unknown clock.
  s = send(*mallory, as_self);
  EXPECT_TRUE(s.ok()) << s.error_message();
  v1::AgentMessage clock;
  v1::ClockSample* sample = clock.mutable_clock()->add_samples();
  sample->set_t1_ns(UnixNowNs());
  sample->set_t2_ns(sample->t1_ns() + 100'000);
  sample->set_t3_ns(sample->t1_ns() + 110'000);
  sample->set_t4_ns(sample->t1_ns() + 210'000);
  ASSERT_TRUE(mallory->stream->Write(clock));
  WaitForAgents(1);
  v1::WatchBatch foreign = as_self;
  foreign.mutable_steps(0)->set_rank(5);
  s = send(*mallory, foreign);
  EXPECT_TRUE(s.ok()) << s.error_message();
  const HttpResult metrics = HttpCall(http_port_, "GET", "/metrics");
  EXPECT_NE(metrics.body.find("podscope_watch_refused_batches_total 3\n"), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("podscope_watch_unaligned_batches_total 1\n"), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("podscope_watch_foreign_records_total 1\n"), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("podscope_watch_batches_total 2\n"), std::string::npos)
      << metrics.body;
}

}  // namespace
}  // namespace podscope::testing
