#include "cli/watch_commands.h"

#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>
#include <thread>

#include "cli/cli_util.h"
#include "common/ranges.h"
#include "common/str_util.h"
#include "fmt/format.h"
#include "http/http_client.h"

namespace podscope::cli {
namespace {

using cli::Fail;
using cli::Int;
using cli::Str;

// "4m ago", "2h ago": how long ago `ns` (Unix) was.
std::string Ago(int64_t ns) {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const int64_t s = std::max<int64_t>(0, (now - ns) / 1'000'000'000);
  if (s < 120) return fmt::format("{}s ago", s);
  if (s < 7200) return fmt::format("{}m ago", s / 60);
  if (s < 172800) return fmt::format("{}h ago", s / 3600);
  return fmt::format("{}d ago", s / 86400);
}

}  // namespace

WatchCommands AddWatchCommands(CLI::App& app, WatchOptions& o) {
  WatchCommands c;
  c.alerts = app.add_subcommand(
      "alerts", "Alerts raised by watching the jobs: stragglers, hangs, regressions");
  c.alerts->add_option("--job", o.job, "Only this job's alerts");
  c.alerts->add_option("--state", o.state, "Which alerts")
      ->check(CLI::IsMember({"firing", "resolved", "all"}))
      ->capture_default_str();
  c.alerts->add_option("--format", o.format, "Output format")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  c.rules = app.add_subcommand(
      "rules", "The alert rules: get them, or set them from a JSON file (docs/watch.md)");
  c.rules->require_subcommand(1);
  c.rules_get = c.rules->add_subcommand("get", "Print the rules in force (JSON)");
  c.rules_set = c.rules->add_subcommand(
      "set", "Replace the rules with FILE's (checked first: a bad file changes nothing)");
  c.rules_set->add_option("FILE", o.rules_file, "JSON rules file, or - for standard input")
      ->required();
  c.watch = app.add_subcommand(
      "watch", "A job's ranks live: step time, lag and caused delay (JSON lines when piped)");
  c.watch->add_option("--job", o.job, "The job")->required();
  c.watch->add_option("--interval", o.interval, "Refresh period")->capture_default_str();
  c.watch->add_option("--count", o.count, "Stop after this many refreshes (0: until interrupted)")
      ->capture_default_str();
  c.watch->add_option("--top", o.top, "Rows on a terminal, most caused delay first")
      ->capture_default_str();
  CLI::App* schedules =
      app.add_subcommand("schedules", "Periodic captures of a job (kept by the coordinator)");
  schedules->require_subcommand(1);
  c.schedules_list =
      schedules->add_subcommand("list", "The schedules, their next run and last capture");
  c.schedules_add = schedules->add_subcommand(
      "add", "Capture a job periodically (jittered; never over a running capture)");
  c.schedules_add->add_option("--job", o.job, "The job")->required();
  c.schedules_add->add_option("--every", o.every, "Period: 30s, 10m, 1h (at least 10 s)")
      ->capture_default_str();
  c.schedules_add->add_option("--duration", o.duration, "How long each capture records")
      ->capture_default_str();
  c.schedules_add->add_option("--ranks", o.ranks, "Only these ranks: 0-7,12 [all]");
  c.schedules_delete = schedules->add_subcommand("delete", "Stop a schedule");
  c.schedules_delete->add_option("ID", o.schedule_id, "Its id (schedules list)")->required();
  return c;
}

int RunAlertsCommand(const OnlineOptions& online, const WatchOptions& o) {
  absl::StatusOr<http::ServerAddress> server = ResolveServer(online);
  if (!server.ok()) return Fail("alerts", std::string(server.status().message()));
  std::string target = "/v1/alerts?";
  if (o.state != "all") target += "state=" + o.state;
  if (!o.job.empty()) target += "&job=" + http::UrlEncode(o.job);
  absl::StatusOr<http::HttpClientResponse> r = http::HttpRequestTo(*server, "GET", target);
  if (!r.ok()) return Fail("alerts", std::string(r.status().message()));
  if (r->status != 200) return Fail("alerts", http::ProblemDetail(*r));
  if (o.format == "json") {
    std::fwrite(r->body.data(), 1, r->body.size(), stdout);
    std::printf("\n");
    return 0;
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array alerts;
  if (parser.parse(r->body).get(doc) != simdjson::SUCCESS ||
      doc["alerts"].get_array().get(alerts) != simdjson::SUCCESS) {
    return Fail("alerts", "unreadable answer");
  }
  if (alerts.size() == 0) {
    std::printf("no %s alerts%s\n", o.state == "all" ? "" : o.state.c_str(),
                o.job.empty() ? "" : common::StrCat(" for job ", o.job).c_str());
    return 0;
  }
  std::printf("%-9s %-22s %-16s %-12s %-16s %-10s %s\n", "state", "kind", "job", "ranks", "hosts",
              "since", "what");
  for (simdjson::dom::element a : alerts) {
    std::string ranks, hosts;
    for (simdjson::dom::element rank : a["ranks"].get_array())
      common::StrAppend(&ranks, ranks.empty() ? "" : ",", Int(rank));
    for (simdjson::dom::element host : a["hosts"].get_array())
      common::StrAppend(&hosts, hosts.empty() ? "" : ",", Str(host));
    std::printf(
        "%-9s %-22s %-16s %-12s %-16s %-10s %s\n", Str(a["state"]).c_str(), Str(a["kind"]).c_str(),
        Str(a["job"]).c_str(), ranks.empty() ? "-" : ranks.c_str(),
        hosts.empty() ? "-" : hosts.c_str(), Ago(Int(a["first_seen_ns"])).c_str(),
        (Str(a["message"]) +
         (Str(a["capture_id"]).empty() ? "" : " [evidence capture " + Str(a["capture_id"]) + "]"))
            .c_str());
  }
  return 0;
}

int RunRulesGetCommand(const OnlineOptions& online) {
  absl::StatusOr<http::ServerAddress> server = ResolveServer(online);
  if (!server.ok()) return Fail("rules get", std::string(server.status().message()));
  absl::StatusOr<http::HttpClientResponse> r =
      http::HttpRequestTo(*server, "GET", "/v1/alerts/rules");
  if (!r.ok()) return Fail("rules get", std::string(r.status().message()));
  if (r->status != 200) return Fail("rules get", http::ProblemDetail(*r));
  std::fwrite(r->body.data(), 1, r->body.size(), stdout);
  std::printf("\n");
  return 0;
}

int RunRulesSetCommand(const OnlineOptions& online, const WatchOptions& o) {
  std::string body;
  if (o.rules_file == "-") {
    body.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream in(o.rules_file, std::ios::binary);
    if (!in) return cli::Usage("rules set", common::StrCat("cannot read ", o.rules_file));
    body.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  absl::StatusOr<http::ServerAddress> server = ResolveServer(online);
  if (!server.ok()) return Fail("rules set", std::string(server.status().message()));
  absl::StatusOr<http::HttpClientResponse> r =
      http::HttpRequestTo(*server, "PUT", "/v1/alerts/rules", body, "application/json");
  if (!r.ok()) return Fail("rules set", std::string(r.status().message()));
  if (r->status != 200) return Fail("rules set", http::ProblemDetail(*r));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  size_t rules = 0;
  if (parser.parse(r->body).get(doc) == simdjson::SUCCESS) {
    simdjson::dom::array list;
    if (doc["rules"].get_array().get(list) == simdjson::SUCCESS) rules = list.size();
  }
  std::printf("%s in force\n", common::Counted(rules, "rule").c_str());
  return 0;
}

int RunWatchCommand(const OnlineOptions& online, const WatchOptions& o) {
  absl::StatusOr<int64_t> interval = common::ParseDurationMs(o.interval);
  if (!interval.ok() || *interval < 100) return cli::Usage("watch", "--interval: at least 100ms");
  absl::StatusOr<http::ServerAddress> server = ResolveServer(online);
  if (!server.ok()) return Fail("watch", std::string(server.status().message()));
  const bool terminal = isatty(STDOUT_FILENO) != 0;
  for (int64_t n = 0; o.count == 0 || n < o.count; ++n) {
    if (n > 0) std::this_thread::sleep_for(std::chrono::milliseconds(*interval));
    absl::StatusOr<http::HttpClientResponse> r =
        http::HttpRequestTo(*server, "GET", "/v1/watch/jobs/" + http::UrlEncode(o.job));
    if (!r.ok()) return Fail("watch", std::string(r.status().message()));
    if (r->status != 200) return Fail("watch", http::ProblemDetail(*r));
    if (!terminal) {
      // One window a line, for jq and log collectors.
      std::fwrite(r->body.data(), 1, r->body.size(), stdout);
      std::printf("\n");
      std::fflush(stdout);
      continue;
    }
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(r->body).get(doc) != simdjson::SUCCESS)
      return Fail("watch", "unreadable answer");
    std::vector<simdjson::dom::element> ranks;
    for (simdjson::dom::element rank : doc["ranks"].get_array()) ranks.push_back(rank);
    std::sort(ranks.begin(), ranks.end(), [](simdjson::dom::element a, simdjson::dom::element b) {
      return cli::Number(a["caused_delay_ms"]) > cli::Number(b["caused_delay_ms"]);
    });
    std::printf("\033[H\033[2J");  // home, clear: a table that refreshes in place
    std::printf("job %s  steps %lld-%lld  step %.1f ms  %zu ranks%s\n\n", o.job.c_str(),
                static_cast<long long>(Int(doc["first_step"])),
                static_cast<long long>(Int(doc["last_step"])), cli::Number(doc["step_time_ms"]),
                ranks.size(), doc["full"].get_bool().value_unsafe() ? "" : "  (window filling)");
    std::printf("%6s %-20s %12s %10s %16s %12s\n", "rank", "host", "step (ms)", "lag (ms)",
                "caused delay(ms)", "last arriver");
    for (size_t i = 0; i < ranks.size() && static_cast<int64_t>(i) < o.top; ++i) {
      simdjson::dom::element k = ranks[i];
      std::printf("%6lld %-20s %12.2f %+10.2f %16.1f %11.0f%%\n",
                  static_cast<long long>(Int(k["rank"])), Str(k["host"]).c_str(),
                  cli::Number(k["step_time_ms"]), cli::Number(k["lag_ms"]),
                  cli::Number(k["caused_delay_ms"]), 100 * cli::Number(k["last_arriver_share"]));
    }
    std::fflush(stdout);
  }
  return 0;
}

int RunSchedulesListCommand(const OnlineOptions& online) {
  absl::StatusOr<http::ServerAddress> server = ResolveServer(online);
  if (!server.ok()) return Fail("schedules list", std::string(server.status().message()));
  absl::StatusOr<http::HttpClientResponse> r = http::HttpRequestTo(*server, "GET", "/v1/schedules");
  if (!r.ok()) return Fail("schedules list", std::string(r.status().message()));
  if (r->status != 200) return Fail("schedules list", http::ProblemDetail(*r));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array list;
  if (parser.parse(r->body).get(doc) != simdjson::SUCCESS ||
      doc["schedules"].get_array().get(list) != simdjson::SUCCESS) {
    return Fail("schedules list", "unreadable answer");
  }
  // Stored schedules a start could not read back: named, so that they are not missed.
  simdjson::dom::array set_aside;
  if (doc["set_aside"].get_array().get(set_aside) == simdjson::SUCCESS) {
    for (simdjson::dom::element a : set_aside) {
      std::fprintf(stderr, "set aside at start-up, not run: schedule %s: %s\n",
                   Str(a["id"]).empty() ? "(the whole book)" : Str(a["id"]).c_str(),
                   Str(a["error"]).c_str());
    }
  }
  if (list.size() == 0) {
    std::printf("no schedules\n");
    return 0;
  }
  std::printf("%-12s %-16s %10s %10s %6s %8s %6s  %s\n", "id", "job", "every", "duration", "runs",
              "deferred", "failed", "last capture");
  for (simdjson::dom::element s : list) {
    std::printf("%-12s %-16s %9.0fs %8.0fms %6lld %8lld %6lld  %s\n", Str(s["id"]).c_str(),
                Str(s["job"]).c_str(), cli::Number(s["every_s"]), cli::Number(s["duration_ms"]),
                static_cast<long long>(Int(s["runs"])), static_cast<long long>(Int(s["deferred"])),
                static_cast<long long>(Int(s["failed"])),
                Str(s["last_capture_id"]).empty() ? "-" : Str(s["last_capture_id"]).c_str());
  }
  return 0;
}

int RunSchedulesAddCommand(const OnlineOptions& online, const WatchOptions& o) {
  absl::StatusOr<int64_t> every = common::ParseDurationMs(o.every);
  if (!every.ok())
    return cli::Usage("schedules add", common::StrCat("--every: ", every.status().message()));
  absl::StatusOr<int64_t> duration = common::ParseDurationMs(o.duration);
  if (!duration.ok())
    return cli::Usage("schedules add", common::StrCat("--duration: ", duration.status().message()));
  if (o.job.find_first_of("\"\\") != std::string::npos)
    return cli::Usage("schedules add", "job names may not hold quotes or backslashes");
  std::string body =
      common::StrCat("{\"job\":\"", o.job, "\",\"every_s\":", static_cast<double>(*every) / 1e3,
                     ",\"duration_ms\":", *duration);
  if (!o.ranks.empty()) {
    absl::StatusOr<std::vector<int32_t>> ranks = common::ParseRankList(o.ranks);
    if (!ranks.ok()) return cli::Usage("schedules add", std::string(ranks.status().message()));
    common::StrAppend(&body, ",\"ranks\":\"", common::FormatRankList(*ranks), "\"");
  }
  body += "}";
  absl::StatusOr<http::ServerAddress> server = ResolveServer(online);
  if (!server.ok()) return Fail("schedules add", std::string(server.status().message()));
  absl::StatusOr<http::HttpClientResponse> r =
      http::HttpRequestTo(*server, "POST", "/v1/schedules", body, "application/json");
  if (!r.ok()) return Fail("schedules add", std::string(r.status().message()));
  if (r->status != 201) return Fail("schedules add", http::ProblemDetail(*r));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(r->body).get(doc) != simdjson::SUCCESS)
    return Fail("schedules add", "unreadable answer");
  std::printf("%s: job %s every %s for %s\n", Str(doc["id"]).c_str(), o.job.c_str(),
              o.every.c_str(), o.duration.c_str());
  if (simdjson::dom::element warning; doc["warning"].get(warning) == simdjson::SUCCESS)
    std::fprintf(stderr, "podscope schedules add: warning: %s\n", Str(warning).c_str());
  return 0;
}

int RunSchedulesDeleteCommand(const OnlineOptions& online, const WatchOptions& o) {
  absl::StatusOr<http::ServerAddress> server = ResolveServer(online);
  if (!server.ok()) return Fail("schedules delete", std::string(server.status().message()));
  absl::StatusOr<http::HttpClientResponse> r =
      http::HttpRequestTo(*server, "DELETE", "/v1/schedules/" + http::UrlEncode(o.schedule_id));
  if (!r.ok()) return Fail("schedules delete", std::string(r.status().message()));
  if (r->status != 204) return Fail("schedules delete", http::ProblemDetail(*r));
  std::printf("%s deleted\n", o.schedule_id.c_str());
  return 0;
}

}  // namespace podscope::cli
