// The CLI's live-capture commands: `podscope --server URL workers` and
// `podscope --server URL capture --job J --duration 2s [--wait]`.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "cli/online_commands.h"

namespace podscope::cli {

struct LiveOptions {
  // workers
  std::string workers_job;
  std::string format = "table";
  // capture
  std::string job;
  std::string duration = "2s";
  std::string delay = "0ms";
  std::string ranks;  // "0-7,12"; empty: all
  uint64_t max_events_per_worker = 0;
  bool wait = false;
  std::string trace_path;  // with --wait: write the merged Chrome trace here
  std::string timeout = "10m";
};

struct LiveCommands {
  CLI::App* workers = nullptr;
  CLI::App* capture = nullptr;
};

LiveCommands AddLiveCommands(CLI::App& app, LiveOptions& options);
int RunWorkersCommand(const OnlineOptions& online, const LiveOptions& options);
int RunCaptureCommand(const OnlineOptions& online, const LiveOptions& options);

}  // namespace podscope::cli
