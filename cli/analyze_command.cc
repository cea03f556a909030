#include "cli/analyze_command.h"

#include <cstdio>

#include "analysis/analysis_run.h"
#include "analysis/report/report_json.h"
#include "analysis/report/report_table.h"
#include "cli/load_inputs.h"
#include "common/heap_reuse.h"
#include "common/ranges.h"

namespace podscope::cli {

CLI::App* AddAnalyzeCommand(CLI::App& app, AnalyzeCommandOptions& o) {
  CLI::App* cmd = app.add_subcommand("analyze",
                                     "Step breakdown, overlap, wait vs transfer, stragglers, "
                                     "AllReduce time, pod view, top kernels, temporal summary");
  cmd->add_option("inputs", o.inputs, "Trace directories or files (*.json, *.json.gz)")->required();
  cmd->add_option("--report", o.reports,
                  "summary|overview|steps|pod|overlap|communication|stragglers|allreduce|kernels|"
                  "gpu|operators|memory|input|temporal|all (repeatable; "
                  "default: summary for tables, all for JSON)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--format", o.format, "Output format")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  cmd->add_option("--window", o.window, "Temporal window: the capture's steps, or HTA's rules")
      ->check(CLI::IsMember({"steps", "hta"}))
      ->capture_default_str();
  cmd->add_option("--clocks", o.clocks, "Compare arrivals across ranks: auto, aligned, unaligned")
      ->check(CLI::IsMember({"auto", "aligned", "unaligned"}))
      ->capture_default_str();
  cmd->add_option("--step-pattern", o.step_pattern,
                  "Regex for step marker annotations (group 1: step number)");
  cmd->add_option("--link-gbytes-per-s", o.link_gbytes_per_s,
                  "Link bandwidth in GB/s (1e9 bytes/s, as bus bandwidth is given), for AllReduce "
                  "efficiency")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--params", o.params, "Model parameter count, for the expected AllReduce time")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--bytes-per-param", o.bytes_per_param, "Gradient bytes per parameter")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  cmd->add_option("--top", o.top,
                  "Kernels listed per worker and pod-wide, and workers shown in the steps, overlap "
                  "and pod tables, "
                  "worst first (0: all)")
      ->capture_default_str();
  cmd->add_option("--ranks", o.ranks,
                  "Steps, overlap and pod tables: only these ranks, e.g. 0-3,7");
  cmd->add_option("--steps", o.steps,
                  "Steps, overlap and pod tables: only these steps, N or FIRST-LAST");
  cmd->add_flag("--wide", o.wide, "Tables: kernel and operator names whole");
  cmd->add_flag("--allow-mixed", o.allow_mixed,
                "Analyse inputs that are not one job (several jobs, world sizes that disagree, a "
                "rank outside its world); a rank given twice is refused whatever this says");
  cmd->footer(
      "Steps: each step's device span is partitioned, instant by instant: compute (only "
      "computation kernels),\n"
      "overlap (computation and communication together), comm_wait (only communication kernels "
      "waiting for\n"
      "the last rank), comm_transfer (only communication moving data), memcpy (only copies); "
      "device idle:\n"
      "idle_input (host in a dataloader span), idle_launch (host in a CUDA call or a launch in "
      "flight),\n"
      "idle_host (host in other framework work), idle_other. 'before' is the device idle since the "
      "previous\n"
      "step's span, split the same way.\n"
      "Stragglers: step-time loss is the cost (the step time saved had the worker arrived with the "
      "others,\n"
      "replayed from the trace's dependencies); caused delay (its arrival minus the second-last, "
      "summed)\n"
      "ranks them and overstates the cost. A worker is named for caused delay, or for compute "
      "kernel time\n"
      "per step with a robust z-score >= 3.5 (0.6745 x (x - median) / median absolute deviation). "
      "Its\n"
      "category is the partition category that grew most against the median worker, with the "
      "kernels,\n"
      "host operators, dataloader spans or CUDA calls behind it.");
  return cmd;
}

int RunAnalyzeCommand(const AnalyzeCommandOptions& o) {
  analysis::AnalysisRequest request;
  request.reports = o.reports;
  if (request.reports.empty()) request.reports = {o.format == "json" ? "all" : "summary"};
  request.window = o.window == "hta" ? analysis::WindowMode::kHta : analysis::WindowMode::kSteps;
  request.steps.marker_pattern = o.step_pattern;
  request.communication.clocks = o.clocks == "aligned"     ? analysis::ClockTrust::kAligned
                                 : o.clocks == "unaligned" ? analysis::ClockTrust::kUnaligned
                                                           : analysis::ClockTrust::kAuto;
  request.bandwidth = {o.link_gbytes_per_s, o.params, o.bytes_per_param};
  request.top_kernels = o.top;
  request.top_workers = o.top;
  request.wide_names = o.wide;
  if (!o.ranks.empty()) {
    absl::StatusOr<std::vector<int32_t>> ranks = common::ParseRankList(o.ranks);
    if (!ranks.ok()) {
      std::fprintf(stderr, "podscope analyze: --ranks: %s\n",
                   std::string(ranks.status().message()).c_str());
      return 2;
    }
    request.ranks = *std::move(ranks);
  }
  if (!o.steps.empty()) {
    if (absl::Status s = common::ParseIntRange(o.steps, &request.first_step, &request.last_step);
        !s.ok()) {
      std::fprintf(stderr, "podscope analyze: --steps: %s\n", std::string(s.message()).c_str());
      return 2;
    }
  }
  if (absl::Status status = analysis::ValidateRequest(&request); !status.ok()) {
    std::fprintf(stderr, "podscope analyze: %s\n", std::string(status.message()).c_str());
    return 2;
  }
  // The files are read packed and analysed a worker at a time (analysis_run.h), as the
  // coordinator reads its store: memory holds one decoded worker, not every file's events.
  absl::StatusOr<common::PackedWorkers> workers = LoadPackedInputsWithProgress(o.inputs);
  if (!workers.ok()) {
    std::fprintf(stderr, "podscope analyze: %s\n", std::string(workers.status().message()).c_str());
    return 1;
  }
  // The files were read on other threads: their arenas' freed memory goes back rather than sit
  // beside what the analysis takes on this one.
  common::ReturnFreedHeap();
  request.allow_mixed = o.allow_mixed;
  common::Capture tables;
  absl::StatusOr<analysis::AnalysisResults> results =
      analysis::RunAnalysesByWorker(*workers, request, &tables);
  const common::CaptureView view(tables);
  // Inputs that are not one job make cross-rank reports meaningless: refused unless insisted on.
  const analysis::JobCheck job = analysis::CheckOneJob(view);
  if (!results.ok() && results.status().code() == absl::StatusCode::kFailedPrecondition &&
      job.mixed) {
    std::string why;
    for (const std::string& w : job.warnings) why += "\n  " + w;
    std::fprintf(stderr,
                 "podscope analyze: these inputs are not one job:%s\n(pass --allow-mixed to "
                 "analyse them together "
                 "anyway)\n",
                 why.c_str());
    return 1;
  }
  if (!results.ok()) {
    std::fprintf(stderr, "podscope analyze: %s\n", std::string(results.status().message()).c_str());
    return 1;
  }
  if (o.format == "json") {
    for (const std::string& w : job.warnings)
      std::fprintf(stderr, "podscope analyze: warning: %s\n", w.c_str());
  }
  const std::string text = o.format == "json" ? RenderJson(view, request, *results)
                                              : RenderTables(view, request, *results);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace podscope::cli
