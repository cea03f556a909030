#include "analysis/analysis_run.h"

#include <algorithm>
#include <cmath>

#include "analysis/parallel_for.h"
#include "common/status_macros.h"
#include "common/step_pattern.h"
#include "common/str_util.h"

namespace podscope::analysis {

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
  if (!std::isfinite(request->bandwidth.link_gbytes_per_s) ||
      request->bandwidth.link_gbytes_per_s < 0) {
    return absl::InvalidArgumentError("link bandwidth must be a finite number >= 0");
  }
  if (request->bandwidth.params < 0)
    return absl::InvalidArgumentError("parameter count must be >= 0");
  if (request->bandwidth.bytes_per_param <= 0 || request->bandwidth.bytes_per_param > 16) {
    return absl::InvalidArgumentError("bytes per parameter must be in 1..16");
  }
  return absl::OkStatus();
}

namespace {

// What a request needs computed, the reports it names and what they are built from.
struct Needs {
  bool overview, summary, breakdown, communication, steps;
};
Needs NeedsOf(const AnalysisRequest& request) {
  Needs n;
  n.overview = Wants(request, "overview");
  n.summary = Wants(request, "summary") || n.overview;
  n.breakdown = n.summary || Wants(request, "steps") || Wants(request, "pod") ||
                Wants(request, "overlap") || Wants(request, "stragglers") ||
                Wants(request, "input") || n.overview;
  n.communication = n.breakdown || Wants(request, "communication") || Wants(request, "allreduce");
  n.steps = n.breakdown || Wants(request, "allreduce") || Wants(request, "gpu") || n.overview ||
            (Wants(request, "temporal") && request.window == WindowMode::kSteps);
  return n;
}

}  // namespace

AnalysisResults RunAnalyses(const common::CaptureView& capture, const AnalysisRequest& request) {
  AnalysisResults results;
  results.warnings = CheckOneJob(capture).warnings;
  const Needs needs = NeedsOf(request);
  const bool overview = needs.overview, summary = needs.summary, need_breakdown = needs.breakdown,
             need_comm = needs.communication, need_steps = needs.steps;
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
  std::optional<ParallelismReport> parallelism;
  CastCopies casts;
  if (overview) {
    parallelism = ComputeParallelism(capture, steps);
    std::vector<CastCopies> each(capture.size());
    ParallelFor(capture.size(),
                [&](size_t w) { each[w] = ComputeWorkerCastCopies(capture.worker(w)); });
    for (const CastCopies& c : each) casts += c;
  }
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
                                       *results.kernels, *results.input, &*parallelism, &casts);
  }
  return results;
}

namespace {

// What the cross-worker reports read of a worker besides its steps: its description, clock,
// collectives and host samples, with only the names the collectives use (a worker's whole name
// table, every kernel's and marker's, would be most of what the tables hold at 1024 workers).
common::WorkerTrace Tables(const common::WorkerTrace& trace) {
  common::WorkerTrace out;
  out.info = trace.info;
  out.clock = trace.clock;
  out.collectives = trace.collectives;
  out.host_samples = trace.host_samples;
  common::CollectiveTable& c = out.collectives;
  for (std::vector<common::NameId>* names :
       {&c.communicator, &c.dtype, &c.algorithm, &c.protocol}) {
    for (common::NameId& id : *names) id = out.strings.Intern(trace.strings.Get(id));
  }
  return out;
}

// A later pass over the workers met a worker the first did not.
absl::Status Changed() {
  return absl::UnavailableError("the capture's workers changed while they were read; try again");
}

// Whether a later pass's worker is the one the first pass read as the view's w-th.
bool Same(const common::CaptureView& view, size_t w, const common::WorkerTrace& trace) {
  return w < view.size() && view.worker(w).info.rank == trace.info.rank &&
         view.worker(w).collectives.size() == trace.collectives.size();
}

// A source whose visits stop, with Cancelled, once `stop` says so.
class CancellableWorkers final : public common::WorkerSource {
 public:
  CancellableWorkers(common::WorkerSource& source, const std::function<bool()>& stop)
      : source_(source), stop_(stop) {}
  absl::Status ForEachWorker(
      const std::function<absl::Status(const common::WorkerTrace& trace)>& visit) override {
    return source_.ForEachWorker([&](const common::WorkerTrace& trace) {
      if (stop_ && stop_()) return absl::CancelledError("the analysis was cancelled");
      return visit(trace);
    });
  }

 private:
  common::WorkerSource& source_;
  const std::function<bool()>& stop_;
};

}  // namespace

absl::StatusOr<AnalysisResults> RunAnalysesByWorker(common::WorkerSource& source,
                                                    const AnalysisRequest& request,
                                                    common::Capture* tables,
                                                    const std::function<bool()>& stop) {
  CancellableWorkers workers(source, stop);
  const Needs needs = NeedsOf(request);
  const bool overview = needs.overview, summary = needs.summary, need_breakdown = needs.breakdown,
             need_comm = needs.communication, need_steps = needs.steps;
  const bool kernels = Wants(request, "kernels") || overview,
             gpu = Wants(request, "gpu") || overview, operators = Wants(request, "operators"),
             memory = Wants(request, "memory"), temporal = Wants(request, "temporal"),
             input = Wants(request, "input") || overview,
             stragglers = Wants(request, "stragglers") || summary,
             bandwidth = Wants(request, "allreduce") || summary;
  const TemporalOptions temporal_options{.window = request.window, .steps = request.steps};

  // Pass 1: the reports each worker's events make alone, each worker's steps (their spans), and
  // the tables the cross-worker reports read.
  KernelFold kernel_fold(request.top_kernels);
  std::vector<WorkerGpu> gpus;
  std::vector<WorkerOperatorStats> operator_stats;
  std::vector<std::optional<WorkerMemory>> memories;
  std::vector<WorkerSteps> steps;
  std::vector<std::vector<CommunicatorUse>> communicators;
  CastCopies casts;
  AnalysisResults results;
  if (temporal) results.temporal.emplace().window = request.window;
  tables->workers.clear();
  RETURN_IF_ERROR(workers.ForEachWorker([&](const common::WorkerTrace& trace) {
    tables->workers.push_back(Tables(trace));
    WorkerSteps worker_steps = need_steps ? FindSteps(trace, request.steps) : WorkerSteps();
    if (kernels) kernel_fold.Add(trace);
    if (gpu) {
      gpus.push_back(ComputeWorkerGpu(trace, worker_steps, request.first_step, request.last_step));
    }
    if (operators) operator_stats.push_back(ComputeWorkerOperators(trace));
    if (overview) {
      communicators.push_back(ComputeWorkerCommunicators(trace, worker_steps));
      casts += ComputeWorkerCastCopies(trace);
    }
    if (memory) memories.push_back(ComputeWorkerMemory(trace));
    if (temporal) {
      results.temporal->workers.push_back(ComputeWorkerTemporal(
          trace, temporal_options, request.window == WindowMode::kSteps ? &worker_steps : nullptr));
    }
    if (need_steps) {
      // The per-row step indices are a worker's events' size; only the replay needs them.
      std::vector<int32_t>().swap(worker_steps.kernel_step);
      std::vector<int32_t>().swap(worker_steps.memcpy_step);
      steps.push_back(std::move(worker_steps));
    }
    return absl::OkStatus();
  }));
  const common::CaptureView view(*tables);
  const size_t n = view.size();
  // The per-worker results are in the order the source gave; the view's must be the same.
  for (size_t w = 1; w < n; ++w) {
    if (tables->workers[w].info.rank < tables->workers[w - 1].info.rank) {
      return absl::InternalError("the capture's workers were not read in rank order");
    }
  }
  const JobCheck job = CheckOneJob(view);
  results.warnings = job.warnings;
  if (job.mixed && !request.allow_mixed) {
    // Refused before the passes that would cost the most.
    std::string why;
    for (const std::string& w : job.warnings) common::StrAppend(&why, why.empty() ? "" : "; ", w);
    return absl::FailedPreconditionError(
        common::StrCat("not one job: ", why, " (allow_mixed=true to analyse it anyway)"));
  }
  if (need_comm) results.communication = ComputeCommunication(view, request.communication);

  // Pass 2: what needs each collective's wait: the breakdown, and the input report from it.
  if (need_breakdown) {
    std::vector<WorkerBreakdown> breakdown;
    std::vector<WorkerInput> inputs;
    RETURN_IF_ERROR(workers.ForEachWorker([&](const common::WorkerTrace& trace) {
      const size_t w = breakdown.size();
      if (!Same(view, w, trace)) return Changed();
      breakdown.push_back(ComputeWorkerBreakdown(trace, steps[w], &results.communication->wait[w]));
      if (input) inputs.push_back(ComputeWorkerInput(trace, breakdown.back()));
      return absl::OkStatus();
    }));
    if (breakdown.size() != n) return Changed();
    results.breakdown = std::move(breakdown);
    if (input) results.input = FinishInput(std::move(inputs));
  }
  if (Wants(request, "pod")) {
    results.pod = ComputePodView(*results.breakdown, request.first_step, request.last_step);
  }
  if (stragglers) {
    results.stragglers = FindStragglersFromTables(view, steps, *results.communication,
                                                  *results.breakdown, request.stragglers);
  }
  // Pass 3, only when there are stragglers: the names behind their categories, and the replay
  // that finds what they cost.
  if (stragglers && !results.stragglers->stragglers.empty()) {
    std::vector<WorkerNameTimes> names;
    StepReplay replay(*results.communication);
    RETURN_IF_ERROR(workers.ForEachWorker([&](const common::WorkerTrace& trace) {
      const size_t w = names.size();
      if (!Same(view, w, trace)) return Changed();
      names.push_back(TimeByNameFor(trace, steps[w], *results.stragglers));
      replay.AddWorker(trace, FindSteps(trace, request.steps));
      return absl::OkStatus();
    }));
    if (names.size() != n) return Changed();
    AddNamedExcess(names, &*results.stragglers);
    AddStepTimeLoss(replay, &*results.stragglers);
  }
  if (bandwidth) {
    results.bandwidth = ComputeBandwidth(view, steps, *results.communication, request.bandwidth);
  }
  if (kernels) results.kernels = kernel_fold.Finish();
  if (gpu) results.gpu = FinishGpu(std::move(gpus));
  if (operators)
    results.operators = FinishOperators(std::move(operator_stats), request.top_kernels);
  if (memory) results.memory = FinishMemory(std::move(memories));
  if (summary) {
    results.summary = Summarize(view, *results.breakdown, *results.stragglers, *results.bandwidth,
                                results.warnings);
  }
  if (overview) {
    const ParallelismReport parallelism = FinishParallelism(std::move(communicators));
    results.overview = ComputeOverview(*results.summary, *results.breakdown, *results.gpu,
                                       *results.kernels, *results.input, &parallelism, &casts);
  }
  return results;
}

}  // namespace podscope::analysis
