// The watch service behind its REST routes (no daemon): watch data in, alerts out, rules
// checked, stored and read back after a restart. Time is injected.
#include "coordinator/api/watch_api.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <simdjson.h>

#include "common/time_source.h"
#include "coordinator/api/watch_metrics.h"
#include "sim/summary_model.h"
#include "storage/rocksdb_trace_store.h"
#include "tests/test_paths.h"

namespace podscope::coordinator {
namespace {

using ::testing::HasSubstr;

struct Fixture {
  podscope::testing::ScratchDir dir;
  std::unique_ptr<storage::RocksDbTraceStore> store;
  common::SimulatedTimeSource time{0};
  std::unique_ptr<watch::WatchService> service;
  http::Router router;
  std::unique_ptr<WatchApi> api;

  Fixture() { Open(); }
  void Open() {
    service.reset();
    store.reset();
    store = std::move(*storage::RocksDbTraceStore::Open({.path = dir.File("db")}));
    service = std::move(*watch::WatchService::Create(*store, time));
    router = http::Router();
    api = std::make_unique<WatchApi>(*service);
    api->Register(router);
  }
  http::HttpResponse Call(const std::string& method, const std::string& path, std::string body = "",
                          std::map<std::string, std::string> query = {}) {
    std::map<std::string, std::string> params;
    bool path_matched = false;
    const http::Route* route = router.Match(method, path, &params, &path_matched);
    EXPECT_NE(route, nullptr) << method << " " << path;
    if (route == nullptr) return http::HttpResponse::Problem(404, "Not Found", path);
    http::HttpRequest r;
    r.method = method;
    r.path = path;
    r.body = std::move(body);
    r.query = std::move(query);
    r.params = std::move(params);
    return route->handler(r);
  }
  // Feeds a simulated job's steps as agents would, one step at a time, evaluating after each.
  void Watch(sim::SummaryModel& model, const std::string& job) {
    std::vector<common::StepSummary> step;
    while (model.Next(&step)) {
      common::DecodedWatch batch;
      for (common::StepSummary& s : step) batch.steps.emplace_back(job, std::move(s));
      step.clear();
      service->Ingest("agent-0", batch);
      time.AdvanceTo(model.now());
      service->Evaluate();
    }
  }
};

TEST(WatchApiTest, AStragglerShowsUpAsAFiringAlertWithItsEvidence) {
  Fixture f;
  sim::WorkloadOptions o;
  o.ranks = 8;
  o.steps = 60;
  o.slowdowns.push_back({6, 1.05, sim::SlowdownKind::kCompute});
  sim::SummaryModel model(o);
  f.service->SetHost("llama", 6, "node-0");
  f.Watch(model, "llama");
  const http::HttpResponse r = f.Call("GET", "/v1/alerts");
  ASSERT_EQ(r.status, 200);
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(r.body);
  simdjson::dom::array alerts = doc["alerts"].get_array();
  ASSERT_EQ(alerts.size(), 1u) << r.body;
  simdjson::dom::element a = alerts.at(0);
  EXPECT_EQ(std::string_view(a["kind"]), "straggler");
  EXPECT_EQ(std::string_view(a["state"]), "firing");
  EXPECT_EQ(std::string_view(a["job"]), "llama");
  EXPECT_EQ(int64_t(a["ranks"].at(0)), 6);
  EXPECT_EQ(std::string_view(a["hosts"].at(0)), "node-0");
  EXPECT_GT(double(a["evidence"]["caused_delay_ms"]), 0);
  EXPECT_GT(double(a["evidence"]["share_of_step_time"]), 0.005);
  EXPECT_TRUE(a["capture_id"].is_null());
  EXPECT_GT(int64_t(a["first_seen_ns"]), 0);
  EXPECT_EQ(f.service->counters().steps, 60u * 8);

  EXPECT_THAT(f.Call("GET", "/v1/alerts", "", {{"state", "resolved"}}).body,
              HasSubstr("\"alerts\":[]"));
  EXPECT_THAT(f.Call("GET", "/v1/alerts", "", {{"job", "other"}}).body, HasSubstr("\"alerts\":[]"));
  EXPECT_EQ(f.Call("GET", "/v1/alerts", "", {{"state", "burning"}}).status, 400);
}

// An alert that fires starts an evidence capture of its job and links it; one per job per
// evidence interval, however many rules fire (those firing meanwhile share it); a refused capture
// leaves the alert unlinked.
TEST(WatchApiTest, EvidenceCapturesAreStartedOncePerJobPerIntervalAndLinked) {
  Fixture f;
  std::vector<std::pair<std::string, common::TimeNs>> started;
  bool refuse = false;
  f.service->SetEvidenceStarter(
      [&](const std::string& job, common::TimeNs duration) -> absl::StatusOr<std::string> {
        if (refuse) return absl::FailedPreconditionError("no agent serves it");
        started.emplace_back(job, duration);
        return "cap-" + std::to_string(started.size());
      });
  // Two rules that fire on the same step.
  ASSERT_TRUE(f.service
                  ->SetRules(R"({"rules":[{"name":"straggler","kind":"straggler"},
                                                {"name":"straggler-too","kind":"straggler"}]})")
                  .ok());
  sim::WorkloadOptions o;
  o.ranks = 8;
  o.steps = 80;
  o.slowdowns.push_back({3, 1.5, sim::SlowdownKind::kCompute});
  sim::SummaryModel llama(o);
  f.Watch(llama, "llama");
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].first, "llama");
  EXPECT_EQ(started[0].second, 2'000'000'000) << "evidence.duration_ms's default";
  const std::vector<watch::Alert> alerts = f.service->Alerts();
  ASSERT_EQ(alerts.size(), 2u) << "both rules fired";
  size_t linked = 0;
  for (const watch::Alert& a : alerts) linked += a.capture_id == "cap-1";
  EXPECT_EQ(linked, 2u) << "alerts of the job that fire while its capture records share it";
  EXPECT_EQ(f.service->counters().evidence_captures, 1u);
  EXPECT_EQ(f.service->counters().evidence_rate_limited, alerts.size() - 1);
  EXPECT_THAT(f.Call("GET", "/v1/alerts").body, HasSubstr("\"capture_id\":\"cap-1\""));

  // Another job has its own allowance; a refused capture is counted and links nothing.
  refuse = true;
  o.epoch_ns += 1'000'000'000'000;
  sim::SummaryModel bert(o);
  f.Watch(bert, "bert");
  EXPECT_EQ(f.service->counters().evidence_failed, 1u);
  for (const watch::Alert& a : f.service->Alerts()) {
    if (a.job == "bert") {
      EXPECT_FALSE(a.capture_id.has_value());
    }
  }

  // Past the interval (600 s), the same job's next alert captures again.
  refuse = false;
  ASSERT_TRUE(f.service->SetRules(R"({"rules":[{"name":"straggler2","kind":"straggler"}]})").ok());
  o.epoch_ns += 1'000'000'000'000;
  sim::SummaryModel later(o);
  f.Watch(later, "llama");
  ASSERT_EQ(started.size(), 2u);
  EXPECT_EQ(started[1].first, "llama");
}

// /metrics stays bounded however many ranks a job has: per-rank series only for the top 8 by
// caused delay, the straggler first among them.
TEST(WatchApiTest, MetricsOfA1024RankJobAreBoundedAndNameTheStraggler) {
  Fixture f;
  sim::WorkloadOptions o;
  o.ranks = 1024;
  o.steps = 30;
  o.slowdowns.push_back({700, 1.2, sim::SlowdownKind::kCompute});
  sim::SummaryModel model(o);
  f.Watch(model, "big");
  std::string out;
  AppendWatchMetrics(*f.service, &out);
  size_t job_series = 0, rank_series = 0;
  for (size_t at = 0, end; at < out.size(); at = end + 1) {
    end = out.find('\n', at);
    const std::string line = out.substr(at, end - at);
    if (line.find("training_job=\"big\"") == std::string::npos) continue;
    ++job_series;
    if (line.find(",rank=\"") != std::string::npos) ++rank_series;
  }
  EXPECT_LE(rank_series, 2 * kMetricsTopRanks) << out;
  EXPECT_LE(job_series, 2 * kMetricsTopRanks + 10) << out;
  EXPECT_THAT(out, HasSubstr("podscope_watch_job_ranks{training_job=\"big\"} 1024"));
  EXPECT_THAT(out, HasSubstr("podscope_watch_job_step_seconds{training_job=\"big\",stat=\"p99\"}"));
  // The first rank series listed is the straggler's.
  const size_t first = out.find("podscope_watch_rank_caused_delay_seconds{");
  ASSERT_NE(first, std::string::npos) << out;
  EXPECT_EQ(
      out.substr(first, out.find('\n', first) - first).find("rank=\"700\"") != std::string::npos,
      true)
      << out;
  EXPECT_THAT(
      out,
      HasSubstr(
          "podscope_alerts_firing{training_job=\"big\",rule=\"straggler\",kind=\"straggler\"} 1"));
}

TEST(WatchApiTest, RulesAreCheckedStoredAndSurviveARestart) {
  Fixture f;
  const http::HttpResponse bad =
      f.Call("PUT", "/v1/alerts/rules",
             R"({"rules":[{"name":"s","kind":"straggler","min_share_of_step_tme":0.1}]})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.content_type, "application/problem+json");
  EXPECT_THAT(bad.body, HasSubstr("did you mean \\\"min_share_of_step_time\\\""));
  EXPECT_THAT(f.Call("GET", "/v1/alerts/rules").body, HasSubstr("\"name\":\"hang\""))
      << "the defaults, unchanged";

  const http::HttpResponse good =
      f.Call("PUT", "/v1/alerts/rules",
             R"({"window_steps": 12, "rules":[{"name":"stuck","kind":"hang","hang_after_s":5}]})");
  ASSERT_EQ(good.status, 200) << good.body;
  EXPECT_THAT(good.body, HasSubstr("\"window_steps\":12"));
  f.Open();  // a restart of the coordinator on the same store
  const http::HttpResponse after = f.Call("GET", "/v1/alerts/rules");
  EXPECT_THAT(after.body, HasSubstr("\"name\":\"stuck\""));
  EXPECT_THAT(after.body, HasSubstr("\"hang_after_s\":5"));
  EXPECT_THAT(after.body, ::testing::Not(HasSubstr("\"name\":\"straggler\"")));
}

TEST(WatchApiTest, RoutesCarryTheirRoles) {
  Fixture f;
  std::map<std::string, http::Access> roles;
  for (const http::Route& r : f.router.routes()) roles[r.method + " " + r.pattern] = r.access;
  EXPECT_EQ(roles.at("GET /v1/alerts"), http::Access::kRead);
  EXPECT_EQ(roles.at("GET /v1/alerts/rules"), http::Access::kRead);
  EXPECT_EQ(roles.at("PUT /v1/alerts/rules"), http::Access::kAdmin);
}

}  // namespace
}  // namespace podscope::coordinator
