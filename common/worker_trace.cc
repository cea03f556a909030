#include "common/worker_trace.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <type_traits>

#include "common/status_macros.h"
#include "common/str_util.h"

namespace podscope::common {
namespace {

// Reorders every column of `table` by ascending `key` (stable), without touching a table
// that is already sorted (the common case for agent-produced data). Each column is gathered into
// a new one in order, one column at a time: reads in the permutation's order, writes in sequence,
// and never more than one column's copy at once.
template <typename Table>
void SortTableBy(Table& table, const std::vector<TimeNs>& key) {
  if (std::is_sorted(key.begin(), key.end())) return;
  std::vector<uint32_t> order(key.size());  // order[destination] = source
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&key](uint32_t a, uint32_t b) { return key[a] < key[b]; });
  table.ForEachColumn([&order](auto& column) {
    std::remove_reference_t<decltype(column)> sorted;
    sorted.reserve(column.size());
    for (uint32_t source : order) sorted.push_back(std::move(column[source]));
    column.swap(sorted);
  });
}

template <typename Table>
absl::Status CheckColumnLengths(const Table& table, std::string_view table_name) {
  const size_t rows = table.size();
  int index = 0;
  absl::Status status;
  table.ForEachColumn([&](const auto& column) {
    if (status.ok() && column.size() != rows) {
      status = absl::DataLossError(
          StrCat(table_name, ": column ", index, " has ", column.size(), " rows, expected ", rows));
    }
    ++index;
  });
  return status;
}

absl::Status CheckNames(const std::vector<NameId>& ids, const StringTable& strings,
                        std::string_view what) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!strings.Contains(ids[i])) {
      return absl::DataLossError(StrCat(what, " row ", i, ": name id ", ids[i],
                                        " outside the string table (", strings.size(),
                                        " strings)"));
    }
  }
  return absl::OkStatus();
}

template <typename Enum>
absl::Status CheckEnum(const std::vector<Enum>& values, int count, std::string_view what) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (static_cast<int>(values[i]) >= count) {
      return absl::DataLossError(
          StrCat(what, " row ", i, ": value ", static_cast<int>(values[i]), " out of range"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string WorkerInfo::DisplayName() const {
  std::string who = !host.empty()           ? host
                    : !process_name.empty() ? StrCat(process_name, " pid ", pid)
                                            : StrCat("pid ", pid);
  return StrCat("rank ", rank, " (", who, ")");
}

EventCounts WorkerTrace::Counts() const {
  return EventCounts{kernels.size(),      memcpys.size(),      runtime_calls.size(),
                     host_spans.size(),   collectives.size(),  steps.size(),
                     host_samples.size(), memory_events.size()};
}

void WorkerTrace::SortByTime() {
  SortTableBy(kernels, kernels.start);
  SortTableBy(memcpys, memcpys.start);
  SortTableBy(runtime_calls, runtime_calls.start);
  SortTableBy(host_spans, host_spans.start);
  SortTableBy(collectives, collectives.kernel_start);
  SortTableBy(steps, steps.start);
  SortTableBy(host_samples, host_samples.time);
  SortTableBy(memory_events, memory_events.time);
}

absl::Status WorkerTrace::Validate() const {
  RETURN_IF_ERROR(CheckColumnLengths(kernels, "kernels"));
  RETURN_IF_ERROR(CheckColumnLengths(memcpys, "memcpys"));
  RETURN_IF_ERROR(CheckColumnLengths(runtime_calls, "runtime_calls"));
  RETURN_IF_ERROR(CheckColumnLengths(host_spans, "host_spans"));
  RETURN_IF_ERROR(CheckColumnLengths(collectives, "collectives"));
  RETURN_IF_ERROR(CheckColumnLengths(steps, "steps"));
  RETURN_IF_ERROR(CheckColumnLengths(host_samples, "host_samples"));
  RETURN_IF_ERROR(CheckColumnLengths(memory_events, "memory_events"));
  const std::pair<const std::vector<NameId>*, std::string_view> name_columns[] = {
      {&kernels.name, "kernels"},
      {&memcpys.name, "memcpys"},
      {&runtime_calls.name, "runtime_calls"},
      {&host_spans.name, "host_spans"},
      {&collectives.communicator, "collectives.communicator"},
      {&collectives.dtype, "collectives.dtype"},
      {&collectives.algorithm, "collectives.algorithm"},
      {&collectives.protocol, "collectives.protocol"},
  };
  for (const auto& [column, what] : name_columns) {
    RETURN_IF_ERROR(CheckNames(*column, strings, what));
  }
  if (absl::Status s = CheckEnum(kernels.kernel_class, kKernelClassCount, "kernels.class"); !s.ok())
    return s;
  RETURN_IF_ERROR(CheckEnum(memcpys.kind, kMemcpyKindCount, "memcpys.kind"));
  if (absl::Status s = CheckEnum(runtime_calls.api_kind, kApiKindCount, "runtime_calls.api_kind");
      !s.ok())
    return s;
  if (absl::Status s =
          CheckEnum(host_spans.category, kHostSpanCategoryCount, "host_spans.category");
      !s.ok())
    return s;
  return CheckEnum(collectives.op, kCollectiveOpCount, "collectives.op");
}

std::pair<TimeNs, TimeNs> WorkerTrace::TimeRange() const {
  TimeNs lo = std::numeric_limits<TimeNs>::max();
  TimeNs hi = std::numeric_limits<TimeNs>::min();
  auto widen = [&](const std::vector<TimeNs>& starts, const std::vector<TimeNs>& ends) {
    for (size_t i = 0; i < starts.size(); ++i) {
      lo = std::min(lo, starts[i]);
      hi = std::max(hi, ends[i]);
    }
  };
  widen(kernels.start, kernels.end);
  widen(memcpys.start, memcpys.end);
  widen(runtime_calls.start, runtime_calls.end);
  widen(host_spans.start, host_spans.end);
  if (lo > hi) return {0, 0};
  return {lo, hi};
}

}  // namespace podscope::common
