#include "analysis/summary.h"

#include <algorithm>
#include <map>
#include <set>

#include "analysis/statistics.h"

namespace podscope::analysis {
namespace {

// The value at quantile q (0..1) of sorted values, nearest rank.
TimeNs Quantile(const std::vector<TimeNs>& sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t at = std::min(sorted.size() - 1,
                             static_cast<size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5));
  return sorted[at];
}

WorkerProfile ProfileOf(const common::CaptureView& capture, size_t w, const WorkerBreakdown& b) {
  WorkerProfile p;
  p.rank = b.rank;
  p.host = w < capture.size() ? capture.worker(w).info.host : "";
  p.steps = b.steps.size();
  if (b.steps.empty()) return p;
  for (const StepBreakdown& s : b.steps) {
    p.span_ns += s.span_ns;
    p.compute_ns += s.compute_ns;
    p.overlap_ns += s.overlap_ns;
    p.comm_wait_ns += s.comm_wait_ns;
    p.comm_transfer_ns += s.comm_transfer_ns;
    p.memcpy_ns += s.memcpy_ns;
    p.idle_ns += s.idle_input_ns + s.idle_launch_ns + s.idle_host_ns + s.idle_other_ns;
    p.before_ns += s.before_ns;
  }
  const TimeNs n = static_cast<TimeNs>(b.steps.size());
  for (TimeNs* v : {&p.span_ns, &p.compute_ns, &p.overlap_ns, &p.comm_wait_ns, &p.comm_transfer_ns,
                    &p.memcpy_ns, &p.idle_ns, &p.before_ns}) {
    *v /= n;
  }
  return p;
}

}  // namespace

SummaryReport Summarize(const common::CaptureView& capture,
                        const std::vector<WorkerBreakdown>& breakdown,
                        const StragglerReport& stragglers, const BandwidthReport& bandwidth,
                        const std::vector<std::string>& warnings) {
  SummaryReport s;
  s.ranks = capture.size();
  std::set<std::string> hosts;
  std::map<std::string, size_t> jobs;
  for (size_t i = 0; i < capture.size(); ++i) {
    if (!capture.worker(i).info.host.empty()) hosts.insert(capture.worker(i).info.host);
    ++jobs[capture.worker(i).info.job];
  }
  s.hosts = hosts.size();
  if (!jobs.empty()) {
    s.job = std::max_element(jobs.begin(), jobs.end(), [](const auto& a, const auto& b) {
              return a.second < b.second;
            })->first;
  }

  std::set<int64_t> numbers;
  std::vector<TimeNs> spans;
  std::map<std::string, size_t> sources;
  std::vector<std::pair<TimeNs, size_t>> mean_span;  // (mean step span, worker), workers with steps
  // (mean own time: span less the wait for other ranks, worker): in synchronous training every
  // rank's step lasts as long as the slowest's, so the slowest worker is the one with the most.
  std::vector<std::pair<TimeNs, size_t>> mean_own;
  for (size_t w = 0; w < breakdown.size(); ++w) {
    ++sources[std::string(StepSourceName(breakdown[w].step_source))];
    if (breakdown[w].steps.empty()) continue;
    TimeNs total = 0, own = 0;
    for (const StepBreakdown& b : breakdown[w].steps) {
      numbers.insert(b.step);
      spans.push_back(b.span_ns);
      total += b.span_ns;
      own += b.span_ns - b.comm_wait_ns;
    }
    mean_span.emplace_back(total / static_cast<TimeNs>(breakdown[w].steps.size()), w);
    mean_own.emplace_back(own / static_cast<TimeNs>(breakdown[w].steps.size()), w);
  }
  if (!sources.empty()) {
    s.step_source =
        std::max_element(sources.begin(), sources.end(), [](const auto& a, const auto& b) {
          return a.second < b.second;
        })->first;
  }
  s.steps = numbers.size();
  if (!numbers.empty()) {
    s.first_step = *numbers.begin();
    s.last_step = *numbers.rbegin();
  }
  std::sort(spans.begin(), spans.end());
  s.step_min_ns = spans.empty() ? 0 : spans.front();
  s.step_p50_ns = Median(spans);
  s.step_p90_ns = Quantile(spans, 0.9);
  s.step_max_ns = spans.empty() ? 0 : spans.back();
  s.window_step_time_ns = stragglers.window_step_time_ns;
  if (!mean_span.empty()) {
    std::sort(mean_span.begin(), mean_span.end());
    const size_t median = mean_span[(mean_span.size() - 1) / 2].second;
    std::stable_sort(mean_own.begin(), mean_own.end());
    size_t worst = mean_own.back().second;
    if (!stragglers.stragglers.empty() && stragglers.stragglers[0].worker < breakdown.size()) {
      worst = stragglers.stragglers[0].worker;
      s.worst_is_straggler = true;
    }
    s.median_worker = ProfileOf(capture, median, breakdown[median]);
    s.worst_worker = ProfileOf(capture, worst, breakdown[worst]);
    // Communication kernels alone on the device (wait + transfer): not hidden by computation.
    const WorkerProfile& m = s.median_worker;
    s.exposed_communication_ns = m.comm_wait_ns + m.comm_transfer_ns;
    s.exposed_communication_share =
        m.span_ns > 0 ? static_cast<double>(s.exposed_communication_ns) / m.span_ns : 0;
    const TimeNs communication = m.overlap_ns + s.exposed_communication_ns;
    if (communication > 0)
      s.overlap_pct =
          100.0 * static_cast<double>(m.overlap_ns) / static_cast<double>(communication);
  }

  s.straggler_count = stragglers.stragglers.size();
  for (size_t i = 0; i < stragglers.stragglers.size() && i < 5; ++i)
    s.stragglers.push_back(stragglers.stragglers[i]);
  s.step_time_loss_ns = stragglers.step_time_loss_ns;

  s.collectives = bandwidth.collectives.size();
  s.link_gbytes_per_s = bandwidth.link_gbytes_per_s;
  s.median_busbw_gbytes_per_s = bandwidth.median_busbw_gbytes_per_s;
  s.median_efficiency = bandwidth.median_efficiency;
  s.measured_allreduce_ns = bandwidth.measured_allreduce_ns;
  s.expected_allreduce_ns = bandwidth.expected_allreduce_ns;
  s.warnings = warnings;
  return s;
}

}  // namespace podscope::analysis
