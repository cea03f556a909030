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
};

CLI::App* AddExportCommand(CLI::App& app, ExportCommandOptions& options);
int RunExportCommand(const ExportCommandOptions& options);

}  // namespace podscope::coordinator
