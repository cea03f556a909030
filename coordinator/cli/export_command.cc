#include "coordinator/cli/export_command.h"

#include <cstdio>

#include "common/capture_filter.h"
#include "common/chrome/chrome_exporter.h"
#include "coordinator/cli/load_inputs.h"
#include "coordinator/cli/terminal_progress.h"

namespace podscope::coordinator {

CLI::App* AddExportCommand(CLI::App& app, ExportCommandOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "export", "Merge traces into one Chrome-trace / Perfetto JSON (one process per rank)");
  cmd->add_option("inputs", options.inputs, "Trace directories or files (*.json, *.json.gz)")
      ->required();
  cmd->add_option("-o,--output", options.output, "Output file; gzip-compressed if it ends in .gz")
      ->required();
  cmd->add_flag("--no-flows", options.no_flows, "Leave out launch->kernel flow arrows");
  cmd->add_option("--ranks", options.ranks, "Only these ranks, e.g. 0-3,7");
  cmd->add_option("--steps", options.steps,
                  "Only the events inside these steps (N or FIRST-LAST), by each rank's markers");
  cmd->add_option(
      "--window", options.window,
      "Only the events inside FROM-TO after the capture's first instant, e.g. 200ms-1.5s");
  return cmd;
}

int RunExportCommand(const ExportCommandOptions& options) {
  absl::StatusOr<common::Capture> capture = LoadInputsWithProgress(options.inputs);
  if (!capture.ok()) {
    std::fprintf(stderr, "podscope export: %s\n", std::string(capture.status().message()).c_str());
    return 1;
  }
  if (absl::Status filtered =
          common::FilterCapture({options.ranks, options.steps, options.window}, &*capture);
      !filtered.ok()) {
    std::fprintf(stderr, "podscope export: %s\n", std::string(filtered.message()).c_str());
    return filtered.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  const common::CaptureView view(*capture);
  TerminalProgress progress("exporting");
  common::ExportOptions export_options;
  export_options.flows = !options.no_flows;
  absl::StatusOr<common::ExportStats> stats = common::ExportChromeTraceFile(
      view, options.output, export_options,
      [&](size_t done) { progress.Update(done, view.size(), "ranks"); });
  progress.Finish();
  if (!stats.ok()) {
    std::fprintf(stderr, "podscope export: %s\n", std::string(stats.status().message()).c_str());
    return 1;
  }
  std::printf("wrote %s: %zu ranks, %llu trace events, %s of JSON\n", options.output.c_str(),
              view.size(), static_cast<unsigned long long>(stats->events),
              HumanBytes(stats->bytes).c_str());
  std::printf("open it in https://ui.perfetto.dev (Open trace file) or chrome://tracing\n");
  return 0;
}

}  // namespace podscope::coordinator
