// `podscope inspect <dir|files>`: what is in a set of trace files, per rank.
#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace podscope::cli {

struct InspectCommandOptions {
  std::vector<std::string> inputs;
  std::string format = "table";  // table | json
};

// Registers the subcommand on `app`; the options object must outlive parsing.
CLI::App* AddInspectCommand(CLI::App& app, InspectCommandOptions& options);
// Runs it; returns the process exit code.
int RunInspectCommand(const InspectCommandOptions& options);

}  // namespace podscope::cli
