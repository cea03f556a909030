#include "analysis/temporal.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "analysis/parallel_for.h"

namespace podscope::analysis {
namespace {

using common::KernelClass;
using common::WorkerTrace;

enum class HtaClass : uint8_t { kComputation, kCommunication, kMemory, kOther };

// HTA's kernel classes, first match wins: communication `^nccl|ncclKernel|^hip|^hccl`;
// memory `^(hip)?Memcpy|^(hip)?Memset|^dma`; computation: everything that is not
// nccl / Memcpy / Memset / dma / *Sync / Stream Wait Event / cuda*LaunchKernel / runFunction.
HtaClass ClassifyLikeHta(std::string_view name) {
  if (name.starts_with("nccl") || name.find("ncclKernel") != std::string_view::npos ||
      name.starts_with("hip") || name.starts_with("hccl")) {
    // "^hip" also catches hipMemcpy; HTA tests communication first.
    return HtaClass::kCommunication;
  }
  if (name.starts_with("Memcpy") || name.starts_with("Memset") || name.starts_with("hipMemcpy") ||
      name.starts_with("hipMemset") || name.starts_with("dma")) {
    return HtaClass::kMemory;
  }
  const bool not_computation =
      name.find("nccl") != std::string_view::npos ||
      name.find("Memcpy") != std::string_view::npos ||
      name.find("Memset") != std::string_view::npos || name.find("dma") != std::string_view::npos ||
      name.ends_with("Sync") || name.find("Stream Wait Event") != std::string_view::npos ||
      name.find("runFunction") != std::string_view::npos ||
      (name.starts_with("cuda") && name.find("LaunchKernel") != std::string_view::npos);
  return not_computation ? HtaClass::kOther : HtaClass::kComputation;
}

// One device event as the temporal summary sees it.
struct DeviceEvent {
  TimeNs start, end;
  int32_t device, stream;
  int64_t correlation;
  HtaClass hta_class;
  KernelClass kernel_class;
  bool is_kernel_like;  // kernel, memcpy or memset (what HTA's idle split walks)
};

TimeNs FloorMicro(TimeNs t) { return t >= 0 ? t / 1000 * 1000 : -((-t + 999) / 1000 * 1000); }
TimeNs CeilMicro(TimeNs t) { return -FloorMicro(-t); }

bool AnyFractionalMicros(const WorkerTrace& w) {
  auto fractional = [](const std::vector<TimeNs>& v) {
    return std::any_of(v.begin(), v.end(), [](TimeNs t) { return t % 1000 != 0; });
  };
  return fractional(w.kernels.start) || fractional(w.memcpys.start) ||
         fractional(w.runtime_calls.start) || fractional(w.host_spans.start);
}

double RoundTo2(double v) { return std::round(v * 100.0) / 100.0; }

// HTA: when any timestamp has a fractional microsecond, every event becomes
// [ceil(ts), floor(ts + dur)] in whole microseconds.
struct Rounding {
  bool round = false;
  TimeNs Start(TimeNs t) const { return round ? CeilMicro(t) : t; }
  TimeNs End(TimeNs t) const { return round ? FloorMicro(t) : t; }
};

// Kernels, then copies, in table order (the window below relies on it).
std::vector<DeviceEvent> DeviceEvents(const WorkerTrace& w, const Rounding& r) {
  // Classified once per distinct name: kernel names run to hundreds of characters, and a worker
  // launches the same few hundred kernels thousands of times.
  constexpr uint8_t kUnclassified = UINT8_MAX;
  std::vector<uint8_t> class_of_name(w.strings.size(), kUnclassified);
  auto classify = [&](common::NameId name) {
    uint8_t& known = class_of_name[name];
    if (known == kUnclassified) known = static_cast<uint8_t>(ClassifyLikeHta(w.strings.Get(name)));
    return static_cast<HtaClass>(known);
  };
  std::vector<DeviceEvent> events;
  events.reserve(w.kernels.size() + w.memcpys.size());
  for (size_t i = 0; i < w.kernels.size(); ++i) {
    events.push_back({r.Start(w.kernels.start[i]), r.End(w.kernels.end[i]), w.kernels.device[i],
                      w.kernels.stream[i], w.kernels.correlation[i], classify(w.kernels.name[i]),
                      w.kernels.kernel_class[i], w.kernels.kernel_class[i] != KernelClass::kSync});
  }
  for (size_t i = 0; i < w.memcpys.size(); ++i) {
    events.push_back({r.Start(w.memcpys.start[i]), r.End(w.memcpys.end[i]), w.memcpys.device[i],
                      w.memcpys.stream[i], w.memcpys.correlation[i], classify(w.memcpys.name[i]),
                      KernelClass::kSync, true});
  }
  return events;
}

// HTA's window: a GPU event has a stream and a correlation id (args.stream >= 0, correlation >=
// 0); with at least two distinct ProfilerSteps, what was launched before the start of the last
// one.
void KeepHtaWindow(const WorkerTrace& w, const Rounding& r,
                   const absl::flat_hash_map<int64_t, TimeNs>& launch,
                   std::vector<DeviceEvent>* events) {
  std::erase_if(*events, [](const DeviceEvent& e) { return e.stream < 0 || e.correlation < 0; });
  absl::flat_hash_set<int64_t> numbers(w.steps.number.begin(), w.steps.number.end());
  if (numbers.size() < 2) return;
  TimeNs last_start = INT64_MIN;
  for (TimeNs s : w.steps.start) last_start = std::max(last_start, r.Start(s));
  std::erase_if(*events, [&](const DeviceEvent& e) {
    auto it = launch.find(e.correlation);
    return it == launch.end() || it->second >= last_start;
  });
}

// podscope's window: device activity launched inside the capture's steps (all of it when there
// are no steps). `events` are DeviceEvents(w)'s, in their order.
void KeepStepWindow(const WorkerTrace& w, const WorkerSteps& steps,
                    std::vector<DeviceEvent>* events) {
  if (steps.steps.empty()) return;
  std::vector<DeviceEvent> kept;
  for (size_t i = 0; i < w.kernels.size(); ++i) {
    if (steps.kernel_step[i] >= 0) kept.push_back((*events)[i]);
  }
  for (size_t i = 0; i < w.memcpys.size(); ++i) {
    if (steps.memcpy_step[i] >= 0) kept.push_back((*events)[w.kernels.size() + i]);
  }
  *events = std::move(kept);
}

// Kernel time, idle, computation and the share of communication it overlaps.
void AddTotals(const std::vector<DeviceEvent>& events, bool hta, WorkerTemporal* out) {
  IntervalSet all, computation, communication;
  all.reserve(events.size());
  for (const DeviceEvent& e : events) {
    all.push_back({e.start, e.end});
    const bool is_compute = hta ? e.hta_class == HtaClass::kComputation
                                : (e.is_kernel_like && e.kernel_class == KernelClass::kCompute &&
                                   e.hta_class != HtaClass::kMemory);
    const bool is_comm = hta ? e.hta_class == HtaClass::kCommunication
                             : e.kernel_class == KernelClass::kCommunication;
    if (is_compute) computation.push_back({e.start, e.end});
    if (is_comm) communication.push_back({e.start, e.end});
  }
  Normalize(&all);
  Normalize(&computation);
  Normalize(&communication);
  // Device events that all last no time (zero-length records) span nothing.
  if (all.empty()) return;
  out->kernel_time_ns = all.back().end - all.front().start;
  out->idle_ns = out->kernel_time_ns - TotalLength(all);
  out->compute_ns = TotalLength(computation);
  out->non_compute_ns = out->kernel_time_ns - out->compute_ns - out->idle_ns;
  const TimeNs comm_total = TotalLength(communication);
  if (comm_total > 0) {
    const double pct = 100.0 * static_cast<double>(IntersectionLength(computation, communication)) /
                       static_cast<double>(comm_total);
    out->overlap_pct = hta ? RoundTo2(pct) : pct;
  }
}

// Idle split per stream, over kernels / copies / memsets in start order: waiting on the host's
// launch, a short gap between kernels, or other.
std::vector<StreamIdle> IdleByStream(const std::vector<DeviceEvent>& events,
                                     const absl::flat_hash_map<int64_t, TimeNs>& launch,
                                     const TemporalOptions& options) {
  std::map<std::pair<int32_t, int32_t>, std::vector<const DeviceEvent*>> by_stream;
  for (const DeviceEvent& e : events) {
    if (e.is_kernel_like) by_stream[{e.device, e.stream}].push_back(&e);
  }
  std::vector<StreamIdle> idle_by_stream;
  for (auto& [key, list] : by_stream) {
    std::stable_sort(list.begin(), list.end(), [](const DeviceEvent* a, const DeviceEvent* b) {
      return a->start < b->start;
    });
    StreamIdle idle{key.first, key.second};
    for (size_t i = 1; i < list.size(); ++i) {
      const TimeNs previous_end = list[i - 1]->end;
      const TimeNs gap = list[i]->start - previous_end;
      auto it = launch.find(list[i]->correlation);
      if (it != launch.end() && it->second > previous_end) {
        idle.host_wait_ns += gap;
      } else if (gap < options.kernel_wait_threshold_ns) {
        idle.kernel_wait_ns += gap;
      } else {
        idle.other_ns += gap;
      }
    }
    idle_by_stream.push_back(idle);
  }
  return idle_by_stream;
}

}  // namespace

WorkerTemporal ComputeWorkerTemporal(const WorkerTrace& w, const TemporalOptions& options,
                                     const WorkerSteps* known_steps) {
  WorkerTemporal out;
  out.rank = w.info.rank;
  const bool hta = options.window == WindowMode::kHta;
  const Rounding rounding{.round = hta && AnyFractionalMicros(w)};
  // Launch time per correlation id (HTA's GPU events must match a kept CPU event).
  absl::flat_hash_map<int64_t, TimeNs> launch;
  launch.reserve(w.runtime_calls.size());
  for (size_t i = 0; i < w.runtime_calls.size(); ++i) {
    if (w.runtime_calls.correlation[i] >= 0) {
      launch.emplace(w.runtime_calls.correlation[i], rounding.Start(w.runtime_calls.start[i]));
    }
  }
  std::vector<DeviceEvent> events = DeviceEvents(w, rounding);
  if (hta) {
    KeepHtaWindow(w, rounding, launch, &events);
  } else if (known_steps != nullptr) {
    KeepStepWindow(w, *known_steps, &events);
  } else {
    KeepStepWindow(w, FindSteps(w, options.steps), &events);
  }
  if (events.empty()) return out;
  AddTotals(events, hta, &out);
  out.idle_by_stream = IdleByStream(events, launch, options);
  return out;
}

TemporalReport ComputeTemporal(const common::CaptureView& capture, const TemporalOptions& options,
                               const std::vector<WorkerSteps>* steps) {
  TemporalReport report;
  report.window = options.window;
  report.workers.resize(capture.size());
  ParallelFor(capture.size(), [&](size_t i) {
    report.workers[i] = ComputeWorkerTemporal(capture.worker(i), options,
                                              steps != nullptr ? &(*steps)[i] : nullptr);
  });
  return report;
}

}  // namespace podscope::analysis
