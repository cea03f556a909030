#include "analysis/memory.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>

#include "analysis/operators.h"
#include "analysis/parallel_for.h"
#include "analysis/sorted_runs.h"

namespace podscope::analysis {
namespace {

// Sums of a hostile trace's sizes saturate rather than wrap.
int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t out = 0;
  if (!__builtin_add_overflow(a, b, &out)) return out;
  return b > 0 ? INT64_MAX : INT64_MIN;
}

// At most `limit` points, each bucket of consecutive events keeping its highest allocation so
// that the peak is always drawn.
std::vector<MemoryPoint> Downsample(const std::vector<MemoryPoint>& points, size_t limit) {
  if (points.size() <= limit) return points;
  // By allocated bytes, then (memory samples) by reserved bytes.
  const auto lower = [](const MemoryPoint& a, const MemoryPoint& c) {
    return a.allocated != c.allocated ? a.allocated < c.allocated : a.reserved < c.reserved;
  };
  std::vector<MemoryPoint> out;
  out.reserve(limit);
  for (size_t b = 0; b < limit; ++b) {
    const size_t from = points.size() * b / limit, to = points.size() * (b + 1) / limit;
    const auto top = std::max_element(points.begin() + static_cast<std::ptrdiff_t>(from),
                                      points.begin() + static_cast<std::ptrdiff_t>(to), lower);
    out.push_back(*top);
  }
  return out;
}

DeviceMemory ForDevice(const common::MemoryEventTable& m, const std::vector<size_t>& rows,
                       int32_t device) {
  DeviceMemory d;
  d.device = device;
  d.events = rows.size();
  std::vector<MemoryPoint> points;
  points.reserve(rows.size());
  int64_t running = 0;
  bool allocator = false;
  for (size_t i : rows) {
    const bool sample = m.bytes[i] == 0 && m.total_allocated[i] < 0;
    if (!sample) {
      allocator = true;
      running = SaturatingAdd(running, m.bytes[i]);
    }
    MemoryPoint p{m.time[i],
                  m.total_allocated[i] >= 0 ? m.total_allocated[i]
                  : allocator               ? running
                                            : -1,
                  m.total_reserved[i]};
    if (p.allocated >= 0 && p.allocated > d.peak_allocated_bytes) {
      d.peak_allocated_bytes = p.allocated;
      d.peak_time = p.time;
    }
    d.peak_reserved_bytes = std::max(d.peak_reserved_bytes, p.reserved);
    points.push_back(p);
  }
  d.timeline = Downsample(points, kMemoryTimelinePoints);
  return d;
}

// Allocations by the innermost operator around them on their thread.
std::vector<OperatorAllocation> TopOperators(const common::WorkerTrace& t) {
  const common::HostSpanTable& h = t.host_spans;
  const common::MemoryEventTable& m = t.memory_events;
  struct Item {
    TimeNs time = 0, end = 0;
    size_t row = 0;
    bool is_event = false;
  };
  std::map<int64_t, std::vector<Item>> threads;
  for (size_t i = 0; i < m.size(); ++i) {
    if (m.bytes[i] > 0) threads[m.thread[i]].push_back({m.time[i], m.time[i], i, true});
  }
  for (size_t i = 0; i < h.size(); ++i) {
    if (IsOperatorSpan(h, i) && threads.contains(h.thread[i]))
      threads[h.thread[i]].push_back({h.start[i], h.end[i], i, false});
  }
  std::map<common::NameId, OperatorAllocation> by_name;
  for (auto& [thread, items] : threads) {
    SortRuns(items, [](const Item& a, const Item& b) {
      if (a.time != b.time) return a.time < b.time;
      if (a.is_event != b.is_event) return !a.is_event;  // a span opening at the event holds it
      if (a.end != b.end) return a.end > b.end;
      return a.row < b.row;  // over one span, the operator recorded first is taken as the outer
    });
    std::vector<const Item*> open;
    for (const Item& item : items) {
      while (!open.empty() && open.back()->end <= item.time) open.pop_back();
      if (!item.is_event) {
        open.push_back(&item);
        continue;
      }
      if (open.empty()) continue;
      OperatorAllocation& a = by_name[h.name[open.back()->row]];
      ++a.allocations;
      a.bytes = SaturatingAdd(a.bytes, m.bytes[item.row]);
    }
  }
  std::vector<OperatorAllocation> out;
  for (auto& [id, a] : by_name) {
    a.name = std::string(t.strings.Get(id));
    out.push_back(std::move(a));
  }
  std::sort(out.begin(), out.end(), [](const OperatorAllocation& a, const OperatorAllocation& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.name < b.name;
  });
  if (out.size() > 10) out.resize(10);
  return out;
}

WorkerMemory ForWorker(const common::WorkerTrace& t) {
  WorkerMemory w;
  w.rank = t.info.rank;
  const common::MemoryEventTable& m = t.memory_events;
  std::map<int32_t, std::vector<size_t>> by_device;
  std::vector<size_t> order(m.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&m](size_t a, size_t b) { return m.time[a] < m.time[b]; });
  for (size_t i : order) by_device[m.device[i]].push_back(i);
  for (const auto& [device, rows] : by_device) {
    DeviceMemory d = ForDevice(m, rows, device);
    for (const common::DeviceInfo& info : t.info.devices) {
      if (device < 0 || info.id != device || info.total_memory_bytes <= 0) continue;
      d.total_memory_bytes = info.total_memory_bytes;
      d.headroom_bytes = SaturatingAdd(
          info.total_memory_bytes,
          -std::max<int64_t>(0, std::max(d.peak_allocated_bytes, d.peak_reserved_bytes)));
    }
    w.devices.push_back(std::move(d));
  }
  w.top_operators = TopOperators(t);
  return w;
}

}  // namespace

MemoryReport ComputeMemory(const common::CaptureView& capture) {
  std::vector<std::optional<WorkerMemory>> all(capture.size());
  ParallelFor(capture.size(), [&](size_t w) { all[w] = ComputeWorkerMemory(capture.worker(w)); });
  return FinishMemory(std::move(all));
}

std::optional<WorkerMemory> ComputeWorkerMemory(const common::WorkerTrace& trace) {
  if (trace.memory_events.size() == 0) return std::nullopt;
  return ForWorker(trace);
}

MemoryReport FinishMemory(std::vector<std::optional<WorkerMemory>> all) {
  MemoryReport report;
  for (std::optional<WorkerMemory>& worker : all) {
    if (!worker) continue;
    for (const DeviceMemory& d : worker->devices) {
      if (!d.headroom_bytes) continue;
      if (!report.nearest_oom || *d.headroom_bytes < report.nearest_oom->headroom_bytes) {
        report.nearest_oom = NearestOutOfMemory{
            worker->rank, d.device, std::max(d.peak_allocated_bytes, d.peak_reserved_bytes),
            *d.total_memory_bytes, *d.headroom_bytes};
      }
    }
    report.workers.push_back(std::move(*worker));
  }
  std::sort(report.workers.begin(), report.workers.end(),
            [](const WorkerMemory& a, const WorkerMemory& b) { return a.rank < b.rank; });
  return report;
}

}  // namespace podscope::analysis
