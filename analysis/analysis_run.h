// Runs the requested analyses over one capture, computing shared inputs (wait vs transfer,
// the breakdown) once. Used by `podscope analyze` and, later, the REST API.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/breakdown.h"
#include "analysis/collective_bandwidth.h"
#include "analysis/communication.h"
#include "analysis/gpu_efficiency.h"
#include "analysis/input_pipeline.h"
#include "analysis/job_check.h"
#include "analysis/memory.h"
#include "analysis/operators.h"
#include "analysis/overview.h"
#include "analysis/pod_view.h"
#include "analysis/stragglers.h"
#include "analysis/summary.h"
#include "analysis/temporal.h"
#include "analysis/top_kernels.h"
#include "common/worker_source.h"

namespace podscope::analysis {

// Report names, in the order `all` lists them.
inline constexpr std::string_view kReportNames[] = {
    "summary",   "overview", "steps", "pod",       "overlap", "communication", "stragglers",
    "allreduce", "kernels",  "gpu",   "operators", "memory",  "input",         "temporal"};

struct AnalysisRequest {
  std::vector<std::string> reports;  // names from kReportNames
  WindowMode window = WindowMode::kSteps;
  StepOptions steps;
  CommunicationOptions communication;
  BandwidthOptions bandwidth;
  StragglerOptions stragglers;
  size_t top_kernels = 20;  // kernels and operators kept per list
  int64_t first_step = -1, last_step = -1;
  // The long tables (steps, overlap, pod): only these ranks (empty: all), worst workers (most own
  // time per step: the step less its wait for other ranks) first, at most top_workers of them
  // (0: all).
  std::vector<int32_t> ranks;
  size_t top_workers = 20;
  bool wide_names = false;   // tables: kernel and operator names whole, not cut to their column
  bool allow_mixed = false;  // analyse inputs that are not one job (job_check.h) all the same
  // JSON only: one entry per worker and nothing per step or per collective (pod: the worker x
  // step matrix without the rows; overlap: each worker's totals; communication: no collectives;
  // kernels and operators: the pod-wide list alone; gpu and input: each worker's totals;
  // memory: no timelines), what a page of 1024 workers can load at once.
  bool workers_only = false;
};

struct AnalysisResults {
  std::vector<std::string> warnings;  // the inputs are not one whole job (job_check.h)
  std::optional<CommunicationReport> communication;
  std::optional<std::vector<WorkerBreakdown>> breakdown;
  std::optional<PodView> pod;
  std::optional<StragglerReport> stragglers;
  std::optional<BandwidthReport> bandwidth;
  std::optional<KernelReport> kernels;
  std::optional<GpuReport> gpu;
  std::optional<OperatorReport> operators;
  std::optional<MemoryReport> memory;
  std::optional<InputReport> input;
  std::optional<OverviewReport> overview;
  std::optional<TemporalReport> temporal;
  std::optional<SummaryReport> summary;
};

// Expands "all" and checks names and options; errors are InvalidArgument naming the problem.
absl::Status ValidateRequest(AnalysisRequest* request);
bool Wants(const AnalysisRequest& request, std::string_view report);

// Pure; any thread. The request must be validated.
AnalysisResults RunAnalyses(const common::CaptureView& capture, const AnalysisRequest& request);

// RunAnalyses over workers read one at a time, holding one worker's events at once: the results
// are RunAnalyses' on the whole capture, from the same code. The reports each worker's events
// make alone (kernels, gpu, operators, memory, temporal) take one pass; the cross-worker ones
// gather small tables in that pass (each worker's steps, collectives and host samples; `tables`
// gets them, with every worker's description, for the job check and the renderers) and match
// collectives from them, then a second pass breaks each worker's steps down with its waits, and a
// third, only when there are stragglers, finds what lies behind them and what they cost.
// `stop` is asked before each worker is read: true ends the work with Cancelled (a worker of a
// real rank takes well under a second). It may be asked from the calling thread only.
absl::StatusOr<AnalysisResults> RunAnalysesByWorker(common::WorkerSource& source,
                                                    const AnalysisRequest& request,
                                                    common::Capture* tables,
                                                    const std::function<bool()>& stop = {});

}  // namespace podscope::analysis
