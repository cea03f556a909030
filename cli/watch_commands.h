// The CLI's watch commands (docs/watch.md): `podscope alerts [--job J] [--state
// firing|resolved|all]`, `podscope rules get|set FILE`, `podscope schedules list|add|delete` and
// `podscope watch --job J`, against the coordinator of --server.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "cli/online_commands.h"

namespace podscope::cli {

struct WatchOptions {
  std::string job;
  std::string state = "firing";
  std::string format = "table";
  std::string rules_file;  // rules set: a JSON file, or - for standard input
  // schedules add | delete
  std::string every = "10m";
  std::string duration = "2s";
  std::string ranks;
  std::string schedule_id;
  // watch
  std::string interval = "1s";
  int64_t count = 0;  // polls before exiting; 0: until interrupted
  int64_t top = 20;   // rows on a terminal, most caused delay first
};

struct WatchCommands {
  CLI::App* alerts = nullptr;
  CLI::App* rules = nullptr;
  CLI::App* rules_get = nullptr;
  CLI::App* rules_set = nullptr;
  CLI::App* schedules_list = nullptr;
  CLI::App* schedules_add = nullptr;
  CLI::App* schedules_delete = nullptr;
  CLI::App* watch = nullptr;
};

WatchCommands AddWatchCommands(CLI::App& app, WatchOptions& options);
int RunAlertsCommand(const OnlineOptions& online, const WatchOptions& options);
int RunRulesGetCommand(const OnlineOptions& online);
int RunRulesSetCommand(const OnlineOptions& online, const WatchOptions& options);
int RunSchedulesListCommand(const OnlineOptions& online);
// A live per-rank table of the job's window on a terminal; one JSON line per poll when piped.
int RunWatchCommand(const OnlineOptions& online, const WatchOptions& options);
int RunSchedulesAddCommand(const OnlineOptions& online, const WatchOptions& options);
int RunSchedulesDeleteCommand(const OnlineOptions& online, const WatchOptions& options);

}  // namespace podscope::cli
