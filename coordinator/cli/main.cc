// The podscope command-line tool. Offline subcommands work on trace files; later issues add
// the online ones that talk to a coordinator (--server).
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "CLI/CLI.hpp"
#include "coordinator/cli/analyze_command.h"
#include "coordinator/cli/export_command.h"
#include "coordinator/cli/inspect_command.h"
#include "coordinator/cli/live_commands.h"
#include "coordinator/cli/online_commands.h"
#include "coordinator/cli/simulate_command.h"
#include "coordinator/cli/watch_commands.h"
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
  // A batch tool that imports and analyses gigabytes: keep freed memory for reuse instead of
  // returning it to the kernel, whose page faults cost more than the work (about 40% of an
  // analysis on the 2-core reference VM). Bounded: memory above 1 GiB is still returned.
  mallopt(M_MMAP_THRESHOLD, 16 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  CLI::App app{"podscope: distributed profiler for multi-GPU, multi-node training"};
  app.set_version_flag("--version", std::string("podscope ") + podscope::kVersion);
  app.require_subcommand(1);

  podscope::coordinator::AnalyzeCommandOptions analyze;
  podscope::coordinator::InspectCommandOptions inspect;
  podscope::coordinator::SimulateCommandOptions simulate;
  podscope::coordinator::OnlineOptions online;
  podscope::coordinator::ExportCommandOptions export_options;
  CLI::App* analyze_cmd = podscope::coordinator::AddAnalyzeCommand(app, analyze);
  CLI::App* inspect_cmd = podscope::coordinator::AddInspectCommand(app, inspect);
  CLI::App* export_cmd = podscope::coordinator::AddExportCommand(app, export_options);
  CLI::App* simulate_cmd = podscope::coordinator::AddSimulateCommand(app, simulate);
  const podscope::coordinator::OnlineCommands online_cmds =
      podscope::coordinator::AddOnlineCommands(app, online);
  podscope::coordinator::LiveOptions live;
  const podscope::coordinator::LiveCommands live_cmds =
      podscope::coordinator::AddLiveCommands(app, live);
  podscope::coordinator::WatchOptions watch;
  const podscope::coordinator::WatchCommands watch_cmds =
      podscope::coordinator::AddWatchCommands(app, watch);

  // Exit codes: 0 success, 1 the command failed, 2 the command line is wrong (CLI11's own codes,
  // 105-109, are folded into 2), 3 a `capture --wait` that ended partial.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (analyze_cmd->parsed()) return podscope::coordinator::RunAnalyzeCommand(analyze);
  if (inspect_cmd->parsed()) return podscope::coordinator::RunInspectCommand(inspect);
  if (online_cmds.import->parsed()) return podscope::coordinator::RunImportCommand(online);
  if (online_cmds.captures->parsed()) return podscope::coordinator::RunCapturesCommand(online);
  if (online_cmds.report->parsed()) return podscope::coordinator::RunReportCommand(online);
  if (online_cmds.show->parsed()) return podscope::coordinator::RunShowCommand(online);
  if (online_cmds.remove->parsed()) return podscope::coordinator::RunDeleteCommand(online);
  if (online_cmds.cancel->parsed()) return podscope::coordinator::RunCancelCommand(online);
  if (online_cmds.trace->parsed()) return podscope::coordinator::RunTraceCommand(online);
  if (online_cmds.health->parsed()) return podscope::coordinator::RunHealthCommand(online);
  if (live_cmds.workers->parsed()) return podscope::coordinator::RunWorkersCommand(online, live);
  if (live_cmds.capture->parsed()) return podscope::coordinator::RunCaptureCommand(online, live);
  if (watch_cmds.alerts->parsed()) return podscope::coordinator::RunAlertsCommand(online, watch);
  if (watch_cmds.rules_get->parsed()) return podscope::coordinator::RunRulesGetCommand(online);
  if (watch_cmds.rules_set->parsed())
    return podscope::coordinator::RunRulesSetCommand(online, watch);
  if (watch_cmds.watch->parsed()) return podscope::coordinator::RunWatchCommand(online, watch);
  if (watch_cmds.schedules_list->parsed())
    return podscope::coordinator::RunSchedulesListCommand(online);
  if (watch_cmds.schedules_add->parsed())
    return podscope::coordinator::RunSchedulesAddCommand(online, watch);
  if (watch_cmds.schedules_delete->parsed())
    return podscope::coordinator::RunSchedulesDeleteCommand(online, watch);
  if (simulate_cmd->parsed()) return podscope::coordinator::RunSimulateCommand(simulate);
  if (export_cmd->parsed()) return podscope::coordinator::RunExportCommand(export_options);
  return 2;
}
