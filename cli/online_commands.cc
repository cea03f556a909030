#include "cli/online_commands.h"

#include <simdjson.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "analysis/analysis_run.h"
#include "cli/cli_util.h"
#include "cli/report_fetch.h"
#include "cli/terminal_progress.h"
#include "common/file_io.h"
#include "common/str_util.h"
#include "common/trace_files.h"
#include "fmt/format.h"
#include "http/http_client.h"

namespace podscope::cli {
namespace {

using cli::Fail;

absl::StatusOr<http::ServerAddress> Server(const OnlineOptions& o) { return ResolveServer(o); }

std::string CapturePath(const OnlineOptions& o) {
  return "/v1/captures/" + http::UrlEncode(o.capture_id);
}

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// Files `podscope import` uploads at once: as many as the coordinator has threads for heavy
// work by default, each holding one file.
constexpr size_t kParallelUploads = 2;

}  // namespace

absl::StatusOr<http::ServerAddress> ResolveServer(const OnlineOptions& o) {
  if (o.server.empty()) {
    return absl::InvalidArgumentError(
        "this command needs --server URL or PODSCOPE_SERVER (a podscope-coordinator)");
  }
  absl::StatusOr<http::ServerAddress> server = http::ParseServerUrl(o.server);
  if (!server.ok()) return server;
  server->ca_file = o.ca_cert;
  // A sharded coordinator in redirect mode sends a job's calls to the replica that owns it.
  server->follow_redirects = true;
  if (!o.token_file.empty()) {
    // The first line, without its newline: what `openssl rand -hex 32 > FILE` writes.
    absl::StatusOr<std::string> text =
        common::ReadFileMaybeGzip(o.token_file, {.max_file_bytes = 64 << 10});
    if (!text.ok())
      return absl::InvalidArgumentError(common::StrCat("--token-file: ", text.status().message()));
    server->token =
        std::string(common::StripWhitespace(std::string_view(*text).substr(0, text->find('\n'))));
    if (server->token.empty())
      return absl::InvalidArgumentError(common::StrCat("--token-file ", o.token_file, " is empty"));
  } else if (const char* token = std::getenv("PODSCOPE_TOKEN"); token != nullptr) {
    server->token = std::string(common::StripWhitespace(token));
  }
  for (const char c : server->token) {
    if (c <= 0x20 || c > 0x7e)
      return absl::InvalidArgumentError("the token holds a space or a control character");
  }
  return server;
}

OnlineCommands AddOnlineCommands(CLI::App& app, OnlineOptions& o) {
  // Accepted before or after the subcommand (the subcommands fall through to it).
  app.add_option("--server", o.server,
                 "Coordinator URL for online commands, e.g. http://127.0.0.1:8080")
      ->envname("PODSCOPE_SERVER");
  app.add_option("--token-file", o.token_file,
                 "File holding the bearer token for the coordinator (else the PODSCOPE_TOKEN "
                 "environment variable)");
  app.add_option("--ca-cert", o.ca_cert,
                 "CA certificate (PEM) the coordinator's https:// certificate must chain to")
      ->envname("PODSCOPE_CA_CERT")
      ->envname("PODSCOPE_CA_CERT");
  app.fallthrough();
  OnlineCommands c;
  c.import = app.add_subcommand(
      "import", "Upload trace files (one per rank) to the coordinator as one capture");
  c.import->add_option("inputs", o.import_inputs, "Trace directories or files (*.json, *.json.gz)")
      ->required();
  c.import->add_option("--job", o.job, "Job name")->capture_default_str();
  c.import->add_option("--capture", o.capture, "Capture id (generated when absent)");

  c.captures = app.add_subcommand("captures", "List the coordinator's captures");
  c.captures->add_option("--job", o.job, "Only this job");
  c.captures->add_option("--state", o.state, "Only this state (complete, failed, ...)");
  c.captures->add_option("--format", o.format, "Output format")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();

  c.report =
      app.add_subcommand("report", "Analyses of a stored capture (the same reports as `analyze`)");
  c.report->add_option("capture", o.report_capture, "Capture id")->required();
  c.report
      ->add_option("--report", o.reports,
                   "summary|overview|steps|pod|overlap|communication|stragglers|allreduce|kernels|"
                   "gpu|operators|memory|input|temporal|all (default: "
                   "summary for tables, all for JSON)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  c.report->add_option("--format", o.format, "Output format")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  c.report->add_option("--window", o.window, "steps or hta")
      ->check(CLI::IsMember({"steps", "hta"}))
      ->capture_default_str();
  c.report->add_option("--clocks", o.clocks, "auto, aligned or unaligned")
      ->check(CLI::IsMember({"auto", "aligned", "unaligned"}))
      ->capture_default_str();
  c.report->add_option("--step-pattern", o.step_pattern, "Regex for step marker annotations");
  c.report
      ->add_option("--link-gbytes-per-s", o.link_gbytes_per_s,
                   "Link bandwidth in GB/s (1e9 bytes/s), for AllReduce efficiency")
      ->check(CLI::NonNegativeNumber);
  c.report
      ->add_option("--top", o.top,
                   "Kernels, and workers in the long tables, worst first (0: all; default 20)")
      ->check(CLI::NonNegativeNumber);
  c.report->add_option("--ranks", o.ranks, "Long tables: only these ranks, e.g. 0-3,7");
  c.report->add_option("--steps", o.steps, "Long tables: only these steps, N or FIRST-LAST");
  c.report->add_flag("--allow-mixed", o.allow_mixed,
                     "Analyse a capture that is not one job all the same");
  c.report->add_flag("--wide", o.wide, "Tables: kernel and operator names whole");
  c.report->add_option("--params", o.params, "Model parameter count")
      ->check(CLI::NonNegativeNumber);
  c.report->add_option("--bytes-per-param", o.bytes_per_param, "Gradient bytes per parameter")
      ->check(CLI::Range(1, 16));

  c.show = app.add_subcommand("show", "One capture: state, window, clocks and its workers");
  c.show->add_option("capture", o.capture_id, "Capture id")->required();
  c.show->add_option("--format", o.format, "Output format")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  c.remove = app.add_subcommand("delete",
                                "Delete a stored capture (a running one must be cancelled first)");
  c.remove->add_option("capture", o.capture_id, "Capture id")->required();
  c.cancel = app.add_subcommand("cancel", "Cancel a running capture on every agent");
  c.cancel->add_option("capture", o.capture_id, "Capture id")->required();
  c.cancel->add_option("--reason", o.reason, "Why (logged by the agents)");
  c.health = app.add_subcommand("health",
                                "Whether a coordinator, or an agent's --health endpoint, is up "
                                "(/healthz) and ready (/readyz): exit 0 if "
                                "so, 1 if not (for container HEALTHCHECKs and scripts)");
  c.health->add_flag("--live-only", o.live_only, "Check /healthz only");
  c.trace = app.add_subcommand(
      "trace", "Write a capture's trace: merged Chrome JSON, Perfetto protobuf or Kineto per rank");
  c.trace->add_option("capture", o.capture_id, "Capture id")->required();
  c.trace
      ->add_option("-o,--output", o.trace_path,
                   "File to write (gzip-compressed if it ends in .gz); with --format kineto, a "
                   "directory for rank-N.pt.trace.json files")
      ->required();
  c.trace
      ->add_option("--format", o.trace_format,
                   "json (Chrome trace events), perfetto (Perfetto's protobuf), kineto (one file "
                   "per rank on the aligned clock, for HTA)")
      ->check(CLI::IsMember({"json", "perfetto", "kineto"}))
      ->capture_default_str();
  return c;
}

int RunImportCommand(const OnlineOptions& o) {
  absl::StatusOr<http::ServerAddress> server = Server(o);
  if (!server.ok()) return Fail("import", std::string(server.status().message()));
  absl::StatusOr<std::vector<std::string>> files = common::ExpandTraceInputs(o.import_inputs);
  if (!files.ok()) return Fail("import", std::string(files.status().message()));
  uint64_t total = 0;
  for (const std::string& f : *files) total += std::filesystem::file_size(f);
  std::string capture = o.capture;
  TerminalProgress progress("uploading");
  absl::Mutex mu;  // the progress line and what the uploads have done
  uint64_t done = 0;
  size_t files_done = 0;
  size_t base = 0;  // the capture's workers before these files
  // Uploads file i to `capture` (a new one when empty); returns the answer's capture id.
  auto upload = [&](size_t i, const std::string& to) -> absl::StatusOr<std::string> {
    const std::string& path = (*files)[i];
    std::string body(std::filesystem::file_size(path), '\0');
    std::ifstream in(path, std::ios::binary);
    if (!in.read(body.data(), static_cast<std::streamsize>(body.size())))
      return absl::UnknownError(common::StrCat(path, ": cannot be read"));
    const std::string name = std::filesystem::path(path).filename().string();
    // A file whose trace names no rank takes its place in the list, whatever order files land in.
    std::string target = common::StrCat("/v1/captures:import?job=", http::UrlEncode(o.job),
                                        "&name=", http::UrlEncode(name), "&index=", base + i);
    if (!to.empty()) target += "&capture=" + http::UrlEncode(to);
    uint64_t sent_before = 0;
    absl::StatusOr<http::HttpClientResponse> r = http::HttpRequestTo(
        *server, "POST", target, body,
        common::LooksGzipped(body) ? "application/gzip" : "application/json", [&](uint64_t sent) {
          absl::MutexLock lock(&mu);
          done += sent - sent_before;
          sent_before = sent;
          progress.Update(done, total, common::StrCat(files_done, "/", files->size(), " files"));
        });
    if (!r.ok()) return r.status();
    if (r->status != 201)
      return absl::UnknownError(common::StrCat(path, ": ", http::ProblemDetail(*r)));
    {
      absl::MutexLock lock(&mu);
      ++files_done;
    }
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view id;
    if (parser.parse(r->body).get(doc) != simdjson::SUCCESS ||
        doc["id"].get_string().get(id) != simdjson::SUCCESS) {
      return absl::UnknownError("the coordinator's answer has no capture id");
    }
    return std::string(id);
  };
  size_t first = 0;
  if (!capture.empty()) {
    // Files added to a capture that has workers come after them.
    absl::StatusOr<http::HttpClientResponse> r =
        http::HttpRequestTo(*server, "GET", "/v1/captures/" + http::UrlEncode(capture));
    if (!r.ok()) return Fail("import", std::string(r.status().message()));
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    simdjson::dom::array workers;
    if (r->status == 200 && parser.parse(r->body).get(doc) == simdjson::SUCCESS &&
        doc["workers"].get_array().get(workers) == simdjson::SUCCESS) {
      base = workers.size();
    }
  }
  if (capture.empty() && !files->empty()) {
    // The first upload creates the capture; the rest join it.
    absl::StatusOr<std::string> id = upload(0, "");
    if (!id.ok()) return Fail("import", std::string(id.status().message()));
    capture = *id;
    first = 1;
  }
  // The coordinator parses each file on its own thread: a few at once keep its cores busy.
  std::atomic<size_t> next{first};
  absl::Status failed;
  std::vector<std::thread> uploaders;
  const size_t parallel = std::min<size_t>(kParallelUploads, files->size() - first);
  for (size_t t = 0; t < parallel; ++t) {
    uploaders.emplace_back([&] {
      for (size_t i = next++; i < files->size(); i = next++) {
        absl::StatusOr<std::string> id = upload(i, capture);
        if (!id.ok()) {
          absl::MutexLock lock(&mu);
          if (failed.ok()) failed = id.status();
          next = files->size();  // the others stop after their current file
          return;
        }
      }
    });
  }
  for (std::thread& t : uploaders) t.join();
  if (!failed.ok()) return Fail("import", std::string(failed.message()));
  progress.Finish();
  std::printf("imported %s (%s) as capture %s\n", common::Counted(files->size(), "file").c_str(),
              HumanBytes(total).c_str(), capture.c_str());
  std::printf("next: podscope --server %s report %s --report pod\n", o.server.c_str(),
              capture.c_str());
  return 0;
}

int RunCapturesCommand(const OnlineOptions& o) {
  absl::StatusOr<http::ServerAddress> server = Server(o);
  if (!server.ok()) return Fail("captures", std::string(server.status().message()));
  std::string target = "/v1/captures?limit=1000";
  if (o.job != "imported" && !o.job.empty()) target += "&job=" + http::UrlEncode(o.job);
  if (!o.state.empty()) target += "&state=" + http::UrlEncode(o.state);
  absl::StatusOr<http::HttpClientResponse> r = http::HttpRequestTo(*server, "GET", target);
  if (!r.ok()) return Fail("captures", std::string(r.status().message()));
  if (r->status != 200) return Fail("captures", http::ProblemDetail(*r));
  if (o.format == "json") {
    std::fwrite(r->body.data(), 1, r->body.size(), stdout);
    return 0;
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(r->body).get(doc) != simdjson::SUCCESS)
    return Fail("captures", "unreadable answer");
  std::printf("%-32s %-16s %-10s %6s %12s\n", "id", "job", "state", "ranks", "events");
  for (simdjson::dom::element c : doc["captures"].get_array()) {
    const std::string_view id = c["id"].get_string().value_unsafe();
    const std::string_view job = c["job"].get_string().value_unsafe();
    const std::string_view state = c["state"].get_string().value_unsafe();
    std::printf("%-32.*s %-16.*s %-10.*s %6zu %12llu\n", static_cast<int>(id.size()), id.data(),
                static_cast<int>(job.size()), job.data(), static_cast<int>(state.size()),
                state.data(), c["workers"].get_array().size(),
                static_cast<unsigned long long>(c["events"].get_uint64().value_unsafe()));
  }
  return 0;
}

int RunReportCommand(const OnlineOptions& o) {
  absl::StatusOr<http::ServerAddress> server = Server(o);
  if (!server.ok()) return Fail("report", std::string(server.status().message()));
  std::vector<std::string> reports = o.reports;
  if (reports.empty()) reports = {o.format == "json" ? "all" : "summary"};
  if (std::find(reports.begin(), reports.end(), "all") != reports.end()) {
    reports.assign(std::begin(analysis::kReportNames), std::end(analysis::kReportNames));
  }
  std::string query =
      common::StrCat("?format=", o.format, "&window=", o.window, "&clocks=", o.clocks);
  if (!o.step_pattern.empty()) query += "&step_pattern=" + http::UrlEncode(o.step_pattern);
  if (o.link_gbytes_per_s > 0) query += common::StrCat("&link_gbytes_per_s=", o.link_gbytes_per_s);
  if (o.top >= 0) query += common::StrCat("&top=", o.top);
  if (!o.ranks.empty()) query += "&ranks=" + http::UrlEncode(o.ranks);
  if (!o.steps.empty()) query += "&steps=" + http::UrlEncode(o.steps);
  if (o.allow_mixed) query += "&allow_mixed=true";
  if (o.wide) query += "&wide=true";
  if (o.params > 0)
    query += common::StrCat("&params=", o.params, "&bytes_per_param=", o.bytes_per_param);
  // JSON is one document: several reports nest under their names, as `analyze` writes them.
  const bool nested = o.format == "json" && reports.size() > 1;
  std::string out = nested ? "{" : "";
  // A report of a dense capture is computed while its request waits: up to ten minutes each.
  for (size_t i = 0; i < reports.size(); ++i) {
    absl::StatusOr<http::HttpClientResponse> r = FetchReport(
        *server,
        common::StrCat("/v1/captures/", http::UrlEncode(o.report_capture), "/", reports[i], query),
        std::chrono::steady_clock::now() + std::chrono::minutes(10));
    if (!r.ok()) return Fail("report", std::string(r.status().message()));
    if (r->status != 200) return Fail("report", http::ProblemDetail(*r));
    std::string_view body = r->body;
    if (nested) {
      while (!body.empty() && body.back() == '\n') body.remove_suffix(1);
      out += common::StrCat(i ? "," : "", "\"", reports[i], "\":", body);
    } else {
      if (i > 0) out += "\n";
      out += body;
    }
  }
  if (nested) out += "}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int RunShowCommand(const OnlineOptions& o) {
  absl::StatusOr<http::ServerAddress> server = Server(o);
  if (!server.ok()) return Fail("show", std::string(server.status().message()));
  absl::StatusOr<http::HttpClientResponse> r = http::HttpRequestTo(*server, "GET", CapturePath(o));
  if (!r.ok()) return Fail("show", std::string(r.status().message()));
  if (r->status != 200) return Fail("show", http::ProblemDetail(*r));
  if (o.format == "json") {
    std::fwrite(r->body.data(), 1, r->body.size(), stdout);
    return 0;
  }
  simdjson::dom::parser parser;
  simdjson::dom::element c;
  if (parser.parse(r->body).get(c) != simdjson::SUCCESS) return Fail("show", "unreadable answer");
  auto str = [](simdjson::dom::element e, const char* key) {
    std::string_view v;
    return e[key].get_string().get(v) == simdjson::SUCCESS ? std::string(v) : std::string();
  };
  auto num = [](simdjson::dom::element e, const char* key) {
    int64_t v = 0;
    return e[key].get_int64().get(v) == simdjson::SUCCESS ? v : int64_t{0};
  };
  std::printf("capture %s  job %s  state %s\n", str(c, "id").c_str(), str(c, "job").c_str(),
              str(c, "state").c_str());
  std::printf("events %lld, stored %s\n", static_cast<long long>(num(c, "events")),
              HumanBytes(static_cast<uint64_t>(num(c, "stored_bytes"))).c_str());
  if (!str(c, "error").empty()) std::printf("error: %s\n", str(c, "error").c_str());
  simdjson::dom::element window;
  if (c["window"].get(window) == simdjson::SUCCESS) {
    std::printf("window %.3f ms", Ms(num(window, "duration_ns")));
    simdjson::dom::element skew = window["max_start_skew_ns"];
    if (skew.is_int64()) std::printf(", start skew %.3f ms", Ms(skew.get_int64().value_unsafe()));
    std::printf("\n");
  }
  std::printf("%6s %-20s %-10s %10s  %s\n", "rank", "host", "state", "events",
              "clock (source, error bound)");
  simdjson::dom::array workers;
  if (c["workers"].get_array().get(workers) != simdjson::SUCCESS) return 0;
  for (simdjson::dom::element w : workers) {
    std::string clock = "none: imported, its clocks taken as they are";
    simdjson::dom::element model;
    if (w["clock"].get(model) == simdjson::SUCCESS) {
      const std::string source = str(model, "source");
      clock = source == "none"
                  ? "none (error bound unknown)"
                  : common::StrCat(source, ", ",
                                   fmt::format("{:.3f}", Ms(num(model, "error_bound_ns"))), " ms");
    }
    std::printf("%6lld %-20s %-10s %10lld  %s\n", static_cast<long long>(num(w, "rank")),
                str(w, "host").c_str(), str(w, "state").c_str(),
                static_cast<long long>(num(w, "events")), clock.c_str());
    // What the worker left out, and why ("kernels: no time" ...): under its row.
    const int64_t dropped = num(w, "dropped_events");
    if (dropped <= 0) continue;
    std::string why;
    simdjson::dom::object reasons;
    if (w["dropped_reasons"].get_object().get(reasons) == simdjson::SUCCESS) {
      for (auto [reason, n] : reasons) {
        common::StrAppend(&why, why.empty() ? "" : ", ", std::string(reason), " ",
                          n.is_uint64() ? n.get_uint64().value_unsafe() : 0);
      }
    }
    std::printf("%6s %lld records dropped%s%s\n", "", static_cast<long long>(dropped),
                why.empty() ? "" : ": ", why.c_str());
  }
  return 0;
}

int RunDeleteCommand(const OnlineOptions& o) {
  absl::StatusOr<http::ServerAddress> server = Server(o);
  if (!server.ok()) return Fail("delete", std::string(server.status().message()));
  absl::StatusOr<http::HttpClientResponse> r =
      http::HttpRequestTo(*server, "DELETE", CapturePath(o));
  if (!r.ok()) return Fail("delete", std::string(r.status().message()));
  if (r->status != 204 && r->status != 200) return Fail("delete", http::ProblemDetail(*r));
  std::printf("deleted capture %s\n", o.capture_id.c_str());
  return 0;
}

int RunCancelCommand(const OnlineOptions& o) {
  absl::StatusOr<http::ServerAddress> server = Server(o);
  if (!server.ok()) return Fail("cancel", std::string(server.status().message()));
  std::string target = CapturePath(o) + ":cancel";
  if (!o.reason.empty()) target += "?reason=" + http::UrlEncode(o.reason);
  absl::StatusOr<http::HttpClientResponse> r =
      http::HttpRequestTo(*server, "POST", target, "", "application/json");
  if (!r.ok()) return Fail("cancel", std::string(r.status().message()));
  if (r->status != 202) return Fail("cancel", http::ProblemDetail(*r));
  std::printf("cancelled capture %s\n", o.capture_id.c_str());
  return 0;
}

absl::StatusOr<uint64_t> DownloadTrace(const http::ServerAddress& server,
                                       const std::string& capture_id, const std::string& path,
                                       std::string_view query) {
  const bool gzip = path.ends_with(".gz");
  std::string target = common::StrCat("/v1/captures/", http::UrlEncode(capture_id),
                                      "/trace?gzip=", gzip ? "true" : "false");
  if (!query.empty()) common::StrAppend(&target, "&", query);
  // Written as it arrives: an export of any size holds one read's worth here.
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return absl::InternalError(common::StrCat("cannot write ", path));
  uint64_t bytes = 0;
  http::ServerAddress streaming = server;
  streaming.body_sink = [&](std::string_view piece) -> absl::Status {
    if (std::fwrite(piece.data(), 1, piece.size(), f) != piece.size())
      return absl::InternalError(common::StrCat("cannot write ", path));
    bytes += piece.size();
    return absl::OkStatus();
  };
  absl::StatusOr<http::HttpClientResponse> r = http::HttpRequestTo(streaming, "GET", target);
  const bool closed = std::fclose(f) == 0;
  if (!r.ok() || r->status != 200 || !closed) {
    std::remove(path.c_str());  // nothing half-written is left behind
    if (!r.ok()) return r.status();
    if (r->status != 200) return absl::UnavailableError(http::ProblemDetail(*r));
    return absl::InternalError(common::StrCat("cannot write ", path));
  }
  return bytes;
}

namespace {

// One Kineto file per rank of the capture, each its own request.
int DownloadKinetoFiles(const http::ServerAddress& server, const OnlineOptions& o) {
  absl::StatusOr<http::HttpClientResponse> r = http::HttpRequestTo(server, "GET", CapturePath(o));
  if (!r.ok()) return Fail("trace", std::string(r.status().message()));
  if (r->status != 200) return Fail("trace", http::ProblemDetail(*r));
  simdjson::dom::parser parser;
  simdjson::dom::element c;
  simdjson::dom::array workers;
  if (parser.parse(r->body).get(c) != simdjson::SUCCESS ||
      c["workers"].get_array().get(workers) != simdjson::SUCCESS) {
    return Fail("trace", "unreadable answer");
  }
  std::vector<int64_t> ranks;
  for (simdjson::dom::element w : workers) {
    int64_t rank = 0, events = 0;
    if (w["rank"].get_int64().get(rank) != simdjson::SUCCESS) continue;
    if (w["events"].get_int64().get(events) == simdjson::SUCCESS && events == 0) {
      std::string_view state;
      if (w["state"].get_string().get(state) != simdjson::SUCCESS) state = "no events";
      std::fprintf(stderr, "podscope trace: rank %lld has no events (%.*s): no file for it\n",
                   static_cast<long long>(rank), static_cast<int>(state.size()), state.data());
      continue;
    }
    ranks.push_back(rank);
  }
  std::error_code error;
  std::filesystem::create_directories(o.trace_path, error);
  if (error || !std::filesystem::is_directory(o.trace_path))
    return Fail("trace", common::StrCat("cannot make the directory ", o.trace_path));
  uint64_t total = 0;
  for (int64_t rank : ranks) {
    const std::string path = common::StrCat(o.trace_path, "/rank-", rank, ".pt.trace.json");
    absl::StatusOr<uint64_t> bytes =
        DownloadTrace(server, o.capture_id, path, common::StrCat("format=kineto&ranks=", rank));
    if (!bytes.ok())
      return Fail("trace", common::StrCat("rank ", rank, ": ", bytes.status().message()));
    total += *bytes;
  }
  std::printf("wrote %zu Kineto files (rank-N.pt.trace.json, %s) to %s\n", ranks.size(),
              HumanBytes(total).c_str(), o.trace_path.c_str());
  std::printf("open them with HTA: TraceAnalysis(trace_dir=\"%s\")\n", o.trace_path.c_str());
  return 0;
}

}  // namespace

int RunHealthCommand(const OnlineOptions& o) {
  absl::StatusOr<http::ServerAddress> server = ResolveServer(o);
  if (!server.ok()) return Fail("health", std::string(server.status().message()));
  server->timeout_seconds = 5;
  server->max_response_bytes = 64 << 10;
  for (const char* path : {"/healthz", "/readyz"}) {
    if (o.live_only && std::string_view(path) == "/readyz") break;
    absl::StatusOr<http::HttpClientResponse> r = http::HttpRequestTo(*server, "GET", path);
    if (!r.ok()) return Fail("health", std::string(r.status().message()));
    if (r->status != 200) {
      std::printf("%s: HTTP %d %s\n", path, r->status,
                  std::string(common::StripWhitespace(r->body.substr(0, 300))).c_str());
      return 1;
    }
  }
  std::printf("%s\n", o.live_only ? "live" : "live and ready");
  return 0;
}

int RunTraceCommand(const OnlineOptions& o) {
  absl::StatusOr<http::ServerAddress> server = Server(o);
  if (!server.ok()) return Fail("trace", std::string(server.status().message()));
  if (o.trace_format == "kineto") return DownloadKinetoFiles(*server, o);
  absl::StatusOr<uint64_t> bytes = DownloadTrace(
      *server, o.capture_id, o.trace_path, o.trace_format == "perfetto" ? "format=perfetto" : "");
  if (!bytes.ok()) return Fail("trace", std::string(bytes.status().message()));
  std::printf("wrote %s (%s): open it in https://ui.perfetto.dev%s\n", o.trace_path.c_str(),
              HumanBytes(*bytes).c_str(),
              o.trace_format == "perfetto" ? "" : " or chrome://tracing");
  return 0;
}

}  // namespace podscope::cli
