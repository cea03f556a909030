// `podscope analyze <dir|files>`: every analysis offline, as tables or JSON.
#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace podscope::cli {

struct AnalyzeCommandOptions {
  std::vector<std::string> inputs;
  std::vector<std::string> reports;  // none given: summary for tables, all for JSON
  std::string format = "table";
  std::string window = "steps";
  std::string clocks = "auto";
  std::string step_pattern;
  double link_gbytes_per_s = 0;
  int64_t params = 0;
  int32_t bytes_per_param = 4;
  bool allow_mixed = false;
  bool wide = false;
  std::string ranks, steps;  // table filters: "0-3,7" and "A-B" or "N"
  size_t top = 20;
};

CLI::App* AddAnalyzeCommand(CLI::App& app, AnalyzeCommandOptions& options);
int RunAnalyzeCommand(const AnalyzeCommandOptions& options);

}  // namespace podscope::cli
