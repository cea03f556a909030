// The CLI's watch commands (DESIGN §11): `podscope alerts [--job J] [--state firing|resolved|all]`
// and `podscope rules get|set FILE`, against the coordinator of --server.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "coordinator/cli/online_commands.h"

namespace podscope::coordinator {

struct WatchOptions {
  std::string job;
  std::string state = "firing";
  std::string format = "table";
  std::string rules_file;  // rules set: a JSON file, or - for standard input
};

struct WatchCommands {
  CLI::App* alerts = nullptr;
  CLI::App* rules = nullptr;
  CLI::App* rules_get = nullptr;
  CLI::App* rules_set = nullptr;
};

WatchCommands AddWatchCommands(CLI::App& app, WatchOptions& options);
int RunAlertsCommand(const OnlineOptions& online, const WatchOptions& options);
int RunRulesGetCommand(const OnlineOptions& online);
int RunRulesSetCommand(const OnlineOptions& online, const WatchOptions& options);

}  // namespace podscope::coordinator
