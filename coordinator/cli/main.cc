// The podscope command-line tool. Offline subcommands work on trace files; later issues add
// the online ones that talk to a coordinator (--server).
#include <malloc.h>

#include <cstdio>

#include "CLI/CLI.hpp"
#include "coordinator/cli/analyze_command.h"
#include "coordinator/cli/export_command.h"
#include "coordinator/cli/inspect_command.h"
#include "coordinator/cli/simulate_command.h"

int main(int argc, char** argv) {
  // A batch tool that imports and analyses gigabytes: keep freed memory for reuse instead of
  // returning it to the kernel, whose page faults cost more than the work (about 40% of an
  // analysis on the 2-core reference VM). Bounded: memory above 1 GiB is still returned.
  mallopt(M_MMAP_THRESHOLD, 16 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  CLI::App app{"podscope: distributed profiler for multi-GPU, multi-node training"};
  app.set_version_flag("--version", "podscope 0.1.0");
  app.require_subcommand(1);

  podscope::coordinator::AnalyzeCommandOptions analyze;
  podscope::coordinator::InspectCommandOptions inspect;
  podscope::coordinator::SimulateCommandOptions simulate;
  podscope::coordinator::ExportCommandOptions export_options;
  CLI::App* analyze_cmd = podscope::coordinator::AddAnalyzeCommand(app, analyze);
  CLI::App* inspect_cmd = podscope::coordinator::AddInspectCommand(app, inspect);
  CLI::App* export_cmd = podscope::coordinator::AddExportCommand(app, export_options);
  CLI::App* simulate_cmd = podscope::coordinator::AddSimulateCommand(app, simulate);

  CLI11_PARSE(app, argc, argv);
  if (analyze_cmd->parsed()) return podscope::coordinator::RunAnalyzeCommand(analyze);
  if (inspect_cmd->parsed()) return podscope::coordinator::RunInspectCommand(inspect);
  if (simulate_cmd->parsed()) return podscope::coordinator::RunSimulateCommand(simulate);
  if (export_cmd->parsed()) return podscope::coordinator::RunExportCommand(export_options);
  return 2;
}
