#include "coordinator/api/watch_metrics.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "common/str_util.h"
#include "fmt/format.h"

namespace podscope::coordinator {

std::string PromLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

namespace {

void Family(std::string* out, std::string_view name, std::string_view type, std::string_view help) {
  common::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

std::string Seconds(common::TimeNs ns) { return fmt::format("{:.6f}", static_cast<double>(ns) / 1e9); }

}  // namespace

void AppendWatchMetrics(const watch::WatchService& watch, std::string* out) {
  const watch::ServiceCounters c = watch.counters();
  Family(out, "podscope_watch_steps_total", "counter", "Step summaries taken into the watch windows.");
  common::StrAppend(out, "podscope_watch_steps_total ", c.steps, "\n");
  Family(out, "podscope_watch_refused_steps_total", "counter", "Step summaries refused as malformed.");
  common::StrAppend(out, "podscope_watch_refused_steps_total ", c.refused_steps, "\n");
  Family(out, "podscope_watch_agent_dropped_steps_total", "counter",
         "Step summaries agents' bounded queues dropped, as the agents report it.");
  common::StrAppend(out, "podscope_watch_agent_dropped_steps_total ", c.agent_dropped_steps, "\n");
  Family(out, "podscope_alerts_fired_total", "counter", "Alerts that fired.");
  common::StrAppend(out, "podscope_alerts_fired_total ", c.alerts_fired, "\n");
  Family(out, "podscope_alerts_resolved_total", "counter", "Alerts that resolved.");
  common::StrAppend(out, "podscope_alerts_resolved_total ", c.alerts_resolved, "\n");
  Family(out, "podscope_evidence_captures_total", "counter",
         "Evidence captures for alerts that fired, by outcome (rate_limited: the job had one within evidence.interval_s).");
  common::StrAppend(out, "podscope_evidence_captures_total{outcome=\"started\"} ", c.evidence_captures, "\n",
                    "podscope_evidence_captures_total{outcome=\"rate_limited\"} ", c.evidence_rate_limited, "\n",
                    "podscope_evidence_captures_total{outcome=\"failed\"} ", c.evidence_failed, "\n");

  // Firing alerts by job, rule and kind: what the shipped Prometheus rules alert on.
  std::map<std::tuple<std::string, std::string, std::string>, int> firing;
  for (const watch::Alert& a : watch.Alerts()) {
    if (a.state == watch::AlertState::kFiring) ++firing[{a.job, a.rule, std::string(watch::AlertKindName(a.kind))}];
  }
  Family(out, "podscope_alerts_firing", "gauge", "Alerts firing now, by job, rule and kind.");
  for (const auto& [key, n] : firing) {
    common::StrAppend(out, "podscope_alerts_firing{training_job=\"", PromLabelValue(std::get<0>(key)), "\",rule=\"",
                      PromLabelValue(std::get<1>(key)), "\",kind=\"", std::get<2>(key), "\"} ", n, "\n");
  }

  const std::map<std::string, watch::WindowStats> windows = watch.Windows();
  Family(out, "podscope_watch_job_ranks", "gauge", "Ranks in the job's watch window.");
  for (const auto& [job, w] : windows) {
    common::StrAppend(out, "podscope_watch_job_ranks{training_job=\"", PromLabelValue(job), "\"} ", w.ranks.size(), "\n");
  }
  Family(out, "podscope_watch_job_last_step", "gauge", "The newest settled step of the job.");
  for (const auto& [job, w] : windows) {
    common::StrAppend(out, "podscope_watch_job_last_step{training_job=\"", PromLabelValue(job), "\"} ", w.last_step, "\n");
  }
  Family(out, "podscope_watch_job_step_seconds", "gauge",
         "The job's step time: the median over ranks of the newest settled step.");
  for (const auto& [job, w] : windows) {
    if (w.step_time_ns.empty()) continue;
    common::StrAppend(out, "podscope_watch_job_step_seconds{training_job=\"", PromLabelValue(job), "\"} ",
                      Seconds(w.step_time_ns.back()), "\n");
  }
  Family(out, "podscope_watch_job_allreduce_busbw_gbps", "gauge",
         "AllReduce bus bandwidth over the window, bytes-weighted, GB/s.");
  for (const auto& [job, w] : windows) {
    if (w.allreduce_bytes <= 0) continue;
    common::StrAppend(out, "podscope_watch_job_allreduce_busbw_gbps{training_job=\"", PromLabelValue(job), "\"} ",
                      fmt::format("{:.3f}", w.allreduce_busbw_gbps), "\n");
  }
  // Only the ranks that caused the most delay: a bound that holds at any job size.
  Family(out, "podscope_watch_rank_caused_delay_seconds", "gauge",
         "Delay a rank caused others over the window (it arrived last), for the job's top ranks only.");
  for (const auto& [job, w] : windows) {
    std::vector<size_t> order;
    for (size_t i = 0; i < w.ranks.size(); ++i) {
      if (w.ranks[i].caused_delay_ns > 0) order.push_back(i);
    }
    const size_t n = std::min(order.size(), kMetricsTopRanks);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(), [&](size_t a, size_t b) {
      return w.ranks[a].caused_delay_ns != w.ranks[b].caused_delay_ns ? w.ranks[a].caused_delay_ns > w.ranks[b].caused_delay_ns
                                                                      : w.ranks[a].rank < w.ranks[b].rank;
    });
    for (size_t k = 0; k < n; ++k) {
      const size_t i = order[k];
      const std::string& host = i < w.hosts.size() ? w.hosts[i] : std::string();
      common::StrAppend(out, "podscope_watch_rank_caused_delay_seconds{training_job=\"", PromLabelValue(job), "\",rank=\"",
                        w.ranks[i].rank, "\",host=\"", PromLabelValue(host), "\"} ", Seconds(w.ranks[i].caused_delay_ns),
                        "\n");
    }
  }
}

}  // namespace podscope::coordinator
