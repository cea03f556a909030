// The CLI's online mode: `podscope import|captures|report|show|delete|cancel|trace`, against the
// coordinator named by --server (anywhere on the line) or PODSCOPE_SERVER.
#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "http/http_client.h"

namespace podscope::cli {

struct OnlineOptions {
  std::string server;      // global --server URL
  std::string token_file;  // global --token-file (else PODSCOPE_TOKEN)
  std::string ca_cert;     // global --ca-cert
  // import
  std::vector<std::string> import_inputs;
  std::string job = "imported";
  std::string capture;
  // captures
  std::string state;
  std::string format = "table";
  // report
  std::string report_capture;
  std::vector<std::string> reports;  // none given: summary for tables, all for JSON
  std::string window = "steps", clocks = "auto", step_pattern;
  std::string ranks, steps;  // the long tables' filters, as analyze's
  int64_t top = -1;          // -1: the server's default (20)
  bool allow_mixed = false;
  bool wide = false;
  double link_gbytes_per_s = 0;
  int64_t params = 0;
  int32_t bytes_per_param = 4;
  // show | delete | cancel | trace
  std::string capture_id;
  std::string reason;      // cancel
  std::string trace_path;  // trace: -o (.json or .json.gz; a directory with --format kineto)
  std::string trace_format = "json";  // trace: json, perfetto or kineto
  bool live_only = false;             // health: /healthz only
};

struct OnlineCommands {
  CLI::App* import = nullptr;
  CLI::App* captures = nullptr;
  CLI::App* report = nullptr;
  CLI::App* show = nullptr;
  CLI::App* remove = nullptr;
  CLI::App* cancel = nullptr;
  CLI::App* trace = nullptr;
  CLI::App* health = nullptr;
};

// The server of --server (or PODSCOPE_SERVER) with the token of --token-file (or
// PODSCOPE_TOKEN) and the CA of --ca-cert: an error names what is missing or unreadable.
absl::StatusOr<http::ServerAddress> ResolveServer(const OnlineOptions& o);

OnlineCommands AddOnlineCommands(CLI::App& app, OnlineOptions& options);
int RunImportCommand(const OnlineOptions& options);
int RunCapturesCommand(const OnlineOptions& options);
int RunReportCommand(const OnlineOptions& options);
int RunShowCommand(const OnlineOptions& options);
int RunDeleteCommand(const OnlineOptions& options);
int RunCancelCommand(const OnlineOptions& options);
int RunTraceCommand(const OnlineOptions& options);
int RunHealthCommand(const OnlineOptions& options);
// GETs a capture's trace into `path` (gzip when it ends in .gz), `query` added to the request
// (e.g. "format=perfetto"); returns its size.
absl::StatusOr<uint64_t> DownloadTrace(const http::ServerAddress& server,
                                       const std::string& capture_id, const std::string& path,
                                       std::string_view query = {});

}  // namespace podscope::cli
