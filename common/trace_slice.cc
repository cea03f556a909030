#include "common/trace_slice.h"

#include <algorithm>
#include <functional>

namespace podscope::common {

namespace {

// Drops the rows of every column of `table` where keep[i] is false.
template <typename Table>
void KeepRows(const std::vector<bool>& keep, Table* table) {
  table->ForEachColumn([&keep](auto& column) {
    size_t out = 0;
    for (size_t i = 0; i < column.size(); ++i) {
      if (keep[i]) column[out++] = column[i];
    }
    column.resize(out);
  });
}

template <typename Table, typename Inside>
void KeepWhere(Table* table, Inside inside) {
  std::vector<bool> keep(table->size());
  for (size_t i = 0; i < keep.size(); ++i) keep[i] = inside(i);
  KeepRows(keep, table);
}

// Appends rows [from, from + n) of every column of `in` to `out`. Both tables list the same
// columns in the same order (ForEachColumn), so the i-th column of one matches the other's.
template <typename Table>
void AppendRows(const Table& in, size_t from, size_t n, Table* out) {
  std::vector<const void*> in_columns;
  in.ForEachColumn([&in_columns](const auto& column) { in_columns.push_back(&column); });
  size_t c = 0;
  out->ForEachColumn([&](auto& column) {
    const auto& source =
        *static_cast<const std::remove_reference_t<decltype(column)>*>(in_columns[c++]);
    const auto first = source.begin() + static_cast<ptrdiff_t>(from);
    column.insert(column.end(), first, first + static_cast<ptrdiff_t>(n));
  });
}

}  // namespace

void KeepWindow(TimeNs begin, TimeNs end, WorkerTrace* t) {
  KeepEndedBetween(begin, begin - 1, end, t);
}

void KeepEndedBetween(TimeNs begin, TimeNs after, TimeNs end, WorkerTrace* t) {
  auto span_inside = [begin, after, end](const std::vector<TimeNs>& s,
                                         const std::vector<TimeNs>& e) {
    return [&s, &e, begin, after, end](size_t i) {
      return s[i] >= begin && e[i] > after && e[i] <= end;
    };
  };
  auto instant_inside = [begin, after, end](const std::vector<TimeNs>& time) {
    return [&time, begin, after, end](size_t i) {
      return time[i] >= begin && time[i] > after && time[i] <= end;
    };
  };
  KeepWhere(&t->kernels, span_inside(t->kernels.start, t->kernels.end));
  KeepWhere(&t->memcpys, span_inside(t->memcpys.start, t->memcpys.end));
  KeepWhere(&t->runtime_calls, span_inside(t->runtime_calls.start, t->runtime_calls.end));
  KeepWhere(&t->host_spans, span_inside(t->host_spans.start, t->host_spans.end));
  KeepWhere(&t->collectives, span_inside(t->collectives.enqueue, t->collectives.kernel_end));
  KeepWhere(&t->steps, span_inside(t->steps.start, t->steps.end));
  KeepWhere(&t->host_samples, instant_inside(t->host_samples.time));
  KeepWhere(&t->memory_events, instant_inside(t->memory_events.time));
}

void MapTimes(const ClockModel& clock, WorkerTrace* t) {
  auto map = [&clock](std::vector<TimeNs>& column) {
    for (TimeNs& v : column) v = clock.ToAligned(v);
  };
  map(t->kernels.start), map(t->kernels.end);
  map(t->memcpys.start), map(t->memcpys.end);
  map(t->runtime_calls.start), map(t->runtime_calls.end);
  map(t->host_spans.start), map(t->host_spans.end);
  map(t->collectives.enqueue), map(t->collectives.kernel_start), map(t->collectives.kernel_end);
  map(t->steps.start), map(t->steps.end);
  map(t->host_samples.time);
  map(t->memory_events.time);
}

absl::Status ForEachChunk(const WorkerTrace& trace, size_t max_events,
                          const std::function<absl::Status(WorkerTrace)>& visit) {
  max_events = std::max<size_t>(max_events, 1);
  WorkerTrace chunk;
  size_t room = 0;
  bool open = false;
  auto start = [&] {
    chunk = WorkerTrace();
    chunk.info = trace.info;
    chunk.clock = trace.clock;
    room = max_events;
    open = true;
  };
  // Each chunk carries the names its rows use, not the whole table: a rank with many long kernel
  // names would otherwise send and store them once per chunk.
  std::vector<NameId> remap;
  auto close = [&]() -> absl::Status {
    open = false;
    remap.assign(trace.strings.size(), StringTable::kNotFound);
    for (std::vector<NameId>* column :
         {&chunk.kernels.name, &chunk.memcpys.name, &chunk.runtime_calls.name,
          &chunk.host_spans.name, &chunk.collectives.communicator, &chunk.collectives.dtype,
          &chunk.collectives.algorithm, &chunk.collectives.protocol}) {
      for (NameId& id : *column) {
        if (id >= remap.size()) continue;  // not a name: the chunk's checks say so
        if (remap[id] == StringTable::kNotFound)
          remap[id] = chunk.strings.Intern(trace.strings.Get(id));
        id = remap[id];
      }
    }
    return visit(std::move(chunk));
  };
  absl::Status status;
  auto split = [&](const auto& table, auto member) {
    for (size_t from = 0; from < table.size() && status.ok();) {
      if (!open) start();
      const size_t n = std::min(room, table.size() - from);
      AppendRows(table, from, n, &(chunk.*member));
      from += n;
      room -= n;
      if (room == 0) status = close();
    }
  };
  split(trace.kernels, &WorkerTrace::kernels);
  split(trace.memcpys, &WorkerTrace::memcpys);
  split(trace.runtime_calls, &WorkerTrace::runtime_calls);
  split(trace.host_spans, &WorkerTrace::host_spans);
  split(trace.collectives, &WorkerTrace::collectives);
  split(trace.steps, &WorkerTrace::steps);
  split(trace.host_samples, &WorkerTrace::host_samples);
  split(trace.memory_events, &WorkerTrace::memory_events);
  if (!status.ok()) return status;
  if (open) return close();
  if (trace.Counts().Total() == 0) {
    start();
    return close();  // at least one, even for an empty trace
  }
  return absl::OkStatus();
}

std::vector<WorkerTrace> SplitIntoChunks(WorkerTrace trace, size_t max_events) {
  if (trace.Counts().Total() <= std::max<size_t>(max_events, 1)) {
    std::vector<WorkerTrace> one;
    one.push_back(std::move(trace));
    return one;
  }
  std::vector<WorkerTrace> chunks;
  (void)ForEachChunk(trace, max_events, [&chunks](WorkerTrace chunk) {
    chunks.push_back(std::move(chunk));
    return absl::OkStatus();
  });
  return chunks;
}

}  // namespace podscope::common
