// `podscope simulate`: writes a simulated multi-rank training job as PyTorch-profiler (Kineto)
// trace files, one per rank, so every path can be tried without a GPU.
#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "sim/workload_model.h"

namespace podscope::cli {

struct SimulateCommandOptions {
  sim::WorkloadOptions workload;
  std::vector<std::string> stragglers;
  std::string output_dir;
  bool plain_json = false;
  bool overwrite = false;
};

CLI::App* AddSimulateCommand(CLI::App& app, SimulateCommandOptions& options);
int RunSimulateCommand(SimulateCommandOptions& options);

}  // namespace podscope::cli
