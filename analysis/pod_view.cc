#include "analysis/pod_view.h"

#include <algorithm>
#include <map>
#include <set>

#include "analysis/statistics.h"

namespace podscope::analysis {

PodView ComputePodView(const std::vector<WorkerBreakdown>& breakdown, int64_t first_step,
                       int64_t last_step) {
  PodView view;
  std::set<int64_t> numbers;
  for (const WorkerBreakdown& w : breakdown) {
    for (const StepBreakdown& s : w.steps) {
      if ((first_step < 0 || s.step >= first_step) && (last_step < 0 || s.step <= last_step)) {
        numbers.insert(s.step);
      }
    }
  }
  view.step_numbers.assign(numbers.begin(), numbers.end());
  std::map<int64_t, size_t> column;
  for (size_t i = 0; i < view.step_numbers.size(); ++i) column[view.step_numbers[i]] = i;
  std::vector<PodStep> steps(view.step_numbers.size());
  for (size_t i = 0; i < steps.size(); ++i) steps[i].step = view.step_numbers[i];
  for (const WorkerBreakdown& w : breakdown) {
    view.ranks.push_back(w.rank);
    std::vector<TimeNs>& row = view.step_time_ns.emplace_back(view.step_numbers.size(), -1);
    for (const StepBreakdown& s : w.steps) {
      auto it = column.find(s.step);
      if (it == column.end()) continue;
      row[it->second] = s.span_ns;
      steps[it->second].rows.push_back(PodRow{w.rank, s, s.span_ns, 0, 0});
    }
  }
  for (PodStep& step : steps) {
    std::vector<TimeNs> times;
    for (const PodRow& r : step.rows) times.push_back(r.step_ns);
    if (times.empty()) continue;
    step.median_step_ns = Median(std::move(times));
    for (PodRow& r : step.rows) {
      r.deviation_ns = r.step_ns - step.median_step_ns;
      r.deviation_pct = step.median_step_ns > 0 ? 100.0 * static_cast<double>(r.deviation_ns) /
                                                      static_cast<double>(step.median_step_ns)
                                                : 0;
    }
    std::sort(step.rows.begin(), step.rows.end(),
              [](const PodRow& a, const PodRow& b) { return a.rank < b.rank; });
  }
  view.steps = std::move(steps);
  return view;
}

}  // namespace podscope::analysis
