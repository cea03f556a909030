#include "cli/live_commands.h"

#include <simdjson.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cmath>
#include <map>
#include <thread>

#include "cli/cli_util.h"
#include "cli/online_commands.h"
#include "cli/report_fetch.h"
#include "cli/terminal_progress.h"
#include "common/parse_number.h"
#include "common/ranges.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "http/http_client.h"

namespace podscope::cli {
namespace {

using cli::Fail;
using cli::Int;
using cli::Str;
using cli::Usage;

// "0-3,8,10-11" from sorted ranks.
std::string RankRanges(std::vector<int64_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    common::StrAppend(&out, out.empty() ? "" : ",", ranks[i]);
    if (j > i) common::StrAppend(&out, "-", ranks[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace

LiveCommands AddLiveCommands(CLI::App& app, LiveOptions& o) {
  LiveCommands c;
  c.workers = app.add_subcommand("workers", "The coordinator's agents and the workers they serve");
  c.workers->add_option("--job", o.workers_job, "Only this job's workers");
  c.workers->add_option("--format", o.format, "Output format")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  c.capture = app.add_subcommand(
      "capture", "Capture a time window on every worker of a job (live, through the agents)");
  c.capture->add_option("--job", o.job, "Job to capture")->required();
  c.capture->add_option("--duration", o.duration, "Window length: 1500ms, 2s, 1m")
      ->capture_default_str();
  c.capture->add_option("--delay", o.delay, "Extra wait before the window starts")
      ->capture_default_str();
  c.capture->add_option("--ranks", o.ranks, "Only these ranks: 0-7,12 (default: all)");
  c.capture->add_option("--max-events-per-worker", o.max_events_per_worker,
                        "Lower the per-worker event limit");
  c.capture->add_flag("--wait", o.wait, "Follow the capture to its end, then print its summary");
  c.capture->add_option(
      "--trace", o.trace_path,
      "With --wait: write the merged Chrome/Perfetto trace here (.json or .json.gz)");
  c.capture->add_option("--timeout", o.timeout, "With --wait: give up waiting after this long")
      ->capture_default_str();
  return c;
}

int RunWorkersCommand(const OnlineOptions& online, const LiveOptions& o) {
  absl::StatusOr<http::ServerAddress> server = ResolveServer(online);
  if (!server.ok()) return Fail("workers", std::string(server.status().message()));
  // The list comes a page at a time; follow the pages (each is a whole number of agents).
  std::string base = "/v1/workers?limit=10000";
  if (!o.workers_job.empty()) base += "&job=" + http::UrlEncode(o.workers_job);
  std::vector<std::string> pages;
  std::string next;
  for (int page = 0; page < 10000; ++page) {
    absl::StatusOr<http::HttpClientResponse> r = http::HttpRequestTo(
        *server, "GET", next.empty() ? base : base + "&after=" + http::UrlEncode(next));
    if (!r.ok()) return Fail("workers", std::string(r.status().message()));
    if (r->status != 200) return Fail("workers", http::ProblemDetail(*r));
    if (o.format == "json") std::fwrite(r->body.data(), 1, r->body.size(), stdout);
    pages.push_back(std::move(r->body));
    simdjson::dom::parser probe;
    simdjson::dom::element doc;
    std::string_view cursor;
    if (probe.parse(pages.back()).get(doc) != simdjson::SUCCESS)
      return Fail("workers", "unreadable answer");
    if (doc["next"].get_string().get(cursor) != simdjson::SUCCESS) break;
    next = std::string(cursor);
  }
  if (o.format == "json") return 0;
  std::printf("%-24s %-16s %-12s %7s %12s %10s  %s\n", "agent", "host", "health", "workers",
              "corr(ms)", "bound(us)", "job: ranks");
  int64_t connected = 0, disconnected = 0, connected_workers = 0;
  for (const std::string& body : pages) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(body).get(doc) != simdjson::SUCCESS)
      return Fail("workers", "unreadable answer");
    connected = Int(doc["connected_agents"]);
    disconnected = Int(doc["disconnected_agents"]);
    connected_workers = Int(doc["connected_workers"]);
    // Ranks per (agent, job).
    std::map<std::string, std::map<std::string, std::vector<int64_t>>> ranks;
    for (simdjson::dom::element w : doc["workers"].get_array())
      ranks[Str(w["agent_id"])][Str(w["job"])].push_back(Int(w["rank"]));
    for (simdjson::dom::element a : doc["agents"].get_array()) {
      const std::string id = Str(a["agent_id"]);
      std::string jobs;
      for (auto& [job, list] : ranks[id])
        common::StrAppend(&jobs, jobs.empty() ? "" : "  ", job, ": ", RankRanges(list));
      simdjson::dom::element clock = a["clock"];
      const std::string offset =
          clock.is_null() ? "-" : fmt::format("{:+.3f}", Int(clock["offset_ns"]) / 1e6);
      const std::string bound =
          clock.is_null() ? "-" : fmt::format("{:.1f}", Int(clock["error_bound_ns"]) / 1e3);
      std::printf("%-24s %-16s %-12s %7lld %12s %10s  %s\n", id.c_str(), Str(a["host"]).c_str(),
                  Str(a["health"]).c_str(), static_cast<long long>(Int(a["workers"])),
                  offset.c_str(), bound.c_str(), jobs.c_str());
    }
  }
  const std::string of_job =
      o.workers_job.empty() ? "" : common::StrCat(" serving job ", o.workers_job);
  if (connected + disconnected == 0) {
    std::printf("no agent%s\n", of_job.c_str());
    return 0;
  }
  std::printf("%lld connected agents%s, %lld workers", static_cast<long long>(connected),
              of_job.c_str(), static_cast<long long>(connected_workers));
  if (disconnected > 0) {
    std::printf("; %lld disconnected (listed until forgotten: agents.forget_disconnected_after_ms)",
                static_cast<long long>(disconnected));
  }
  std::printf("\n");
  return 0;
}

namespace {

// POST /v1/captures's body; an error names what the user gave wrong.
absl::StatusOr<std::string> CaptureRequestBody(const LiveOptions& o, int64_t duration_ms,
                                               int64_t delay_ms) {
  if (o.job.find_first_of("\"\\") != std::string::npos)
    return absl::InvalidArgumentError("job names may not hold quotes or backslashes");
  std::string body = common::StrCat("{\"job\":\"", o.job, "\",\"duration_ms\":", duration_ms,
                                    ",\"delay_ms\":", delay_ms);
  if (!o.ranks.empty()) {
    ASSIGN_OR_RETURN(std::vector<int32_t> ranks, common::ParseRankList(o.ranks));
    body += ",\"ranks\":[";
    for (size_t i = 0; i < ranks.size(); ++i) common::StrAppend(&body, i ? "," : "", (ranks)[i]);
    body += "]";
  }
  if (o.max_events_per_worker > 0)
    common::StrAppend(&body, ",\"limits\":{\"max_events_per_worker\":", o.max_events_per_worker,
                      "}");
  body += "}";
  return body;
}

bool Ended(const std::string& state) {
  return state == "complete" || state == "partial" || state == "failed" || state == "cancelled";
}

// Follows capture `id` until it ends, as one status line (redrawn on a terminal, printed on
// change otherwise), then prints its error and window; its final state, or why it could not
// follow it.
absl::StatusOr<std::string> FollowCapture(const http::ServerAddress& server, const std::string& id,
                                          int64_t timeout_ms, const std::string& timeout_text) {
  const bool tty = isatty(STDERR_FILENO);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string last_line, state;
  simdjson::dom::parser parser;
  while (true) {
    ASSIGN_OR_RETURN(http::HttpClientResponse s,
                     http::HttpRequestTo(server, "GET", "/v1/captures/" + http::UrlEncode(id)));
    if (s.status != 200) return absl::UnavailableError(http::ProblemDetail(s));
    simdjson::dom::element c;
    if (parser.parse(s.body).get(c) != simdjson::SUCCESS)
      return absl::DataLossError("unreadable answer");
    state = Str(c["state"]);
    std::map<std::string, int> by_state;
    for (simdjson::dom::element w : c["workers"].get_array()) ++by_state[Str(w["state"])];
    std::string line = common::StrCat("capture ", id, ": ", state, " |");
    for (auto& [name, n] : by_state) common::StrAppend(&line, " ", name, " ", n);
    common::StrAppend(&line, " | ", Int(c["events"]), " events");
    if (line != last_line) {
      if (tty) {
        std::fprintf(stderr, "\r\033[K%s", line.c_str());
      } else {
        std::fprintf(stderr, "%s\n", line.c_str());
      }
      last_line = line;
    }
    if (Ended(state)) {
      if (tty) std::fprintf(stderr, "\n");
      const std::string error = Str(c["error"]);
      if (!error.empty()) std::printf("%s\n", error.c_str());
      simdjson::dom::element window = c["window"];
      std::printf(
          "window start skew: max %.3f ms; clock error bound: max %.3f ms\n",
          window["max_start_skew_ns"].is_null() ? 0.0 : Int(window["max_start_skew_ns"]) / 1e6,
          Int(window["max_clock_error_bound_ns"]) / 1e6);
      return state;
    }
    if (std::chrono::steady_clock::now() > give_up) {
      return absl::DeadlineExceededError(
          common::StrCat("gave up waiting after ", timeout_text, "; the capture is still ", state));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// What a capture that holds data shows at once: its summary, the merged trace when asked, and
// where to look next. The capture is stored whatever happens to its summary, which may take as
// long as a report does (ten minutes at most): a summary that cannot be had is said, and only a
// trace asked for and not written is an error.
absl::Status PrintOutcome(const http::ServerAddress& server, const std::string& id,
                          const OnlineOptions& online, const LiveOptions& o) {
  absl::StatusOr<http::HttpClientResponse> rep = FetchReport(
      server, common::StrCat("/v1/captures/", http::UrlEncode(id), "/summary?format=table"),
      std::chrono::steady_clock::now() + std::chrono::minutes(10));
  if (rep.ok() && rep->status == 200) {
    std::printf("\n");
    std::fwrite(rep->body.data(), 1, rep->body.size(), stdout);
  } else {
    std::fprintf(
        stderr, "podscope capture: capture %s is stored, but its summary: %s\n", id.c_str(),
        rep.ok() ? http::ProblemDetail(*rep).c_str() : std::string(rep.status().message()).c_str());
  }
  if (!o.trace_path.empty()) {
    ASSIGN_OR_RETURN(uint64_t bytes, DownloadTrace(server, id, o.trace_path));
    std::printf("\nmerged trace (aligned clocks, one process per rank): %s (%s)\n",
                o.trace_path.c_str(), HumanBytes(bytes).c_str());
  }
  std::printf("\nmore: podscope --server %s report %s --report stragglers --report pod (or all)\n",
              online.server.c_str(), id.c_str());
  return absl::OkStatus();
}

}  // namespace

int RunCaptureCommand(const OnlineOptions& online, const LiveOptions& o) {
  absl::StatusOr<http::ServerAddress> server = ResolveServer(online);
  if (!server.ok()) return Fail("capture", std::string(server.status().message()));
  absl::StatusOr<int64_t> duration = common::ParseDurationMs(o.duration);
  absl::StatusOr<int64_t> delay = common::ParseDurationMs(o.delay);
  absl::StatusOr<int64_t> timeout = common::ParseDurationMs(o.timeout);
  for (const auto* s : {&duration, &delay, &timeout}) {
    if (!s->ok()) return Usage("capture", std::string(s->status().message()));
  }
  if (*duration == 0) return Usage("capture", "--duration must be positive");
  if (!o.trace_path.empty() && !o.wait) {
    return Usage("capture",
                 "--trace needs --wait (the trace is written once the capture has ended; without "
                 "--wait, fetch it later with podscope trace)");
  }
  absl::StatusOr<std::string> body = CaptureRequestBody(o, *duration, *delay);
  if (!body.ok()) return Fail("capture", std::string(body.status().message()));
  absl::StatusOr<http::HttpClientResponse> r =
      http::HttpRequestTo(*server, "POST", "/v1/captures", *body, "application/json");
  if (!r.ok()) return Fail("capture", std::string(r.status().message()));
  if (r->status != 202) return Fail("capture", http::ProblemDetail(*r));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(r->body).get(doc) != simdjson::SUCCESS)
    return Fail("capture", "unreadable answer");
  const std::string id = Str(doc["id"]);
  const size_t workers = doc["workers"].get_array().size();
  std::printf("capture %s: job %s, %zu workers, %lld ms window\n", id.c_str(), o.job.c_str(),
              workers, static_cast<long long>(*duration));
  if (!o.wait) {
    std::printf("follow it: podscope --server %s captures --job %s\n", online.server.c_str(),
                o.job.c_str());
    return 0;
  }
  absl::StatusOr<std::string> state = FollowCapture(*server, id, *timeout, o.timeout);
  if (!state.ok()) return Fail("capture", std::string(state.status().message()));
  if (*state == "complete" || *state == "partial") {
    if (absl::Status s = PrintOutcome(*server, id, online, o); !s.ok())
      return Fail("capture", std::string(s.message()));
  }
  return *state == "complete" ? 0 : *state == "partial" ? 3 : 1;
}

}  // namespace podscope::cli
