#include "coordinator/cli/export_command.h"

#include <cstdio>

#include <algorithm>
#include <climits>

#include "common/chrome/chrome_exporter.h"
#include "common/ranges.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "common/trace_slice.h"
#include "coordinator/cli/live_commands.h"
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
  cmd->add_option("--steps", options.steps, "Only the events inside these steps (N or FIRST-LAST), by each rank's markers");
  cmd->add_option("--window", options.window,
                  "Only the events inside FROM-TO after the capture's first instant, e.g. 200ms-1.5s");
  return cmd;
}

namespace {

using common::TimeNs;

// Applies --ranks, --steps and --window to the loaded capture; an error names the filter that
// left nothing.
absl::Status ApplyFilters(const ExportCommandOptions& o, common::Capture* capture) {
  if (!o.ranks.empty()) {
    ASSIGN_OR_RETURN(const std::vector<int32_t> ranks, common::ParseRankList(o.ranks));
    std::erase_if(capture->workers, [&](const common::WorkerTrace& w) {
      return std::find(ranks.begin(), ranks.end(), w.info.rank) == ranks.end();
    });
    if (capture->workers.empty()) return absl::NotFoundError(common::StrCat("no input holds ranks ", o.ranks));
  }
  if (!o.steps.empty()) {
    int64_t first = 0, last = 0;
    RETURN_IF_ERROR(common::ParseIntRange(o.steps, &first, &last));
    for (common::WorkerTrace& w : capture->workers) {
      TimeNs begin = INT64_MAX, end = INT64_MIN;
      const common::StepTable& steps = w.steps;
      for (size_t i = 0; i < steps.number.size(); ++i) {
        if (steps.number[i] < first || steps.number[i] > last) continue;
        begin = std::min(begin, steps.start[i]);
        end = std::max(end, steps.end[i]);
      }
      if (begin > end) {
        return absl::NotFoundError(common::StrCat("rank ", w.info.rank, " has no step ", o.steps, " (its markers)"));
      }
      common::KeepWindow(begin, end, &w);
    }
  }
  if (!o.window.empty()) {
    const size_t dash = o.window.find('-', 1);
    if (dash == std::string::npos) return absl::InvalidArgumentError("--window must be FROM-TO, e.g. 200ms-1.5s");
    ASSIGN_OR_RETURN(const int64_t from_ms, ParseDurationMs(o.window.substr(0, dash)));
    ASSIGN_OR_RETURN(const int64_t to_ms, ParseDurationMs(o.window.substr(dash + 1)));
    if (to_ms <= from_ms) return absl::InvalidArgumentError("--window: TO must be after FROM");
    // From the capture's first instant on the aligned clock, back into each worker's own.
    TimeNs origin = INT64_MAX;
    for (const common::WorkerTrace& w : capture->workers) {
      for (const std::vector<TimeNs>* starts : {&w.kernels.start, &w.memcpys.start, &w.runtime_calls.start,
                                               &w.host_spans.start, &w.collectives.enqueue}) {
        for (TimeNs t : *starts) origin = std::min(origin, w.clock.ToAligned(t));
      }
    }
    if (origin == INT64_MAX) return absl::NotFoundError("the inputs hold no events");
    for (common::WorkerTrace& w : capture->workers) {
      common::KeepWindow(w.clock.ToLocal(origin + from_ms * 1'000'000), w.clock.ToLocal(origin + to_ms * 1'000'000), &w);
    }
  }
  return absl::OkStatus();
}

}  // namespace

int RunExportCommand(const ExportCommandOptions& options) {
  absl::StatusOr<common::Capture> capture = LoadInputsWithProgress(options.inputs);
  if (!capture.ok()) {
    std::fprintf(stderr, "podscope export: %s\n", std::string(capture.status().message()).c_str());
    return 1;
  }
  if (absl::Status filtered = ApplyFilters(options, &*capture); !filtered.ok()) {
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
