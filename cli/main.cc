// The podscope command-line tool. Offline subcommands work on trace files; later issues add
// the online ones that talk to a coordinator (--server).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "CLI/CLI.hpp"
#include "cli/analyze_command.h"
#include "cli/export_command.h"
#include "cli/inspect_command.h"
#include "cli/live_commands.h"
#include "cli/online_commands.h"
#include "cli/simulate_command.h"
#include "cli/watch_commands.h"
#include "common/heap_reuse.h"
#include "podscope/version.h"

namespace {

// glibc reads its malloc tunables only at start-up. Asking it for transparent huge pages
// (glibc.malloc.hugetlb=1) cuts page faults ~4x on large imports (1.95 s -> 1.55 s for 3 M
// events on the reference VM), so the CLI re-executes itself once with the tunable set.
// PODSCOPE_NO_HUGEPAGES=1 opts out; if exec fails, it simply carries on.
void ReexecWithHugePages(char** argv) {
  if (std::getenv("PODSCOPE_NO_HUGEPAGES") != nullptr) return;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, "glibc.malloc.hugetlb") != nullptr) return;
  std::string value = tunables != nullptr && *tunables != '\0' ? std::string(tunables) + ":" : "";
  value += "glibc.malloc.hugetlb=1";
  if (setenv("GLIBC_TUNABLES", value.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("GLIBC_TUNABLES");  // exec failed: run as we are
}

}  // namespace

int main(int argc, char** argv) {
  ReexecWithHugePages(argv);
  // A batch tool that imports and analyses gigabytes: freed memory is kept for reuse (about 40%
  // of an analysis on the 2-core reference VM went to page faults). Above 1 GiB it is returned.
  podscope::common::KeepFreedHeapForReuse(1 << 30);
  CLI::App app{"podscope: distributed profiler for multi-GPU, multi-node training"};
  app.set_version_flag("--version", std::string("podscope ") + podscope::kVersion);
  app.require_subcommand(1);

  podscope::cli::AnalyzeCommandOptions analyze;
  podscope::cli::InspectCommandOptions inspect;
  podscope::cli::SimulateCommandOptions simulate;
  podscope::cli::OnlineOptions online;
  podscope::cli::ExportCommandOptions export_options;
  CLI::App* analyze_cmd = podscope::cli::AddAnalyzeCommand(app, analyze);
  CLI::App* inspect_cmd = podscope::cli::AddInspectCommand(app, inspect);
  CLI::App* export_cmd = podscope::cli::AddExportCommand(app, export_options);
  CLI::App* simulate_cmd = podscope::cli::AddSimulateCommand(app, simulate);
  const podscope::cli::OnlineCommands online_cmds = podscope::cli::AddOnlineCommands(app, online);
  podscope::cli::LiveOptions live;
  const podscope::cli::LiveCommands live_cmds = podscope::cli::AddLiveCommands(app, live);
  podscope::cli::WatchOptions watch;
  const podscope::cli::WatchCommands watch_cmds = podscope::cli::AddWatchCommands(app, watch);

  // Exit codes: 0 success, 1 the command failed, 2 the command line is wrong (CLI11's own codes,
  // 105-109, are folded into 2), 3 a `capture --wait` that ended partial.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (analyze_cmd->parsed()) return podscope::cli::RunAnalyzeCommand(analyze);
  if (inspect_cmd->parsed()) return podscope::cli::RunInspectCommand(inspect);
  if (online_cmds.import->parsed()) return podscope::cli::RunImportCommand(online);
  if (online_cmds.captures->parsed()) return podscope::cli::RunCapturesCommand(online);
  if (online_cmds.report->parsed()) return podscope::cli::RunReportCommand(online);
  if (online_cmds.show->parsed()) return podscope::cli::RunShowCommand(online);
  if (online_cmds.remove->parsed()) return podscope::cli::RunDeleteCommand(online);
  if (online_cmds.cancel->parsed()) return podscope::cli::RunCancelCommand(online);
  if (online_cmds.trace->parsed()) return podscope::cli::RunTraceCommand(online);
  if (online_cmds.health->parsed()) return podscope::cli::RunHealthCommand(online);
  if (live_cmds.workers->parsed()) return podscope::cli::RunWorkersCommand(online, live);
  if (live_cmds.capture->parsed()) return podscope::cli::RunCaptureCommand(online, live);
  if (watch_cmds.alerts->parsed()) return podscope::cli::RunAlertsCommand(online, watch);
  if (watch_cmds.rules_get->parsed()) return podscope::cli::RunRulesGetCommand(online);
  if (watch_cmds.rules_set->parsed()) return podscope::cli::RunRulesSetCommand(online, watch);
  if (watch_cmds.watch->parsed()) return podscope::cli::RunWatchCommand(online, watch);
  if (watch_cmds.schedules_list->parsed()) return podscope::cli::RunSchedulesListCommand(online);
  if (watch_cmds.schedules_add->parsed())
    return podscope::cli::RunSchedulesAddCommand(online, watch);
  if (watch_cmds.schedules_delete->parsed())
    return podscope::cli::RunSchedulesDeleteCommand(online, watch);
  if (simulate_cmd->parsed()) return podscope::cli::RunSimulateCommand(simulate);
  if (export_cmd->parsed()) return podscope::cli::RunExportCommand(export_options);
  return 2;
}
