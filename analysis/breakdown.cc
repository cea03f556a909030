#include "analysis/breakdown.h"

#include <algorithm>
#include <climits>

#include "absl/container/flat_hash_map.h"
#include "analysis/parallel_for.h"

namespace podscope::analysis {
namespace {

using common::HostSpanCategory;
using common::KernelClass;
using common::MemcpyKind;
using common::WorkerTrace;

// Sweep classes, one bit each.
enum Bit : uint32_t {
  kCompute = 0,
  kTransfer,
  kWait,
  kH2D,
  kD2H,
  kD2D,
  kCopyOther,
  kHostInput,
  kHostLaunch,
  kHostBusy,
  kBitCount,
};

// The worker's activity as one interval set per class (whole trace, own clock).
std::vector<IntervalSet> ActivityClasses(const WorkerTrace& w, const std::vector<TimeNs>* wait) {
  std::vector<IntervalSet> cls(kBitCount);
  absl::flat_hash_map<int64_t, size_t> collective_of;  // kernel correlation -> collective row
  if (wait != nullptr) {
    collective_of.reserve(w.collectives.size());
    for (size_t i = 0; i < w.collectives.size(); ++i) {
      if (w.collectives.correlation[i] >= 0) collective_of.emplace(w.collectives.correlation[i], i);
    }
  }
  absl::flat_hash_map<int64_t, TimeNs> launch_end;  // correlation -> end of its launch call
  launch_end.reserve(w.runtime_calls.size());
  for (size_t i = 0; i < w.runtime_calls.size(); ++i) {
    cls[kHostLaunch].push_back({w.runtime_calls.start[i], w.runtime_calls.end[i]});
    if (w.runtime_calls.correlation[i] >= 0)
      launch_end.emplace(w.runtime_calls.correlation[i], w.runtime_calls.end[i]);
  }
  auto launch_latency = [&](int64_t correlation, TimeNs device_start) {
    // The device waits for a launched kernel between the call's return and the kernel start.
    auto it = correlation >= 0 ? launch_end.find(correlation) : launch_end.end();
    if (it != launch_end.end() && it->second < device_start)
      cls[kHostLaunch].push_back({it->second, device_start});
  };
  const common::KernelTable& k = w.kernels;
  for (size_t i = 0; i < k.size(); ++i) {
    if (k.kernel_class[i] == KernelClass::kSync) continue;
    launch_latency(k.correlation[i], k.start[i]);
    if (k.kernel_class[i] == KernelClass::kCompute) {
      cls[kCompute].push_back({k.start[i], k.end[i]});
      continue;
    }
    TimeNs waited = 0;
    if (wait != nullptr) {
      auto it = collective_of.find(k.correlation[i]);
      if (it != collective_of.end()) waited = std::min((*wait)[it->second], k.end[i] - k.start[i]);
    }
    cls[kWait].push_back({k.start[i], k.start[i] + waited});
    cls[kTransfer].push_back({k.start[i] + waited, k.end[i]});
  }
  const common::MemcpyTable& m = w.memcpys;
  for (size_t i = 0; i < m.size(); ++i) {
    launch_latency(m.correlation[i], m.start[i]);
    const Bit bit = m.kind[i] == MemcpyKind::kHostToDevice     ? kH2D
                    : m.kind[i] == MemcpyKind::kDeviceToHost   ? kD2H
                    : m.kind[i] == MemcpyKind::kDeviceToDevice ? kD2D
                                                               : kCopyOther;
    cls[bit].push_back({m.start[i], m.end[i]});
  }
  const common::HostSpanTable& h = w.host_spans;
  for (size_t i = 0; i < h.size(); ++i) {
    switch (h.category[i]) {
      case HostSpanCategory::kInput:
        cls[kHostInput].push_back({h.start[i], h.end[i]});
        break;
      case HostSpanCategory::kOp:
      case HostSpanCategory::kOptimizer:
      case HostSpanCategory::kPython:
        cls[kHostBusy].push_back({h.start[i], h.end[i]});
        break;
      case HostSpanCategory::kAnnotation:     // step markers and ranges cover everything
      case HostSpanCategory::kGpuAnnotation:  // device-side labels
        break;
    }
  }
  for (IntervalSet& set : cls) Normalize(&set);
  return cls;
}

void Account(StepBreakdown& b, TimeNs len, uint32_t mask) {
  auto has = [mask](Bit bit) { return (mask >> bit) & 1u; };
  const bool comm = has(kTransfer) || has(kWait);
  if (has(kCompute)) {
    (comm ? b.overlap_ns : b.compute_ns) += len;
  } else if (has(kTransfer)) {
    b.communication_ns += len;
    b.comm_transfer_ns += len;  // a rank moving data for any collective is transferring
  } else if (has(kWait)) {
    b.communication_ns += len;
    b.comm_wait_ns += len;
  } else if (has(kH2D) || has(kD2H) || has(kD2D) || has(kCopyOther)) {
    b.memcpy_ns += len;
    (has(kH2D)   ? b.memcpy_h2d_ns
     : has(kD2H) ? b.memcpy_d2h_ns
     : has(kD2D) ? b.memcpy_d2d_ns
                 : b.memcpy_other_ns) += len;
  } else if (has(kHostInput)) {
    b.idle_input_ns += len;
  } else if (has(kHostLaunch)) {
    b.idle_launch_ns += len;
  } else if (has(kHostBusy)) {
    b.idle_host_ns += len;
  } else {
    b.idle_other_ns += len;
  }
}

}  // namespace

WorkerBreakdown ComputeWorkerBreakdown(const WorkerTrace& w, const WorkerSteps& steps,
                                       const std::vector<TimeNs>* collective_wait) {
  WorkerBreakdown out;
  out.rank = w.info.rank;
  out.step_source = steps.source;
  const std::vector<IntervalSet> cls = ActivityClasses(w, collective_wait);
  std::vector<const IntervalSet*> classes;
  for (const IntervalSet& set : cls) classes.push_back(&set);
  TimeNs previous_end = INT64_MIN;
  for (const StepSpan& step : steps.steps) {
    if (!step.has_device()) continue;
    StepBreakdown b;
    b.step = step.number;
    b.span = step.device;
    b.span_ns = step.device.length();
    SweepClasses(classes, step.device.start, step.device.end,
                 [&b](TimeNs s, TimeNs e, uint32_t mask) { Account(b, e - s, mask); });
    if (previous_end != INT64_MIN && previous_end < step.device.start) {
      StepBreakdown gap;
      SweepClasses(classes, previous_end, step.device.start,
                   [&gap](TimeNs s, TimeNs e, uint32_t mask) { Account(gap, e - s, mask); });
      b.before_ns = step.device.start - previous_end;
      b.before_input_ns = gap.idle_input_ns;
      b.before_launch_ns = gap.idle_launch_ns;
      b.before_host_ns = gap.idle_host_ns;
      b.before_other_ns = b.before_ns - gap.idle_input_ns - gap.idle_launch_ns - gap.idle_host_ns;
    }
    previous_end = std::max(previous_end, step.device.end);
    out.steps.push_back(b);
  }
  return out;
}

std::vector<WorkerBreakdown> ComputeBreakdown(const common::CaptureView& capture,
                                              const std::vector<WorkerSteps>& steps,
                                              const CommunicationReport* communication) {
  std::vector<WorkerBreakdown> out(capture.size());
  ParallelFor(capture.size(), [&](size_t i) {
    out[i] = ComputeWorkerBreakdown(capture.worker(i), steps[i],
                                    communication != nullptr ? &communication->wait[i] : nullptr);
  });
  return out;
}

}  // namespace podscope::analysis
