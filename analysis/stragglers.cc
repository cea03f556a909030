#include "analysis/stragglers.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <set>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "analysis/statistics.h"
#include "analysis/steps.h"

namespace podscope::analysis {
namespace {

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

// The partition's categories a straggler's extra time is named by. Compute and
// overlap count as one, the time computation kernels ran: a straggler waits less at collectives,
// so less of its communication hides behind computation and its overlap turns into compute
// without any computation growing.
enum Category : size_t {
  kComputeKernels,
  kCommTransfer,
  kCommWait,
  kMemcpy,
  kIdleInput,
  kIdleLaunch,
  kIdleHost,
  kIdleOther,
  kCategoryCount,
};
constexpr const char* kCategoryNames[kCategoryCount] = {
    "compute+overlap", "comm_transfer", "comm_wait", "memcpy",
    "idle_input",      "idle_launch",   "idle_host", "idle_other"};
using CategoryMeans = std::array<double, kCategoryCount>;

// Per step, as the steps report partitions it; the idle categories take in the device idle
// before each step's span too (an input-bound worker's dataloader runs there).
CategoryMeans MeansOf(const WorkerBreakdown& b) {
  CategoryMeans m{};
  if (b.steps.empty()) return m;
  for (const StepBreakdown& s : b.steps) {
    m[kComputeKernels] += static_cast<double>(s.compute_ns + s.overlap_ns);
    m[kCommTransfer] += static_cast<double>(s.comm_transfer_ns);
    m[kCommWait] += static_cast<double>(s.comm_wait_ns);
    m[kMemcpy] += static_cast<double>(s.memcpy_ns);
    m[kIdleInput] += static_cast<double>(s.idle_input_ns + s.before_input_ns);
    m[kIdleLaunch] += static_cast<double>(s.idle_launch_ns + s.before_launch_ns);
    m[kIdleHost] += static_cast<double>(s.idle_host_ns + s.before_host_ns);
    m[kIdleOther] += static_cast<double>(s.idle_other_ns + s.before_other_ns);
  }
  for (double& v : m) v /= static_cast<double>(b.steps.size());
  return m;
}

// Time per step by name of what lies behind a category: kernels for the device categories,
// host operators, input spans or CUDA calls for the idle ones. Counted over the worker's steps.
NameTimes TimeByName(const common::WorkerTrace& w, const WorkerSteps& steps, Category category) {
  NameTimes out;
  if (steps.steps.empty()) return out;
  absl::flat_hash_map<common::NameId, double> by_id;
  TimeNs from = INT64_MAX, to = INT64_MIN;
  for (const StepSpan& s : steps.steps) {
    from = std::min({from, s.host.start, s.has_device() ? s.device.start : INT64_MAX});
    to = std::max({to, s.host.end, s.has_device() ? s.device.end : INT64_MIN});
  }
  auto add = [&](common::NameId name, TimeNs start, TimeNs end) {
    if (start >= from && start < to && end > start) by_id[name] += static_cast<double>(end - start);
  };
  switch (category) {
    case kComputeKernels:
    case kCommTransfer:
    case kCommWait: {
      const bool compute = category == kComputeKernels;
      const common::KernelTable& k = w.kernels;
      for (size_t i = 0; i < k.size(); ++i) {
        if ((k.kernel_class[i] == common::KernelClass::kCompute) == compute &&
            k.kernel_class[i] != common::KernelClass::kSync) {
          add(k.name[i], k.start[i], k.end[i]);
        }
      }
      break;
    }
    case kMemcpy:
      for (size_t i = 0; i < w.memcpys.size(); ++i)
        add(w.memcpys.name[i], w.memcpys.start[i], w.memcpys.end[i]);
      break;
    case kIdleInput:
    case kIdleHost:
      for (size_t i = 0; i < w.host_spans.size(); ++i) {
        const common::HostSpanCategory c = w.host_spans.category[i];
        const bool input = c == common::HostSpanCategory::kInput;
        const bool op = c == common::HostSpanCategory::kOp ||
                        c == common::HostSpanCategory::kOptimizer ||
                        c == common::HostSpanCategory::kPython;
        if (category == kIdleInput ? input : op)
          add(w.host_spans.name[i], w.host_spans.start[i], w.host_spans.end[i]);
      }
      break;
    case kIdleLaunch:
      for (size_t i = 0; i < w.runtime_calls.size(); ++i) {
        add(w.runtime_calls.name[i], w.runtime_calls.start[i], w.runtime_calls.end[i]);
      }
      break;
    case kIdleOther:
    case kCategoryCount:
      break;
  }
  for (const auto& [name, total] : by_id) {
    out[std::string(w.strings.Get(name))] += total / static_cast<double>(steps.steps.size());
  }
  return out;
}

// The three names that grew most on worker `w` against the median worker, from every worker's
// time by name in that category.
std::vector<NamedExcess> TopExcess(const std::vector<const NameTimes*>& by_worker, size_t w) {
  std::vector<NamedExcess> top;
  if (w >= by_worker.size()) return top;
  for (const auto& [name, mine] : *by_worker[w]) {
    std::vector<double> all;
    all.reserve(by_worker.size());
    for (const NameTimes* other : by_worker) {
      auto it = other->find(name);
      all.push_back(it == other->end() ? 0.0 : it->second);
    }
    const double median = Median(std::move(all));
    if (mine > median)
      top.push_back({name, static_cast<TimeNs>(mine), static_cast<TimeNs>(median)});
  }
  std::sort(top.begin(), top.end(), [](const NamedExcess& a, const NamedExcess& b) {
    const TimeNs ea = a.worker_ns - a.median_ns, eb = b.worker_ns - b.median_ns;
    return ea != eb ? ea > eb : a.name < b.name;
  });
  if (top.size() > 3) top.resize(3);
  return top;
}

}  // namespace

void AddStepTimeLoss(const StepReplay& replay, StragglerReport* report) {
  if (report->stragglers.empty()) return;
  std::vector<uint32_t> all;
  for (Straggler& s : report->stragglers) {
    all.push_back(s.worker);
    absl::StatusOr<StepTimeLoss> loss = replay.LossOf({s.worker});
    if (!loss.ok()) {
      report->loss_error = std::string(loss.status().message());
      return;
    }
    s.step_time_loss_ns = loss->loss_ns;
    s.step_losses = std::move(loss->steps);
  }
  if (all.size() == 1) {
    report->step_time_loss_ns = report->stragglers[0].step_time_loss_ns;
    return;
  }
  absl::StatusOr<StepTimeLoss> joint = replay.LossOf(all);
  if (joint.ok()) {
    report->step_time_loss_ns = joint->loss_ns;
  } else {
    report->loss_error = std::string(joint.status().message());
  }
}

double MinShareOfCausedDelay(size_t workers, double configured) {
  return std::max(configured,
                  workers > 0 ? std::min(0.6, 1.5 / static_cast<double>(workers)) : 1.0);
}

bool IsCausedDelayStraggler(double share_of_caused_delay, double share_of_step_time,
                            double last_arriver_share, size_t workers,
                            const StragglerOptions& options) {
  return share_of_caused_delay >=
             MinShareOfCausedDelay(workers, options.min_share_of_caused_delay) &&
         share_of_step_time >= options.min_share_of_step_time &&
         last_arriver_share >= options.min_last_arriver_share;
}

namespace {

// Caused delay: the last arriver held everyone else for (its arrival - the second last).
// Arrival order is read from waits, which also holds for the min-duration fallback. Also counts
// each worker's collectives and last arrivals, and the steps in which it arrived last and late.
void CountCausedDelay(const common::CaptureView& capture, const std::vector<WorkerSteps>& steps,
                      const CommunicationReport& communication, StragglerReport* report,
                      std::vector<std::set<int64_t>>* late_steps) {
  for (const MatchedCollective& m : communication.collectives) {
    if (m.participants.size() < 2) continue;
    const Participant* last = nullptr;
    const Participant* second = nullptr;
    for (const Participant& p : m.participants) {
      ++report->workers[p.worker].collectives;
      if (last == nullptr || p.wait < last->wait) {
        second = last;
        last = &p;
      } else if (second == nullptr || p.wait < second->wait) {
        second = &p;
      }
    }
    const TimeNs caused = second->wait - last->wait;
    WorkerLateness& l = report->workers[last->worker];
    ++l.last_arrivals;
    l.caused_delay_ns += caused;
    report->total_caused_delay_ns += caused;
    if (caused > 0) {
      // The step this collective belongs to, on the last arriver.
      const common::WorkerTrace& trace = capture.worker(last->worker);
      const TimeNs at = trace.collectives.enqueue[last->row];
      for (const StepSpan& s : steps[last->worker].steps) {
        if (s.host.start <= at && at < s.host.end) (*late_steps)[last->worker].insert(s.number);
      }
    }
  }
}

// Per-worker step means by partition category, the median worker's, and the compute outlier
// score (on compute kernel time per step: compute + overlap).
struct WorkerMeans {
  std::vector<CategoryMeans> mean;
  std::vector<double> compute, step_sum, z;
  CategoryMeans median_worker{};
  double median_compute = 0;
};

WorkerMeans ComputeMeans(const std::vector<WorkerBreakdown>& breakdown, size_t n,
                         StragglerReport* report) {
  WorkerMeans m;
  m.mean.assign(n, CategoryMeans{});
  m.compute.assign(n, 0);
  m.step_sum.assign(n, 0);
  for (size_t w = 0; w < n && w < breakdown.size(); ++w) {
    m.mean[w] = MeansOf(breakdown[w]);
    m.compute[w] = m.mean[w][kComputeKernels];
    for (const StepBreakdown& s : breakdown[w].steps)
      m.step_sum[w] += static_cast<double>(s.span_ns);
    if (!breakdown[w].steps.empty()) {
      report->workers[w].mean_step_ns =
          static_cast<TimeNs>(m.step_sum[w] / static_cast<double>(breakdown[w].steps.size()));
    }
  }
  m.z = RobustZ(m.compute);
  m.median_compute = Median(m.compute);
  report->window_step_time_ns = static_cast<TimeNs>(Median(m.step_sum));
  for (size_t c = 0; c < kCategoryCount; ++c) {
    std::vector<double> v;
    for (const CategoryMeans& each : m.mean) v.push_back(each[c]);
    m.median_worker[c] = Median(std::move(v));
  }
  return m;
}

// Where worker `w`'s extra time went: the partition category that grew most against the median
// worker, with what lies behind it (its top kernels or ops, and the host's samples).
void AddCause(const common::CaptureView& capture, const WorkerMeans& m, size_t w, Straggler* s) {
  size_t grew = kComputeKernels;
  for (size_t c = 0; c < kCategoryCount; ++c) {
    if (m.mean[w][c] - m.median_worker[c] > m.mean[w][grew] - m.median_worker[grew]) grew = c;
  }
  s->category = kCategoryNames[grew];
  s->evidence.worker_ns = static_cast<TimeNs>(m.mean[w][grew]);
  s->evidence.median_ns = static_cast<TimeNs>(m.median_worker[grew]);
  const common::HostSampleTable& hs = capture.worker(w).host_samples;
  if (hs.size() > 0) {
    s->max_cpu_percent = *std::max_element(hs.cpu_percent.begin(), hs.cpu_percent.end());
    // 0 is "not read" (no NVML on that node), not a stopped GPU.
    for (int32_t mhz : hs.gpu_sm_clock_mhz) {
      if (mhz > 0 && (s->min_gpu_sm_clock_mhz <= 0 || mhz < s->min_gpu_sm_clock_mhz))
        s->min_gpu_sm_clock_mhz = mhz;
    }
    for (uint64_t r : hs.gpu_throttle_reasons) s->gpu_throttle_reasons |= r;
  }
}

}  // namespace

StragglerReport FindStragglersFromTables(const common::CaptureView& capture,
                                         const std::vector<WorkerSteps>& steps,
                                         const CommunicationReport& communication,
                                         const std::vector<WorkerBreakdown>& breakdown,
                                         const StragglerOptions& options) {
  StragglerReport report;
  report.aligned = communication.aligned;
  report.clock_error_bound_ns = communication.clock_error_bound_ns;
  report.clock_basis = communication.clock_basis;
  report.clock_bound_known = communication.clock_bound_known();
  const size_t n = capture.size();
  report.workers.resize(n);
  for (size_t w = 0; w < n; ++w) {
    report.workers[w].rank = capture.worker(w).info.rank;
    report.workers[w].host = capture.worker(w).info.host;
  }
  std::vector<std::set<int64_t>> late_steps(n);
  CountCausedDelay(capture, steps, communication, &report, &late_steps);
  const WorkerMeans means = ComputeMeans(breakdown, n, &report);

  for (size_t w = 0; w < n; ++w) {
    WorkerLateness& l = report.workers[w];
    l.last_arriver_share = l.collectives ? static_cast<double>(l.last_arrivals) / l.collectives : 0;
    l.compute_z = w < means.z.size() ? means.z[w] : 0;
    const double share_caused =
        report.total_caused_delay_ns > 0
            ? static_cast<double>(l.caused_delay_ns) / report.total_caused_delay_ns
            : 0;
    const double share_step =
        report.window_step_time_ns > 0
            ? static_cast<double>(l.caused_delay_ns) / report.window_step_time_ns
            : 0;
    const bool by_delay =
        IsCausedDelayStraggler(share_caused, share_step, l.last_arriver_share, n, options);
    const bool by_compute =
        l.compute_z >= options.compute_z_threshold && means.median_compute > 0 &&
        means.compute[w] >= means.median_compute * (1 + options.min_compute_excess);
    if (!by_delay && !by_compute) continue;

    Straggler s;
    s.rank = l.rank;
    s.worker = static_cast<uint32_t>(w);
    s.host = l.host;
    s.caused_delay_ns = l.caused_delay_ns;
    s.last_arriver_share = l.last_arriver_share;
    s.steps.assign(late_steps[w].begin(), late_steps[w].end());
    s.reason = by_delay ? "caused_delay" : "compute_outlier";
    s.clock_error_bound_ns = report.clock_error_bound_ns;
    s.compute_z = l.compute_z;
    AddCause(capture, means, w, &s);
    report.stragglers.push_back(std::move(s));
  }
  std::sort(
      report.stragglers.begin(), report.stragglers.end(),
      [](const Straggler& a, const Straggler& b) { return a.caused_delay_ns > b.caused_delay_ns; });
  return report;
}

WorkerNameTimes TimeByNameFor(const common::WorkerTrace& trace, const WorkerSteps& steps,
                              const StragglerReport& report) {
  WorkerNameTimes out;
  for (const Straggler& s : report.stragglers) {
    if (out.contains(s.category)) continue;
    const size_t c = static_cast<size_t>(
        std::find(std::begin(kCategoryNames), std::end(kCategoryNames), s.category) -
        std::begin(kCategoryNames));
    out[s.category] =
        c < kCategoryCount ? TimeByName(trace, steps, static_cast<Category>(c)) : NameTimes{};
  }
  return out;
}

void AddNamedExcess(const std::vector<WorkerNameTimes>& workers, StragglerReport* report) {
  static const NameTimes kNone;
  for (Straggler& s : report->stragglers) {
    std::vector<const NameTimes*> by_worker;
    by_worker.reserve(workers.size());
    for (const WorkerNameTimes& w : workers) {
      auto it = w.find(s.category);
      by_worker.push_back(it == w.end() ? &kNone : &it->second);
    }
    s.evidence.top = TopExcess(by_worker, s.worker);
  }
}

StragglerReport FindStragglers(const common::CaptureView& capture,
                               const std::vector<WorkerSteps>& steps,
                               const CommunicationReport& communication,
                               const std::vector<WorkerBreakdown>& breakdown,
                               const StragglerOptions& options) {
  StragglerReport report =
      FindStragglersFromTables(capture, steps, communication, breakdown, options);
  if (report.stragglers.empty()) return report;
  std::vector<WorkerNameTimes> names;
  for (size_t w = 0; w < capture.size() && w < steps.size(); ++w)
    names.push_back(TimeByNameFor(capture.worker(w), steps[w], report));
  AddNamedExcess(names, &report);
  AddStepTimeLoss(StepReplay(capture, steps, communication), &report);
  return report;
}

}  // namespace podscope::analysis
