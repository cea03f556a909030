#include "analysis/gpu_efficiency.h"

#include <algorithm>

#include "analysis/occupancy.h"
#include "analysis/parallel_for.h"
#include "analysis/statistics.h"

namespace podscope::analysis {
namespace {

// A stretch of time with the same kernels running (at least one).
struct Segment {
  TimeNs start = 0, end = 0;
  double blocks_per_sm = 0;  // summed over the running kernels whose shape is known
  bool sm_known = false;     // one of them has a known shape
};

struct Edge {
  TimeNs t = 0;
  double blocks_per_sm = 0;
  int count = 0, known = 0;
};

std::vector<Segment> BusySegments(const std::vector<Edge>& sorted_edges) {
  std::vector<Segment> out;
  double blocks = 0;
  int running = 0, known = 0;
  for (size_t i = 0; i < sorted_edges.size(); ++i) {
    blocks += sorted_edges[i].blocks_per_sm;
    running += sorted_edges[i].count;
    known += sorted_edges[i].known;
    if (known == 0) blocks = 0;  // no drift from adding and taking away fractions
    if (i + 1 == sorted_edges.size() || running == 0) continue;
    const TimeNs next = sorted_edges[i + 1].t;
    if (next > sorted_edges[i].t) out.push_back({sorted_edges[i].t, next, blocks, known > 0});
  }
  return out;
}

struct StepWindow {
  Interval span;
  size_t index = 0;  // into WorkerGpu::steps
};

WorkerGpu ForWorker(const common::WorkerTrace& trace, const WorkerSteps& worker_steps,
                    int64_t first_step, int64_t last_step) {
  WorkerGpu out;
  out.rank = trace.info.rank;
  if (!trace.info.devices.empty()) out.device = trace.info.devices.front().name;
  std::vector<StepWindow> windows;
  for (const StepSpan& s : worker_steps.steps) {
    if ((first_step >= 0 && s.number < first_step) || (last_step >= 0 && s.number > last_step))
      continue;
    const Interval span = s.has_device() ? s.device : s.host;
    if (span.length() <= 0) continue;
    windows.push_back({span, out.steps.size()});
    out.steps.push_back({s.number, GpuFigures{.span_ns = span.length()}});
  }
  std::sort(windows.begin(), windows.end(),
            [](const StepWindow& a, const StepWindow& b) { return a.span.start < b.span.start; });

  const common::KernelTable& k = trace.kernels;
  const WorkerOccupancy occupancy(trace.info);
  std::vector<Edge> edges;
  edges.reserve(2 * k.size());
  for (size_t i = 0; i < k.size(); ++i) {
    if (k.kernel_class[i] == common::KernelClass::kSync || k.end[i] <= k.start[i]) continue;
    ++out.kernels;
    const std::optional<Occupancy> o = occupancy.ForKernel(k, i);
    const bool known = o.has_value() && o->limiter != OccupancyLimiter::kInvalid;
    if (!known) ++out.kernels_without_occupancy;
    const double bps = known ? o->blocks_per_sm : 0;
    edges.push_back({k.start[i], bps, 1, known ? 1 : 0});
    edges.push_back({k.end[i], -bps, -1, known ? -1 : 0});
    if (!known) continue;
    // The kernel's time inside each step it overlaps, weighting its occupancy.
    auto w = std::upper_bound(windows.begin(), windows.end(), k.start[i],
                              [](TimeNs t, const StepWindow& s) { return t < s.span.start; });
    while (w != windows.begin() && std::prev(w)->span.end > k.start[i]) --w;
    for (; w != windows.end() && w->span.start < k.end[i]; ++w) {
      const TimeNs inside = std::min(k.end[i], w->span.end) - std::max(k.start[i], w->span.start);
      if (inside <= 0) continue;
      GpuFigures& f = out.steps[w->index].figures;
      f.occupancy_ns += inside;
      f.occupancy_weighted_ns += o->achieved * static_cast<double>(inside);
    }
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.t < b.t; });
  const std::vector<Segment> segments = BusySegments(edges);

  for (const StepWindow& w : windows) {
    GpuFigures& f = out.steps[w.index].figures;
    auto seg = std::upper_bound(segments.begin(), segments.end(), w.span.start,
                                [](TimeNs t, const Segment& s) { return t < s.end; });
    for (; seg != segments.end() && seg->start < w.span.end; ++seg) {
      const TimeNs inside = std::min(seg->end, w.span.end) - std::max(seg->start, w.span.start);
      if (inside <= 0) continue;
      f.busy_ns += inside;
      if (seg->sm_known) {
        f.sm_known = true;
        f.sm_weighted_ns += std::min(seg->blocks_per_sm, 1.0) * static_cast<double>(inside);
      }
    }
  }
  for (StepGpu& s : out.steps) {
    s.figures.Finish();
    out.total.Add(s.figures);
  }
  out.total.Finish();
  return out;
}

// The shared median, or nullopt when no worker has the figure.
std::optional<double> MedianOrNone(const std::vector<double>& values) {
  return values.empty() ? std::nullopt : std::optional<double>(Median(values));
}

}  // namespace

void GpuFigures::Add(const GpuFigures& other) {
  span_ns += other.span_ns;
  busy_ns += other.busy_ns;
  sm_weighted_ns += other.sm_weighted_ns;
  occupancy_weighted_ns += other.occupancy_weighted_ns;
  occupancy_ns += other.occupancy_ns;
  sm_known = sm_known || other.sm_known;
}

void GpuFigures::Finish() {
  const double span = static_cast<double>(span_ns);
  gpu_utilization = span_ns > 0 ? static_cast<double>(busy_ns) / span : 0;
  sm_efficiency =
      sm_known && span_ns > 0 ? std::optional<double>(sm_weighted_ns / span) : std::nullopt;
  achieved_occupancy =
      occupancy_ns > 0
          ? std::optional<double>(occupancy_weighted_ns / static_cast<double>(occupancy_ns))
          : std::nullopt;
}

GpuReport ComputeGpuEfficiency(const common::CaptureView& capture,
                               const std::vector<WorkerSteps>& steps, int64_t first_step,
                               int64_t last_step, size_t least_utilized) {
  std::vector<WorkerGpu> workers(capture.size());
  ParallelFor(capture.size(), [&](size_t w) {
    workers[w] = ComputeWorkerGpu(capture.worker(w), steps[w], first_step, last_step);
  });
  return FinishGpu(std::move(workers), least_utilized);
}

WorkerGpu ComputeWorkerGpu(const common::WorkerTrace& trace, const WorkerSteps& steps,
                           int64_t first_step, int64_t last_step) {
  return ForWorker(trace, steps, first_step, last_step);
}

GpuReport FinishGpu(std::vector<WorkerGpu> workers, size_t least_utilized) {
  GpuReport report;
  report.workers = std::move(workers);
  std::sort(report.workers.begin(), report.workers.end(),
            [](const WorkerGpu& a, const WorkerGpu& b) { return a.rank < b.rank; });
  std::vector<double> utilization, sm, occupancy;
  std::vector<const WorkerGpu*> measured;
  for (const WorkerGpu& w : report.workers) {
    if (w.total.span_ns <= 0) continue;
    measured.push_back(&w);
    utilization.push_back(w.total.gpu_utilization);
    if (w.total.sm_efficiency) sm.push_back(*w.total.sm_efficiency);
    if (w.total.achieved_occupancy) occupancy.push_back(*w.total.achieved_occupancy);
  }
  report.pod.median_gpu_utilization = MedianOrNone(utilization);
  report.pod.median_sm_efficiency = MedianOrNone(sm);
  report.pod.median_achieved_occupancy = MedianOrNone(occupancy);
  std::stable_sort(measured.begin(), measured.end(), [](const WorkerGpu* a, const WorkerGpu* b) {
    return a->total.gpu_utilization < b->total.gpu_utilization;
  });
  for (size_t i = 0; i < measured.size() && i < least_utilized; ++i)
    report.pod.least_utilized.push_back(measured[i]->rank);
  return report;
}

}  // namespace podscope::analysis
