#include "common/watch_summary.h"

#include <algorithm>
#include <climits>
#include <numeric>

namespace podscope::common {

uint64_t CommunicatorHash(std::string_view name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

TimeNs CommunicationKernelTime(const std::vector<CollectiveArrival>& collectives) {
  std::vector<std::pair<TimeNs, TimeNs>> kernels;
  kernels.reserve(collectives.size());
  for (const CollectiveArrival& a : collectives) kernels.emplace_back(a.start_ns, a.end_ns);
  std::sort(kernels.begin(), kernels.end());
  TimeNs covered = 0, covered_to = INT64_MIN;
  for (const auto& [start, end] : kernels) {
    const TimeNs from = std::max(start, covered_to);
    if (end > from) covered += end - from;
    covered_to = std::max(covered_to, end);
  }
  return covered;
}

std::vector<StepSummary> SummarizeSteps(const WorkerTrace& w) {
  const CollectiveTable& c = w.collectives;
  std::vector<size_t> order(c.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return c.enqueue[a] < c.enqueue[b]; });
  std::vector<size_t> steps(w.steps.size());
  std::iota(steps.begin(), steps.end(), 0);
  std::sort(steps.begin(), steps.end(),
            [&](size_t a, size_t b) { return w.steps.start[a] < w.steps.start[b]; });

  std::vector<StepSummary> out;
  out.reserve(steps.size());
  size_t next = 0;  // first collective not launched before the current step
  for (size_t i : steps) {
    StepSummary s;
    s.rank = w.info.rank;
    s.step = w.steps.number[i];
    s.start_ns = w.steps.start[i];
    s.end_ns = w.steps.end[i];
    while (next < order.size() && c.enqueue[order[next]] < s.start_ns) ++next;
    for (size_t k = next; k < order.size() && c.enqueue[order[k]] < s.end_ns; ++k) {
      const size_t row = order[k];
      CollectiveArrival a;
      a.communicator = CommunicatorHash(w.strings.Get(c.communicator[row]));
      a.sequence = c.sequence[row];
      a.op = c.op[row];
      a.nranks = c.nranks[row];
      a.bytes = c.bytes[row];
      a.enqueue_ns = c.enqueue[row];
      a.start_ns = c.kernel_start[row];
      a.end_ns = c.kernel_end[row];
      s.collectives.push_back(a);
    }
    s.comm_kernel_ns = CommunicationKernelTime(s.collectives);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace podscope::common
