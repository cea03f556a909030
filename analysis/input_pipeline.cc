#include "analysis/input_pipeline.h"

#include <algorithm>

#include "analysis/statistics.h"

namespace podscope::analysis {
namespace {

InputVerdict Verdict(double share, const InputOptions& o) {
  if (share > o.high_share) return InputVerdict::kHighly;
  if (share > o.moderate_share) return InputVerdict::kModerately;
  return InputVerdict::kNotInputBound;
}

// The dataloader spans of one worker, as a set.
IntervalSet DataloaderSpans(const common::WorkerTrace& t) {
  IntervalSet out;
  const common::HostSpanTable& h = t.host_spans;
  for (size_t i = 0; i < h.size(); ++i) {
    if (h.category[i] == common::HostSpanCategory::kInput) out.push_back({h.start[i], h.end[i]});
  }
  Normalize(&out);
  return out;
}

}  // namespace

std::string_view InputVerdictName(InputVerdict verdict) {
  switch (verdict) {
    case InputVerdict::kNotInputBound:
      return "not input-bound";
    case InputVerdict::kModerately:
      return "moderately input-bound";
    case InputVerdict::kHighly:
      return "highly input-bound";
  }
  return "not input-bound";
}

WorkerInput ComputeWorkerInput(const common::WorkerTrace& trace, const WorkerBreakdown& breakdown,
                               const InputOptions& options) {
  const IntervalSet dataloader = DataloaderSpans(trace);
  WorkerInput out;
  out.rank = breakdown.rank;
  for (const StepBreakdown& s : breakdown.steps) {
    StepInput step;
    step.step = s.step;
    step.step_ns = s.span_ns + s.before_ns;
    step.input_wait_ns = s.idle_input_ns + s.before_input_ns;
    step.dataloader_ns = TotalLength(Clip(dataloader, s.span.start - s.before_ns, s.span.end));
    out.step_ns += step.step_ns;
    out.input_wait_ns += step.input_wait_ns;
    out.dataloader_ns += step.dataloader_ns;
    out.steps.push_back(step);
  }
  out.input_share = out.step_ns > 0
                        ? static_cast<double>(out.input_wait_ns) / static_cast<double>(out.step_ns)
                        : 0;
  out.verdict = Verdict(out.input_share, options);
  return out;
}

InputReport ComputeInputPipeline(const common::CaptureView& capture,
                                 const std::vector<WorkerBreakdown>& breakdown,
                                 const InputOptions& options) {
  std::vector<WorkerInput> workers;
  for (size_t w = 0; w < breakdown.size() && w < capture.size(); ++w)
    workers.push_back(ComputeWorkerInput(capture.worker(w), breakdown[w], options));
  return FinishInput(std::move(workers), options);
}

InputReport FinishInput(std::vector<WorkerInput> workers, const InputOptions& options) {
  InputReport report;
  report.options = options;
  report.workers = std::move(workers);
  std::vector<double> shares;
  for (const WorkerInput& w : report.workers) {
    if (w.step_ns > 0) shares.push_back(w.input_share);
  }
  std::sort(report.workers.begin(), report.workers.end(),
            [](const WorkerInput& a, const WorkerInput& b) { return a.rank < b.rank; });
  if (!shares.empty()) report.median_input_share = Median(shares);
  std::vector<const WorkerInput*> bound;
  for (const WorkerInput& w : report.workers) {
    if (w.verdict != InputVerdict::kNotInputBound) bound.push_back(&w);
  }
  std::stable_sort(bound.begin(), bound.end(), [](const WorkerInput* a, const WorkerInput* b) {
    return a->input_share > b->input_share;
  });
  for (const WorkerInput* w : bound) report.input_bound.push_back(w->rank);
  return report;
}

}  // namespace podscope::analysis
