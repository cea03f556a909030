// podscope's alerts through the real alerting stack: a Prometheus server scrapes the
// coordinator over HTTPS with a read token and evaluates the shipped rules; podscope posts its
// alerts to a real Alertmanager, read back through Alertmanager's own API; webhooks that fail or
// never answer are retried without holding anything else up. The binaries are Debian's
// (scripts/test.sh installs them); a machine without them fails these tests, loudly.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <simdjson.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/parse_number.h"
#include "http/http_client.h"
#include "tests/integration/live_cluster_fixture.h"
#include "tests/integration/webhook_receiver.h"
#include "tests/test_paths.h"
#include "tests/wait_for.h"

namespace podscope::testing {
namespace {

constexpr const char* kPrometheus = "/usr/bin/prometheus";
constexpr const char* kAlertmanager = "/usr/bin/prometheus-alertmanager";
constexpr const char* kPromtool = "/usr/bin/promtool";

// Runs `command`, its output into `*output`; its exit status.
int RunCommand(const std::string& command, std::string* output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  while (const size_t n = fread(buffer, 1, sizeof(buffer), pipe)) output->append(buffer, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string DashboardFile() { return SourceDir() + "/deploy/grafana/podscope-dashboard.json"; }

std::string RulesFile() { return SourceDir() + "/deploy/prometheus/podscope-rules.yml"; }

class AlertingTest : public LiveClusterTest {
 protected:
  void SetUp() override {
    for (const char* binary : {kPrometheus, kAlertmanager, kPromtool}) {
      ASSERT_TRUE(std::filesystem::exists(binary))
          << binary
          << " is missing: install Debian's prometheus and prometheus-alertmanager "
             "(scripts/test.sh does)";
    }
  }

  // The coordinator's config: the LiveClusterTest one, with notifications to `alertmanager` and
  // the webhooks.
  void ConfigureNotify(int alertmanager_port, const std::vector<std::string>& webhooks,
                       const std::string& slack) {
    std::string hooks;
    for (const std::string& url : webhooks) hooks += (hooks.empty() ? "\"" : ",\"") + url + "\"";
    config_ = dir_.Write("coordinator.json",
                         R"({"capture": {"capture_grace_ms": 4000, "upload_timeout_ms": 20000},
        "agents": {"heartbeat_interval_ms": 300},
        "notify": {"alertmanagers": ["http://127.0.0.1:)" +
                             std::to_string(alertmanager_port) + R"("],
                   "webhooks": [)" +
                             hooks + R"(], "slack_webhooks": [")" + slack + R"("],
                   "timeout_ms": 5000, "max_attempts": 3,
                   "external_url": "https://127.0.0.1"}})");
  }

  std::unique_ptr<Daemon> StartAlertmanager(int port) {
    const std::string config =
        dir_.Write("alertmanager.yml", "route:\n  receiver: keep\nreceivers:\n  - name: keep\n");
    auto am = std::make_unique<Daemon>(
        kAlertmanager,
        std::vector<std::string>{
            "--config.file=" + config, "--storage.path=" + dir_.File("alertmanager"),
            "--web.listen-address=127.0.0.1:" + std::to_string(port), "--cluster.listen-address="},
        dir_.File("alertmanager.log"));
    EXPECT_NE(am->WaitForLog("(Listening)"), "") << am->Log();
    return am;
  }

  std::unique_ptr<Daemon> StartPrometheus(int port) {
    // Scrapes as deployed: HTTPS with the test CA, a read-only token.
    const std::string token = dir_.Write("prometheus-token", TestSecurity::Get().read_token);
    const std::string config = dir_.Write(
        "prometheus.yml",
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - " +
            RulesFile() +
            "\nscrape_configs:\n  - job_name: podscope\n    scheme: https\n    tls_config:\n      "
            "ca_file: " +
            TestSecurity::Get().ca() + "\n    authorization:\n      credentials_file: " + token +
            "\n    static_configs:\n      - targets: ['127.0.0.1:" + std::to_string(http_port_) +
            "']\n");
    auto prometheus = std::make_unique<Daemon>(
        kPrometheus,
        std::vector<std::string>{"--config.file=" + config,
                                 "--storage.tsdb.path=" + dir_.File("prometheus"),
                                 "--web.listen-address=127.0.0.1:" + std::to_string(port)},
        dir_.File("prometheus.log"));
    EXPECT_NE(prometheus->WaitForLog("(Server is ready to receive web requests)"), "")
        << prometheus->Log();
    return prometheus;
  }
};

// The shipped rules are valid Prometheus rules.
TEST_F(AlertingTest, TheShippedRulesPassPromtool) {
  std::string output;
  EXPECT_EQ(RunCommand(std::string(kPromtool) + " check rules " + RulesFile(), &output), 0)
      << output;
  EXPECT_NE(output.find("SUCCESS"), std::string::npos) << output;
}

TEST_F(AlertingTest,
       AStragglerReachesPrometheusAlertmanagerAndWebhooksAndFailingWebhooksAreRetried) {
  WebhookReceiver ok(WebhookReceiver::Mode::kOk);
  WebhookReceiver failing(WebhookReceiver::Mode::kFail);
  WebhookReceiver silent(WebhookReceiver::Mode::kNeverAnswer);
  WebhookReceiver slack(WebhookReceiver::Mode::kOk);
  const int alertmanager_port = FreePort();
  ConfigureNotify(alertmanager_port, {silent.url(), failing.url(), ok.url()}, slack.url());
  std::unique_ptr<Daemon> alertmanager = StartAlertmanager(alertmanager_port);
  StartCoordinator();
  const int prometheus_port = FreePort();
  std::unique_ptr<Daemon> prometheus = StartPrometheus(prometheus_port);
  // A strong straggler from the start: the alert fires as soon as the first windows fill.
  StartAgent("n0", "ranks=0-3,world=8,job=alerting,seed=3,straggler=5:1.3,profile=light");
  StartAgent("n1", "ranks=4-7,world=8,job=alerting,seed=3,straggler=5:1.3,profile=light");

  // The webhook that answers gets the firing alert, although the silent one, listed first,
  // holds its own delivery for the whole timeout: destinations do not wait on each other.
  ASSERT_TRUE(ok.WaitForRequests(1, absl::Seconds(60)))
      << HttpCall(http_port_, "GET", "/v1/alerts").body;
  // podscope_notifications_total of a destination and outcome.
  auto counter = [&](const std::string& url, const std::string& outcome) {
    const std::string body = HttpCall(http_port_, "GET", "/metrics").body;
    const std::string key =
        "podscope_notifications_total{destination=\"" + url + "\",outcome=\"" + outcome + "\"} ";
    const size_t at = body.find(key);
    if (at == std::string::npos) return int64_t{-1};
    const absl::StatusOr<int64_t> n =
        common::ParseInt(body.substr(at + key.size(), body.find('\n', at) - at - key.size()));
    return n.ok() ? *n : int64_t{-1};
  };
  // Delivered while the silent one's first attempt still waits out its 5 s timeout: had the
  // destinations shared a thread, the answering one would have waited for all three of its tries.
  EXPECT_EQ(counter(silent.url(), "retried"), 0);
  EXPECT_EQ(counter(silent.url(), "failed"), 0);
  // Other rules may fire first (a straggler this strong exposes everyone's communication).
  size_t straggler_at = 0;
  testing::WaitFor(
      [&] {
        const std::vector<std::string> got = ok.bodies();
        for (size_t k = 0; k < got.size(); ++k) {
          if (got[k].find(R"("kind":"straggler")") != std::string::npos) {
            straggler_at = k;
            return true;
          }
        }
        return false;
      },
      std::chrono::seconds(60));
  const std::string fired = ok.bodies()[straggler_at];
  EXPECT_NE(fired.find(R"("event":"fired")"), std::string::npos) << fired;
  EXPECT_NE(fired.find(R"("kind":"straggler")"), std::string::npos) << fired;
  EXPECT_NE(fired.find(R"("ranks":[5])"), std::string::npos) << fired;
  ASSERT_TRUE(silent.WaitForRequests(1, absl::Seconds(10)));
  // A Slack-compatible webhook gets one line a person reads.
  ASSERT_TRUE(slack.WaitForRequests(1, absl::Seconds(10)));
  const std::string line = slack.bodies().front();
  EXPECT_EQ(line.rfind(R"({"text":":rotating_light: *firing* podscope )", 0), 0u) << line;
  EXPECT_NE(line.find("in job `alerting`"), std::string::npos) << line;
  // The failing webhook is tried max_attempts times, with backoff; then counted as failed.
  ASSERT_TRUE(failing.WaitForRequests(3, absl::Seconds(30)));

  // Alertmanager holds podscope's alert, as its own API lists it.
  std::string alertmanager_alerts;
  testing::WaitFor([&] {
    alertmanager_alerts = HttpCall(alertmanager_port, "GET", "/api/v2/alerts").body;
    return alertmanager_alerts.find("PodscopeStraggler") != std::string::npos;
  });
  EXPECT_NE(alertmanager_alerts.find(R"("alertname":"PodscopeStraggler")"), std::string::npos)
      << alertmanager_alerts;
  EXPECT_NE(alertmanager_alerts.find(R"("training_job":"alerting")"), std::string::npos)
      << alertmanager_alerts;
  EXPECT_NE(alertmanager_alerts.find(R"("ranks":"5")"), std::string::npos) << alertmanager_alerts;
  EXPECT_NE(alertmanager_alerts.find(R"("hosts":"host-n1")"), std::string::npos)
      << alertmanager_alerts;

  // Prometheus scraped podscope_alerts_firing and its rule fires.
  std::string prometheus_alerts;
  testing::WaitFor([&] {
    prometheus_alerts = HttpCall(prometheus_port, "GET", "/api/v1/alerts").body;
    return prometheus_alerts.find(R"("state":"firing")") != std::string::npos;
  });
  EXPECT_NE(prometheus_alerts.find(R"("alertname":"PodscopeStraggler")"), std::string::npos)
      << prometheus_alerts;
  EXPECT_NE(prometheus_alerts.find(R"("state":"firing")"), std::string::npos) << prometheus_alerts;
  EXPECT_NE(prometheus_alerts.find(R"("training_job":"alerting")"), std::string::npos)
      << prometheus_alerts;

  // /metrics passes promtool's lint, and counts the deliveries.
  const HttpResult metrics = HttpCall(http_port_, "GET", "/metrics");
  ASSERT_EQ(metrics.status, 200);
  const std::string file = dir_.Write("metrics.txt", metrics.body);
  std::string lint;
  EXPECT_EQ(RunCommand(std::string(kPromtool) + " check metrics < " + file, &lint), 0) << lint;
  // Every transition the answering webhook got was counted as delivered; every one the failing
  // webhook got was tried max_attempts (3) times, then counted as failed.
  const int64_t transitions = static_cast<int64_t>(ok.bodies().size());
  EXPECT_EQ(counter(ok.url(), "delivered"), transitions);
  testing::WaitFor([&] { return counter(failing.url(), "failed") >= transitions; });
  EXPECT_EQ(counter(failing.url(), "failed"), transitions);
  EXPECT_EQ(counter(failing.url(), "retried"), 2 * transitions);
  EXPECT_EQ(counter(failing.url(), "delivered"), 0);
  EXPECT_GE(failing.bodies().size(), static_cast<size_t>(3 * transitions));
  // Retries send the very delivery again: every body the failing webhook got is one of them.
  const std::vector<std::string> delivered = ok.bodies();
  for (const std::string& body : failing.bodies()) {
    EXPECT_NE(std::find(delivered.begin(), delivered.end(), body), delivered.end()) << body;
  }
}

// The Grafana dashboard (deploy/grafana) over what a coordinator really exports: every series its
// queries name is a family of /metrics, and every query is PromQL a real Prometheus, scraping a
// watched job with a straggler, answers.
TEST_F(AlertingTest, EveryDashboardQueryNamesAnExportedSeriesAndRunsInPrometheus) {
  simdjson::dom::parser parser;
  simdjson::dom::element dashboard;
  ASSERT_EQ(parser.load(DashboardFile()).get(dashboard), simdjson::SUCCESS) << DashboardFile();
  std::vector<std::string> queries;
  for (simdjson::dom::element panel : dashboard["panels"].get_array()) {
    simdjson::dom::array targets;
    if (panel["targets"].get(targets) != simdjson::SUCCESS) continue;  // a row
    for (simdjson::dom::element target : targets)
      queries.emplace_back(std::string_view(target["expr"]));
  }
  for (simdjson::dom::element variable : dashboard["templating"]["list"].get_array()) {
    std::string_view definition;
    if (variable["definition"].get(definition) == simdjson::SUCCESS)
      queries.emplace_back(definition);
  }
  ASSERT_GE(queries.size(), 15u);

  StartCoordinator();
  const int prometheus_port = FreePort();
  std::unique_ptr<Daemon> prometheus = StartPrometheus(prometheus_port);
  StartAgent("n0", "ranks=0-3,world=8,job=dashboard,seed=3,straggler=5:1.3,profile=light");
  StartAgent("n1", "ranks=4-7,world=8,job=dashboard,seed=3,straggler=5:1.3,profile=light");
  // The job's per-rank series are scraped once its first window settles.
  std::string ranks;
  testing::WaitFor(
      [&] {
        ranks = HttpCall(prometheus_port, "GET",
                         "/api/v1/query?query=podscope_watch_rank_caused_delay_seconds")
                    .body;
        return ranks.find("\"training_job\":\"dashboard\"") != std::string::npos;
      },
      std::chrono::seconds(60));
  ASSERT_NE(ranks.find("\"training_job\":\"dashboard\""), std::string::npos) << ranks;

  const std::string metrics = HttpCall(http_port_, "GET", "/metrics").body;
  size_t with_data = 0;
  for (std::string query : queries) {
    // Grafana's variables, as Grafana would fill them.
    for (const auto& [variable, value] :
         {std::pair<std::string, std::string>{"$__rate_interval", "1m"}, {"$job", ".*"}}) {
      for (size_t at; (at = query.find(variable)) != std::string::npos;)
        query.replace(at, variable.size(), value);
    }
    // Every podscope_* name in the query is a family the coordinator exports.
    for (size_t at = 0; (at = query.find("podscope_", at)) != std::string::npos;) {
      size_t end = at;
      while (end < query.size() &&
             (std::isalnum(static_cast<unsigned char>(query[end])) || query[end] == '_'))
        ++end;
      const std::string name = query.substr(at, end - at);
      EXPECT_NE(metrics.find("# TYPE " + name + " "), std::string::npos)
          << name << " (in " << query << ") is not exported";
      at = end;
    }
    if (query.rfind("label_values(", 0) == 0) continue;  // Grafana's, not PromQL
    // Not HttpCall: it half-closes after the request, and Prometheus cancels a query whose
    // client it sees leave.
    absl::StatusOr<http::HttpClientResponse> answer =
        http::HttpRequestTo({.host = "127.0.0.1", .port = static_cast<uint16_t>(prometheus_port)},
                            "GET", "/api/v1/query?query=" + http::UrlEncode(query));
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->status, 200) << query << ": " << answer->body;
    EXPECT_NE(answer->body.find("\"status\":\"success\""), std::string::npos)
        << query << ": " << answer->body;
    if (answer->body.find("\"result\":[]") == std::string::npos) ++with_data;
  }
  // Most panels show data for a watched job within a minute (rates need two scrapes; some series,
  // like refusals, stay empty on a healthy cluster).
  EXPECT_GE(with_data, queries.size() / 2)
      << with_data << " of " << queries.size() << " queries returned data";
}

}  // namespace
}  // namespace podscope::testing
