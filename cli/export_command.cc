#include "cli/export_command.h"

#include <cstdio>
#include <filesystem>

#include "cli/load_inputs.h"
#include "cli/terminal_progress.h"
#include "common/capture_filter.h"
#include "common/chrome/chrome_exporter.h"
#include "common/perfetto/perfetto_exporter.h"
#include "common/str_util.h"
#include "common/worker_source.h"

namespace podscope::cli {

CLI::App* AddExportCommand(CLI::App& app, ExportCommandOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "export",
      "Merge traces into one Chrome/Perfetto JSON or Perfetto protobuf trace (one process per "
      "rank), or write one Kineto file per rank");
  cmd->add_option("inputs", options.inputs, "Trace directories or files (*.json, *.json.gz)")
      ->required();
  cmd->add_option("-o,--output", options.output,
                  "Output file, gzip-compressed if it ends in .gz; with --format kineto, a "
                  "directory for rank-N.pt.trace.json files")
      ->required();
  cmd->add_option("--format", options.format,
                  "json (Chrome trace events), perfetto (Perfetto's protobuf: larger traces load "
                  "faster in ui.perfetto.dev), kineto (per rank, as the PyTorch profiler writes: "
                  "for HTA)")
      ->check(CLI::IsMember({"json", "perfetto", "kineto"}))
      ->capture_default_str();
  cmd->add_flag("--no-flows", options.no_flows, "Leave out launch->kernel flow arrows");
  cmd->add_option("--ranks", options.ranks, "Only these ranks, e.g. 0-3,7");
  cmd->add_option("--steps", options.steps,
                  "Only the events inside these steps (N or FIRST-LAST), by each rank's markers");
  cmd->add_option(
      "--window", options.window,
      "Only the events inside FROM-TO after the capture's first instant, e.g. 200ms-1.5s");
  return cmd;
}

namespace {

// One Kineto file per rank in `dir`, on the aligned clock: what HTA and the PyTorch profiler's
// viewer open as N ranks.
int WriteKinetoFiles(const common::CaptureView& view, const std::string& dir,
                     const common::ExportOptions& options) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error || !std::filesystem::is_directory(dir)) {
    std::fprintf(stderr, "podscope export: cannot make the directory %s\n", dir.c_str());
    return 1;
  }
  common::ExportOptions kineto = options;
  kineto.layout = common::ExportLayout::kKineto;
  uint64_t bytes = 0;
  for (const common::WorkerTrace* w : view.workers()) {
    const std::string path = common::StrCat(dir, "/rank-", w->info.rank, ".pt.trace.json");
    const common::CaptureView one(std::vector<const common::WorkerTrace*>{w});
    absl::StatusOr<common::ExportStats> stats = common::ExportChromeTraceFile(one, path, kineto);
    if (!stats.ok()) {
      std::fprintf(stderr, "podscope export: %s: %s\n", path.c_str(),
                   std::string(stats.status().message()).c_str());
      return 1;
    }
    bytes += stats->bytes;
  }
  std::printf("wrote %zu Kineto files (rank-N.pt.trace.json, %s) to %s\n", view.size(),
              HumanBytes(bytes).c_str(), dir.c_str());
  std::printf("open them with HTA: TraceAnalysis(trace_dir=\"%s\")\n", dir.c_str());
  return 0;
}

}  // namespace

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
  common::ExportOptions export_options;
  export_options.flows = !options.no_flows;
  if (options.format == "kineto") return WriteKinetoFiles(view, options.output, export_options);
  TerminalProgress progress("exporting");
  common::ViewWorkers workers(view);
  auto update = [&](size_t done) { progress.Update(done, view.size(), "ranks"); };
  absl::StatusOr<common::ExportStats> stats =
      options.format == "perfetto"
          ? common::ExportPerfettoTraceFile(workers, options.output, export_options, update)
          : common::ExportChromeTraceFile(workers, options.output, export_options, update);
  progress.Finish();
  if (!stats.ok()) {
    std::fprintf(stderr, "podscope export: %s\n", std::string(stats.status().message()).c_str());
    return 1;
  }
  std::printf("wrote %s: %s, %s, %s of %s\n", options.output.c_str(),
              common::Counted(view.size(), "rank").c_str(),
              common::Counted(stats->events, "trace event").c_str(),
              HumanBytes(stats->bytes).c_str(),
              options.format == "perfetto" ? "Perfetto protobuf" : "JSON");
  std::printf("open it in https://ui.perfetto.dev (Open trace file)%s\n",
              options.format == "perfetto" ? "" : " or chrome://tracing");
  return 0;
}

}  // namespace podscope::cli
