#include "analysis/steps.h"

#include <algorithm>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "analysis/parallel_for.h"
#include "common/step_pattern.h"

namespace podscope::analysis {
namespace {

using common::WorkerTrace;

std::vector<StepSpan> StepsFromMarkers(const WorkerTrace& w) {
  std::vector<StepSpan> steps;
  for (size_t i = 0; i < w.steps.size(); ++i) {
    steps.push_back(StepSpan{w.steps.number[i], {w.steps.start[i], w.steps.end[i]}, {}});
  }
  return steps;
}

std::vector<StepSpan> StepsFromPattern(const WorkerTrace& w, const common::StepPattern& pattern) {
  // Names repeat: match each distinct name once.
  absl::flat_hash_map<common::NameId, int64_t> number_of;  // -1: no match, -2: match w/o number
  std::vector<StepSpan> steps;
  for (size_t i = 0; i < w.host_spans.size(); ++i) {
    if (w.host_spans.category[i] == common::HostSpanCategory::kGpuAnnotation) continue;
    const common::NameId name = w.host_spans.name[i];
    auto it = number_of.find(name);
    if (it == number_of.end()) {
      const common::StepPattern::Match m = pattern.Find(w.strings.Get(name));
      it = number_of.emplace(name, !m.matched ? -1 : m.number.value_or(-2)).first;
    }
    if (it->second == -1) continue;
    steps.push_back(StepSpan{it->second == -2 ? static_cast<int64_t>(steps.size()) : it->second,
                             {w.host_spans.start[i], w.host_spans.end[i]},
                             {}});
  }
  return steps;
}

// No markers: the collectives of the busiest communicator repeat once per step. The period
// is the smallest P for which the (op, bytes) sequence repeats with period P for at least 90%
// of positions; step k runs on the host from the enqueue of collective k*P to that of (k+1)*P.
std::vector<StepSpan> StepsFromCollectivePeriod(const WorkerTrace& w) {
  const common::CollectiveTable& c = w.collectives;
  std::map<common::NameId, std::vector<size_t>> by_comm;
  for (size_t i = 0; i < c.size(); ++i) by_comm[c.communicator[i]].push_back(i);
  const std::vector<size_t>* busiest = nullptr;
  for (const auto& [comm, rows] : by_comm) {
    if (busiest == nullptr || rows.size() > busiest->size()) busiest = &rows;
  }
  if (busiest == nullptr || busiest->size() < 4) return {};
  std::vector<size_t> rows = *busiest;
  std::sort(rows.begin(), rows.end(),
            [&c](size_t a, size_t b) { return c.enqueue[a] < c.enqueue[b]; });
  const size_t n = rows.size();
  auto same = [&](size_t a, size_t b) {
    return c.op[rows[a]] == c.op[rows[b]] && c.bytes[rows[a]] == c.bytes[rows[b]];
  };
  size_t period = 0;
  for (size_t p = 1; p <= n / 2 && period == 0; ++p) {
    size_t matches = 0;
    for (size_t i = 0; i + p < n; ++i) matches += same(i, i + p);
    if (matches * 10 >= (n - p) * 9) period = p;
  }
  if (period == 0) return {};
  std::vector<StepSpan> steps;
  for (size_t k = 0; (k + 1) * period < n; ++k) {
    steps.push_back(StepSpan{static_cast<int64_t>(k),
                             {c.enqueue[rows[k * period]], c.enqueue[rows[(k + 1) * period]]},
                             {}});
  }
  return steps;
}

// No markers and no collectives (a one-GPU job): a training loop launches the same kernels in
// the same order every step. A kernel launched c times a step is P launches from its own c-th
// next launch, P the period: so each of the rarest kernels proposes, for c = 1 to 32, the
// distance to its c-th next launch when 90% of those distances agree. A proposal holds when the
// whole sequence of kernel names repeats with it (name i equal to name i+P at 90% of positions);
// of those that hold, the period is the smallest that repeats about as well as the best one
// (within half a percent): multiples of the period repeat as well, a model's identical layers
// repeat within the step but not across its embedding, loss and optimizer. At least two
// launches a period, and three whole steps. A step starts at the launch, among the P positions
// of one period, that follows the longest host pause on average: the loop's top, where the host
// does the work that launches nothing (the optimizer's bookkeeping, the next batch). A period of
// one kernel alone is none.
std::vector<StepSpan> StepsFromLaunchPeriod(const WorkerTrace& w, const std::vector<TimeNs>& at) {
  // Proposals come from each kernel's first kMaxLooked launches: enough for a hundred steps of
  // the most frequent kernel looked at, and a bound on the work whatever the trace.
  constexpr size_t kRarest = 8, kMaxPerStep = 32, kMaxTried = 64, kMaxLooked = 4096;
  const size_t n = at.size();
  if (n < 6) return {};
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&at](size_t a, size_t b) { return at[a] != at[b] ? at[a] < at[b] : a < b; });
  std::vector<common::NameId> name(n);
  absl::flat_hash_map<common::NameId, std::vector<size_t>> positions;
  for (size_t i = 0; i < n; ++i) {
    name[i] = w.kernels.name[order[i]];
    positions[name[i]].push_back(i);
  }
  std::vector<const std::vector<size_t>*> rarest;
  for (const auto& [id, where] : positions) {
    if (where.size() >= 4) rarest.push_back(&where);
  }
  std::sort(rarest.begin(), rarest.end(), [](const auto* a, const auto* b) {
    return a->size() != b->size() ? a->size() < b->size() : a->front() < b->front();
  });
  if (rarest.size() > kRarest) rarest.resize(kRarest);
  absl::flat_hash_map<size_t, size_t> proposed;  // period -> how many (kernel, c) proposed it
  std::vector<size_t> distances;
  for (const std::vector<size_t>* where : rarest) {
    for (size_t c = 1; c <= kMaxPerStep && c + 3 <= where->size(); ++c) {
      distances.clear();
      for (size_t i = 0; i + c < where->size() && i < kMaxLooked; ++i)
        distances.push_back((*where)[i + c] - (*where)[i]);
      std::sort(distances.begin(), distances.end());
      size_t mode = 0, mode_count = 0;
      for (size_t i = 0, j = 0; i < distances.size(); i = j) {
        while (j < distances.size() && distances[j] == distances[i]) ++j;
        if (j - i > mode_count) {
          mode = distances[i];
          mode_count = j - i;
        }
      }
      if (mode >= 2 && mode * 3 <= n && mode_count * 10 >= distances.size() * 9) ++proposed[mode];
    }
  }
  // Each proposal costs a pass over the launches: the best supported are tried.
  std::vector<std::pair<size_t, size_t>> candidates(proposed.begin(), proposed.end());
  std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (candidates.size() > kMaxTried) candidates.resize(kMaxTried);
  std::vector<std::pair<size_t, double>> holding;  // period, share of positions that repeat
  double best = 0;
  for (const auto& [p, support] : candidates) {
    size_t matches = 0;
    for (size_t i = 0; i + p < n; ++i) matches += name[i] == name[i + p];
    const double share = static_cast<double>(matches) / static_cast<double>(n - p);
    if (share >= 0.9) {
      holding.emplace_back(p, share);
      best = std::max(best, share);
    }
  }
  size_t period = 0;
  for (const auto& [p, share] : holding) {
    if (share >= best - 0.005 && (period == 0 || p < period)) period = p;
  }
  if (period == 0) return {};
  // One kernel over and over repeats with any period: no loop can be told from it.
  if (std::all_of(name.begin(), name.begin() + static_cast<std::ptrdiff_t>(period),
                  [&name](common::NameId id) { return id == name[0]; })) {
    return {};
  }
  // The phase: the position within a period after the longest pause, summed over the periods.
  size_t phase = 0;
  TimeNs longest = -1;
  for (size_t o = 0; o < period; ++o) {
    TimeNs pause = 0;
    for (size_t i = o == 0 ? period : o; i < n; i += period)
      pause += at[order[i]] - at[order[i - 1]];
    if (pause > longest) {
      longest = pause;
      phase = o;
    }
  }
  std::vector<StepSpan> steps;
  for (size_t k = 0; phase + (k + 1) * period < n; ++k) {
    steps.push_back(StepSpan{static_cast<int64_t>(k),
                             {at[order[phase + k * period]], at[order[phase + (k + 1) * period]]},
                             {}});
  }
  if (steps.size() < 3) return {};
  return steps;
}

}  // namespace

std::string_view StepSourceName(StepSource source) {
  switch (source) {
    case StepSource::kNone:
      return "none";
    case StepSource::kMarkers:
      return "markers";
    case StepSource::kPattern:
      return "pattern";
    case StepSource::kInferred:
      return "inferred";
    case StepSource::kLaunches:
      return "launches";
  }
  return "unknown";
}

LaunchTimes FindLaunchTimes(const WorkerTrace& w) {
  absl::flat_hash_map<int64_t, TimeNs> launch;
  launch.reserve(w.runtime_calls.size());
  for (size_t i = 0; i < w.runtime_calls.size(); ++i) {
    if (w.runtime_calls.correlation[i] >= 0)
      launch.emplace(w.runtime_calls.correlation[i], w.runtime_calls.start[i]);
  }
  LaunchTimes times;
  times.kernel.resize(w.kernels.size());
  for (size_t i = 0; i < w.kernels.size(); ++i) {
    auto it = w.kernels.correlation[i] >= 0 ? launch.find(w.kernels.correlation[i]) : launch.end();
    times.kernel[i] = it != launch.end() ? it->second : w.kernels.start[i];
  }
  times.memcpy.resize(w.memcpys.size());
  for (size_t i = 0; i < w.memcpys.size(); ++i) {
    auto it = w.memcpys.correlation[i] >= 0 ? launch.find(w.memcpys.correlation[i]) : launch.end();
    times.memcpy[i] = it != launch.end() ? it->second : w.memcpys.start[i];
  }
  return times;
}

WorkerSteps FindSteps(const WorkerTrace& w, const StepOptions& options) {
  WorkerSteps result;
  if (!options.marker_pattern.empty()) {
    if (absl::StatusOr<common::StepPattern> pattern =
            common::StepPattern::Compile(options.marker_pattern);
        pattern.ok()) {
      result.steps = StepsFromPattern(w, *pattern);
      result.source = StepSource::kPattern;
    }
  }
  if (result.steps.empty() && w.steps.size() > 0) {
    result.steps = StepsFromMarkers(w);
    result.source = StepSource::kMarkers;
  }
  if (result.steps.empty()) {
    result.steps = StepsFromCollectivePeriod(w);
    result.source = result.steps.empty() ? StepSource::kNone : StepSource::kInferred;
  }
  const LaunchTimes launch = FindLaunchTimes(w);
  if (result.steps.empty() && w.collectives.size() == 0) {
    result.steps = StepsFromLaunchPeriod(w, launch.kernel);
    result.source = result.steps.empty() ? StepSource::kNone : StepSource::kLaunches;
  }
  std::sort(result.steps.begin(), result.steps.end(),
            [](const StepSpan& a, const StepSpan& b) { return a.host.start < b.host.start; });

  // Assign each device event to the step whose host span contains its launch.
  auto step_of = [&result](TimeNs t) -> int32_t {
    const auto& s = result.steps;
    auto it = std::upper_bound(s.begin(), s.end(), t,
                               [](TimeNs v, const StepSpan& step) { return v < step.host.start; });
    if (it == s.begin()) return -1;
    --it;
    return t < it->host.end ? static_cast<int32_t>(it - s.begin()) : -1;
  };
  std::vector<TimeNs> lo(result.steps.size(), INT64_MAX), hi(result.steps.size(), INT64_MIN);
  auto assign = [&](const std::vector<TimeNs>& launches, const std::vector<TimeNs>& starts,
                    const std::vector<TimeNs>& ends, std::vector<int32_t>* out) {
    out->resize(launches.size());
    for (size_t i = 0; i < launches.size(); ++i) {
      const int32_t s = step_of(launches[i]);
      (*out)[i] = s;
      if (s >= 0) {
        lo[s] = std::min(lo[s], starts[i]);
        hi[s] = std::max(hi[s], ends[i]);
      }
    }
  };
  assign(launch.kernel, w.kernels.start, w.kernels.end, &result.kernel_step);
  assign(launch.memcpy, w.memcpys.start, w.memcpys.end, &result.memcpy_step);
  for (size_t s = 0; s < result.steps.size(); ++s) {
    if (lo[s] < hi[s]) result.steps[s].device = {lo[s], hi[s]};
  }
  return result;
}

std::vector<WorkerSteps> FindAllSteps(const common::CaptureView& capture,
                                      const StepOptions& options) {
  std::vector<WorkerSteps> all(capture.size());
  ParallelFor(capture.size(), [&](size_t i) { all[i] = FindSteps(capture.worker(i), options); });
  return all;
}

}  // namespace podscope::analysis
