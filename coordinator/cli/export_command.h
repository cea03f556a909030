// `podscope export <dir|files> -o merged.json[.gz]`: one Chrome/Perfetto trace for all ranks.
#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace podscope::coordinator {

struct ExportCommandOptions {
  std::vector<std::string> inputs;
  std::string output;
  bool no_flows = false;
  // Filters: ranks "0-3,7"; steps "N" or "FIRST-LAST" (each worker's own step markers); a window
  // "FROM-TO" of durations with units from the capture's first instant ("200ms-1.5s").
  std::string ranks, steps, window;
};

CLI::App* AddExportCommand(CLI::App& app, ExportCommandOptions& options);
int RunExportCommand(const ExportCommandOptions& options);

}  // namespace podscope::coordinator
