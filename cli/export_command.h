// `podscope export <dir|files> -o merged.json[.gz]`: one Chrome JSON trace for all ranks, one
// Perfetto protobuf trace (--format perfetto), or one Kineto file per rank (--format kineto -o
// DIR).
#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace podscope::cli {

struct ExportCommandOptions {
  std::vector<std::string> inputs;
  std::string output;
  std::string format = "json";  // json, perfetto or kineto
  bool no_flows = false;
  // Filters: ranks "0-3,7"; steps "N" or "FIRST-LAST" (each worker's own step markers); a window
  // "FROM-TO" of durations with units from the capture's first instant ("200ms-1.5s").
  std::string ranks, steps, window;
};

CLI::App* AddExportCommand(CLI::App& app, ExportCommandOptions& options);
int RunExportCommand(const ExportCommandOptions& options);

}  // namespace podscope::cli
