#include "analysis/operators.h"

#include <algorithm>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "analysis/parallel_for.h"
#include "analysis/sorted_runs.h"

namespace podscope::analysis {
namespace {

// One thread's timeline item: an operator span or a CUDA call.
struct Item {
  TimeNs start = 0, end = 0;
  size_t row = 0;
  bool is_call = false;
};

// Device time per correlation id: every kernel (not sync records), copy and memset; work without
// a correlation id (negative) belongs to no call.
absl::flat_hash_map<int64_t, TimeNs> DeviceTimeByCorrelation(const common::WorkerTrace& t) {
  absl::flat_hash_map<int64_t, TimeNs> out;
  out.reserve(t.kernels.size() + t.memcpys.size());
  for (size_t i = 0; i < t.kernels.size(); ++i) {
    if (t.kernels.kernel_class[i] == common::KernelClass::kSync || t.kernels.correlation[i] < 0)
      continue;
    out[t.kernels.correlation[i]] += t.kernels.end[i] - t.kernels.start[i];
  }
  for (size_t i = 0; i < t.memcpys.size(); ++i) {
    if (t.memcpys.correlation[i] >= 0)
      out[t.memcpys.correlation[i]] += t.memcpys.end[i] - t.memcpys.start[i];
  }
  return out;
}

void SortTop(std::vector<OperatorStats>& list, size_t limit) {
  std::sort(list.begin(), list.end(), [](const OperatorStats& a, const OperatorStats& b) {
    if (a.device_self_ns != b.device_self_ns) return a.device_self_ns > b.device_self_ns;
    if (a.host_self_ns != b.host_self_ns) return a.host_self_ns > b.host_self_ns;
    return a.name < b.name;
  });
  if (limit > 0 && list.size() > limit) list.resize(limit);
}

// Every operator of one worker, aggregated by name (all of them: the pod sums need them).
std::vector<OperatorStats> OperatorsOf(const common::WorkerTrace& t) {
  const absl::flat_hash_map<int64_t, TimeNs> device = DeviceTimeByCorrelation(t);
  std::map<int64_t, std::vector<Item>> threads;
  const common::HostSpanTable& h = t.host_spans;
  for (size_t i = 0; i < h.size(); ++i) {
    if (IsOperatorSpan(h, i) && h.end[i] >= h.start[i])
      threads[h.thread[i]].push_back({h.start[i], h.end[i], i, false});
  }
  const common::RuntimeCallTable& r = t.runtime_calls;
  for (size_t i = 0; i < r.size(); ++i) {
    if (r.end[i] >= r.start[i]) threads[r.thread[i]].push_back({r.start[i], r.end[i], i, true});
  }

  std::map<common::NameId, OperatorStats> by_name;
  struct Open {
    size_t row;
    TimeNs end, children_ns = 0, device_self = 0, device_total = 0;
  };
  auto close = [&](const Open& op, std::vector<Open>& stack) {
    OperatorStats& s = by_name[h.name[op.row]];
    const TimeNs total = h.end[op.row] - h.start[op.row];
    ++s.calls;
    s.host_total_ns += total;
    s.host_self_ns += std::max<TimeNs>(0, total - op.children_ns);
    s.device_self_ns += op.device_self;
    s.device_total_ns += op.device_total;
    if (!stack.empty()) {
      stack.back().children_ns += total;
      stack.back().device_total += op.device_total;
    }
  };
  for (auto& [thread, items] : threads) {
    // Outer before inner: by start, the longer first, operators before calls that start with
    // them; of two operators over the same span, the one recorded first is taken as the outer.
    SortRuns(items, [](const Item& a, const Item& b) {
      if (a.start != b.start) return a.start < b.start;
      if (a.end != b.end) return a.end > b.end;
      if (a.is_call != b.is_call) return !a.is_call;
      return a.row < b.row;
    });
    std::vector<Open> stack;
    for (const Item& item : items) {
      while (!stack.empty() && stack.back().end <= item.start) {
        const Open done = stack.back();
        stack.pop_back();
        close(done, stack);
      }
      if (!item.is_call) {
        stack.push_back({item.row, item.end});
        continue;
      }
      if (stack.empty()) continue;  // a CUDA call outside every operator
      Open& parent = stack.back();
      parent.children_ns += item.end - item.start;
      const auto d = device.find(r.correlation[item.row]);
      if (d != device.end()) {
        parent.device_self += d->second;
        parent.device_total += d->second;
      }
    }
    while (!stack.empty()) {
      const Open done = stack.back();
      stack.pop_back();
      close(done, stack);
    }
  }
  std::vector<OperatorStats> out;
  out.reserve(by_name.size());
  for (auto& [id, s] : by_name) {
    s.name = std::string(t.strings.Get(id));
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

bool IsOperatorSpan(const common::HostSpanTable& h, size_t i) {
  using common::HostSpanCategory;
  if (h.step[i] != common::kNoStep) return false;  // a step marker
  switch (h.category[i]) {
    case HostSpanCategory::kOp:
    case HostSpanCategory::kAnnotation:
    case HostSpanCategory::kInput:
    case HostSpanCategory::kOptimizer:
      return true;
    default:
      return false;
  }
}

OperatorReport ComputeOperators(const common::CaptureView& capture, size_t limit) {
  std::vector<WorkerOperatorStats> all(capture.size());
  ParallelFor(capture.size(),
              [&](size_t w) { all[w] = ComputeWorkerOperators(capture.worker(w)); });
  return FinishOperators(std::move(all), limit);
}

WorkerOperatorStats ComputeWorkerOperators(const common::WorkerTrace& trace) {
  return {trace.info.rank, OperatorsOf(trace)};
}

OperatorReport FinishOperators(std::vector<WorkerOperatorStats> all, size_t limit) {
  OperatorReport report;
  std::map<std::string, PodOperator> pod;
  for (size_t w = 0; w < all.size(); ++w) {
    const int32_t rank = all[w].rank;
    for (const OperatorStats& s : all[w].operators) {
      PodOperator& p = pod[s.name];
      p.stats.name = s.name;
      p.stats.calls += s.calls;
      p.stats.host_total_ns += s.host_total_ns;
      p.stats.host_self_ns += s.host_self_ns;
      p.stats.device_total_ns += s.device_total_ns;
      p.stats.device_self_ns += s.device_self_ns;
      p.costliest.push_back({rank, s.device_total_ns, s.host_total_ns});
    }
    WorkerOperators worker{rank, std::move(all[w].operators)};
    SortTop(worker.top, limit);
    report.workers.push_back(std::move(worker));
  }
  std::sort(report.workers.begin(), report.workers.end(),
            [](const WorkerOperators& a, const WorkerOperators& b) { return a.rank < b.rank; });

  std::vector<OperatorStats> order;
  for (auto& [name, p] : pod) order.push_back(p.stats);
  SortTop(order, limit);
  for (const OperatorStats& s : order) {
    PodOperator& p = pod[s.name];
    std::sort(p.costliest.begin(), p.costliest.end(),
              [](const OperatorCost& a, const OperatorCost& b) {
                if (a.device_total_ns != b.device_total_ns)
                  return a.device_total_ns > b.device_total_ns;
                if (a.host_total_ns != b.host_total_ns) return a.host_total_ns > b.host_total_ns;
                return a.rank < b.rank;
              });
    if (p.costliest.size() > 3) p.costliest.resize(3);
    report.pod.push_back(std::move(p));
  }
  return report;
}

}  // namespace podscope::analysis
