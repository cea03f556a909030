#include "coordinator/analysis/stragglers.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "coordinator/analysis/steps.h"

namespace podscope::coordinator::analysis {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Robust z-scores: 0.6745 (x - median) / MAD.
std::vector<double> RobustZ(const std::vector<double>& x) {
  const double med = Median(x);
  std::vector<double> dev;
  for (double v : x) dev.push_back(std::fabs(v - med));
  const double mad = Median(dev);
  std::vector<double> z(x.size(), 0.0);
  if (mad <= 0) return z;
  for (size_t i = 0; i < x.size(); ++i) z[i] = 0.6745 * (x[i] - med) / mad;
  return z;
}

struct MeanBreakdown {
  double compute = 0, input = 0, launch = 0, host = 0, step = 0;
};

MeanBreakdown MeanOf(const WorkerBreakdown& b) {
  MeanBreakdown m;
  if (b.steps.empty()) return m;
  for (const StepBreakdown& s : b.steps) {
    m.compute += static_cast<double>(s.compute_ns + s.overlap_ns);
    m.step += static_cast<double>(s.span_ns);
  }
  const double n = static_cast<double>(b.steps.size());
  m.compute /= n;
  m.step /= n;
  return m;
}

// Host-side time per step, averaged over the worker's steps: input (dataloader spans), launch
// (CUDA calls that launch work; synchronisation calls are waiting, not work) and other host
// work (operator spans minus the two). Measured over the host step, since input-bound time
// usually lies before the step's first device activity.
void AddHostProfile(const common::WorkerTrace& w, const WorkerSteps& steps, MeanBreakdown* m) {
  if (steps.steps.empty()) return;
  IntervalSet input, launch, ops;
  for (size_t i = 0; i < w.host_spans.size(); ++i) {
    const common::HostSpanCategory c = w.host_spans.category[i];
    if (c == common::HostSpanCategory::kInput) input.push_back({w.host_spans.start[i], w.host_spans.end[i]});
    if (c == common::HostSpanCategory::kOp || c == common::HostSpanCategory::kOptimizer ||
        c == common::HostSpanCategory::kPython) {
      ops.push_back({w.host_spans.start[i], w.host_spans.end[i]});
    }
  }
  for (size_t i = 0; i < w.runtime_calls.size(); ++i) {
    if (w.runtime_calls.correlation[i] >= 0) launch.push_back({w.runtime_calls.start[i], w.runtime_calls.end[i]});
  }
  Normalize(&input);
  Normalize(&launch);
  Normalize(&ops);
  const IntervalSet other = Subtract(Subtract(ops, input), launch);
  double in = 0, la = 0, ho = 0;
  for (const StepSpan& s : steps.steps) {
    in += static_cast<double>(TotalLength(Clip(input, s.host.start, s.host.end)));
    la += static_cast<double>(TotalLength(Clip(launch, s.host.start, s.host.end)));
    ho += static_cast<double>(TotalLength(Clip(other, s.host.start, s.host.end)));
  }
  const double n = static_cast<double>(steps.steps.size());
  m->input = in / n;
  m->launch = la / n;
  m->host = ho / n;
}

}  // namespace

StragglerReport FindStragglers(const common::CaptureView& capture,
                               const std::vector<WorkerSteps>& steps,
                               const CommunicationReport& communication,
                               const std::vector<WorkerBreakdown>& breakdown,
                               const StragglerOptions& options) {
  StragglerReport report;
  report.aligned = communication.aligned;
  report.clock_error_bound_ns = communication.clock_error_bound_ns;
  const size_t n = capture.size();
  report.workers.resize(n);
  std::vector<std::set<int64_t>> late_steps(n);
  for (size_t w = 0; w < n; ++w) {
    report.workers[w].rank = capture.worker(w).info.rank;
    report.workers[w].host = capture.worker(w).info.host;
  }

  // Caused delay: the last arriver held everyone else for (its arrival - the second last).
  // Arrival order is read from waits, which also holds for the min-duration fallback.
  for (const MatchedCollective& m : communication.collectives) {
    if (m.participants.size() < 2) continue;
    const Participant* last = nullptr;
    const Participant* second = nullptr;
    for (const Participant& p : m.participants) {
      ++report.workers[p.worker].collectives;
      if (last == nullptr || p.wait < last->wait) {
        second = last;
        last = &p;
      } else if (second == nullptr || p.wait < second->wait) {
        second = &p;
      }
    }
    const TimeNs caused = second->wait - last->wait;
    WorkerLateness& l = report.workers[last->worker];
    ++l.last_arrivals;
    l.caused_delay_ns += caused;
    report.total_caused_delay_ns += caused;
    if (caused > 0) {
      // The step this collective belongs to, on the last arriver.
      const common::WorkerTrace& trace = capture.worker(last->worker);
      const TimeNs at = trace.collectives.enqueue[last->row];
      for (const StepSpan& s : steps[last->worker].steps) {
        if (s.host.start <= at && at < s.host.end) late_steps[last->worker].insert(s.number);
      }
    }
  }

  // Per-worker step means, and the compute outlier score.
  std::vector<MeanBreakdown> mean(n);
  std::vector<double> compute(n), step_sum(n);
  for (size_t w = 0; w < n && w < breakdown.size(); ++w) {
    mean[w] = MeanOf(breakdown[w]);
    AddHostProfile(capture.worker(w), steps[w], &mean[w]);
    compute[w] = mean[w].compute;
    for (const StepBreakdown& s : breakdown[w].steps) step_sum[w] += static_cast<double>(s.span_ns);
    report.workers[w].mean_step_ns = static_cast<TimeNs>(mean[w].step);
  }
  const std::vector<double> z = RobustZ(compute);
  const double median_compute = Median(compute);
  report.window_step_time_ns = static_cast<TimeNs>(Median(step_sum));
  MeanBreakdown median_worker;
  {
    std::vector<double> c, i, l, h;
    for (const MeanBreakdown& m : mean) {
      c.push_back(m.compute);
      i.push_back(m.input);
      l.push_back(m.launch);
      h.push_back(m.host);
    }
    median_worker = {Median(c), Median(i), Median(l), Median(h), 0};
  }

  // With few workers everyone holds a large fair share of the caused delay: require clearly
  // more than the fair share (1.5/N, at most 60%).
  const double min_share_caused =
      std::max(options.min_share_of_caused_delay, n > 0 ? std::min(0.6, 1.5 / n) : 1.0);
  for (size_t w = 0; w < n; ++w) {
    WorkerLateness& l = report.workers[w];
    l.last_arriver_share = l.collectives ? static_cast<double>(l.last_arrivals) / l.collectives : 0;
    l.compute_z = w < z.size() ? z[w] : 0;
    const double share_caused = report.total_caused_delay_ns > 0
                                    ? static_cast<double>(l.caused_delay_ns) / report.total_caused_delay_ns
                                    : 0;
    const double share_step = report.window_step_time_ns > 0
                                  ? static_cast<double>(l.caused_delay_ns) / report.window_step_time_ns
                                  : 0;
    const bool by_delay = share_caused >= min_share_caused &&
                          share_step >= options.min_share_of_step_time &&
                          l.last_arriver_share >= options.min_last_arriver_share;
    const bool by_compute = l.compute_z >= options.compute_z_threshold &&
                            median_compute > 0 &&
                            compute[w] >= median_compute * (1 + options.min_compute_excess);
    if (!by_delay && !by_compute) continue;

    Straggler s;
    s.rank = l.rank;
    s.host = l.host;
    s.caused_delay_ns = l.caused_delay_ns;
    s.last_arriver_share = l.last_arriver_share;
    s.steps.assign(late_steps[w].begin(), late_steps[w].end());
    s.reason = by_delay ? "caused_delay" : "compute_outlier";
    s.clock_error_bound_ns = report.clock_error_bound_ns;
    s.compute_z = l.compute_z;
    // Where the extra time went: the largest excess over the median worker.
    const std::pair<double, const char*> excess[] = {
        {mean[w].compute - median_worker.compute, "compute"},
        {mean[w].input - median_worker.input, "input"},
        {mean[w].launch - median_worker.launch, "launch"},
        {mean[w].host - median_worker.host, "host"},
    };
    s.category = std::max_element(std::begin(excess), std::end(excess))->second;
    const common::HostSampleTable& hs = capture.worker(w).host_samples;
    if (hs.size() > 0) {
      s.max_cpu_percent = *std::max_element(hs.cpu_percent.begin(), hs.cpu_percent.end());
      // 0 is "not read" (no NVML on that node), not a stopped GPU.
      for (int32_t mhz : hs.gpu_sm_clock_mhz) {
        if (mhz > 0 && (s.min_gpu_sm_clock_mhz <= 0 || mhz < s.min_gpu_sm_clock_mhz)) s.min_gpu_sm_clock_mhz = mhz;
      }
      for (uint64_t r : hs.gpu_throttle_reasons) s.gpu_throttle_reasons |= r;
    }
    report.stragglers.push_back(std::move(s));
  }
  std::sort(report.stragglers.begin(), report.stragglers.end(),
            [](const Straggler& a, const Straggler& b) { return a.caused_delay_ns > b.caused_delay_ns; });
  return report;
}

}  // namespace podscope::coordinator::analysis
