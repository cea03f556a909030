#include "coordinator/analysis/analysis_run.h"

#include <algorithm>
#include <cmath>

#include "common/step_pattern.h"
#include "common/str_util.h"

namespace podscope::coordinator::analysis {

bool Wants(const AnalysisRequest& request, std::string_view report) {
  return std::find(request.reports.begin(), request.reports.end(), report) != request.reports.end();
}

absl::Status ValidateRequest(AnalysisRequest* request) {
  if (request->reports.empty()) request->reports = {"all"};
  std::vector<std::string> expanded;
  for (const std::string& name : request->reports) {
    if (name == "all") {
      for (std::string_view n : kReportNames) expanded.emplace_back(n);
      continue;
    }
    if (std::find(std::begin(kReportNames), std::end(kReportNames), name) ==
        std::end(kReportNames)) {
      return absl::InvalidArgumentError(
          common::StrCat("unknown report \"", name,
                         "\" (summary, overview, steps, pod, overlap, communication, stragglers, "
                         "allreduce, kernels, gpu, operators, memory, input, temporal, all)"));
    }
    if (std::find(expanded.begin(), expanded.end(), name) == expanded.end())
      expanded.push_back(name);
  }
  request->reports = std::move(expanded);
  if (!request->steps.marker_pattern.empty()) {
    if (absl::StatusOr<common::StepPattern> pattern =
            common::StepPattern::Compile(request->steps.marker_pattern);
        !pattern.ok()) {
      return pattern.status();
    }
  }
  if (!std::isfinite(request->bandwidth.link_gbps) || request->bandwidth.link_gbps < 0) {
    return absl::InvalidArgumentError("link bandwidth must be a finite number >= 0");
  }
  if (request->bandwidth.params < 0)
    return absl::InvalidArgumentError("parameter count must be >= 0");
  if (request->bandwidth.bytes_per_param <= 0 || request->bandwidth.bytes_per_param > 16) {
    return absl::InvalidArgumentError("bytes per parameter must be in 1..16");
  }
  return absl::OkStatus();
}

AnalysisResults RunAnalyses(const common::CaptureView& capture, const AnalysisRequest& request) {
  AnalysisResults results;
  results.warnings = CheckOneJob(capture).warnings;
  const bool overview = Wants(request, "overview");
  const bool summary = Wants(request, "summary") || overview;
  const bool need_breakdown = summary || Wants(request, "steps") || Wants(request, "pod") ||
                              Wants(request, "overlap") || Wants(request, "stragglers") ||
                              Wants(request, "input") || overview;
  const bool need_comm =
      need_breakdown || Wants(request, "communication") || Wants(request, "allreduce");
  const bool need_steps = need_breakdown || Wants(request, "allreduce") || Wants(request, "gpu") ||
                          overview ||
                          (Wants(request, "temporal") && request.window == WindowMode::kSteps);
  std::vector<WorkerSteps> steps;
  if (need_steps) steps = FindAllSteps(capture, request.steps);
  if (need_comm) results.communication = ComputeCommunication(capture, request.communication);
  if (need_breakdown) results.breakdown = ComputeBreakdown(capture, steps, &*results.communication);
  if (Wants(request, "pod")) {
    results.pod = ComputePodView(*results.breakdown, request.first_step, request.last_step);
  }
  if (Wants(request, "stragglers") || summary) {
    results.stragglers = FindStragglers(capture, steps, *results.communication, *results.breakdown,
                                        request.stragglers);
  }
  if (Wants(request, "allreduce") || summary) {
    results.bandwidth = ComputeBandwidth(capture, steps, *results.communication, request.bandwidth);
  }
  if (Wants(request, "kernels") || overview)
    results.kernels = ComputeTopKernels(capture, request.top_kernels);
  if (Wants(request, "gpu") || overview) {
    results.gpu = ComputeGpuEfficiency(capture, steps, request.first_step, request.last_step);
  }
  if (Wants(request, "operators"))
    results.operators = ComputeOperators(capture, request.top_kernels);
  if (Wants(request, "memory")) results.memory = ComputeMemory(capture);
  if (Wants(request, "input") || overview)
    results.input = ComputeInputPipeline(capture, *results.breakdown);
  if (Wants(request, "temporal")) {
    results.temporal = ComputeTemporal(capture, {.window = request.window, .steps = request.steps},
                                       request.window == WindowMode::kSteps ? &steps : nullptr);
  }
  if (summary) {
    results.summary = Summarize(capture, *results.breakdown, *results.stragglers,
                                *results.bandwidth, results.warnings);
  }
  if (overview) {
    results.overview = ComputeOverview(*results.summary, *results.breakdown, *results.gpu,
                                       *results.kernels, *results.input);
  }
  return results;
}

}  // namespace podscope::coordinator::analysis
