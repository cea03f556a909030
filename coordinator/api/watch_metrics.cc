#include "coordinator/api/watch_metrics.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include "common/str_util.h"
#include "fmt/format.h"

namespace podscope::coordinator {

using common::TimeNs;

std::string PromLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

namespace {

void Family(std::string* out, std::string_view name, std::string_view type, std::string_view help) {
  common::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

std::string Seconds(TimeNs ns) { return fmt::format("{:.6f}", static_cast<double>(ns) / 1e9); }

void AppendCounters(const watch::ServiceCounters& c, std::string* out) {
  Family(out, "podscope_watch_steps_total", "counter",
         "Step summaries taken into the watch windows.");
  common::StrAppend(out, "podscope_watch_steps_total ", c.steps, "\n");
  Family(out, "podscope_watch_refused_steps_total", "counter",
         "Step summaries refused as malformed.");
  common::StrAppend(out, "podscope_watch_refused_steps_total ", c.refused_steps, "\n");
  Family(out, "podscope_watch_refused_jobs_total", "counter",
         "Watch data dropped for a job past watch.max_jobs, or past an agent's "
         "watch.max_jobs_per_agent.");
  common::StrAppend(out, "podscope_watch_refused_jobs_total ", c.refused_jobs, "\n");
  Family(out, "podscope_watch_forgotten_jobs_total", "counter",
         "Watched jobs forgotten after watch.forget_quiet_jobs_after_s without data.");
  common::StrAppend(out, "podscope_watch_forgotten_jobs_total ", c.forgotten_jobs, "\n");
  Family(out, "podscope_watch_memory_bytes", "gauge",
         "What the watch keeps of every job (an estimate), bounded by watch.max_total_bytes.");
  common::StrAppend(out, "podscope_watch_memory_bytes ", c.memory_bytes, "\n");
  Family(out, "podscope_watch_over_memory_total", "counter",
         "Watch records dropped at a job's (watch.max_job_bytes) or the total memory bound.");
  common::StrAppend(out, "podscope_watch_over_memory_total ", c.over_memory, "\n");
  Family(out, "podscope_watch_agent_dropped_steps_total", "counter",
         "Step summaries agents' bounded queues dropped, as the agents report it.");
  common::StrAppend(out, "podscope_watch_agent_dropped_steps_total ", c.agent_dropped_steps, "\n");
  Family(out, "podscope_alerts_fired_total", "counter", "Alerts that fired.");
  common::StrAppend(out, "podscope_alerts_fired_total ", c.alerts_fired, "\n");
  Family(out, "podscope_alerts_resolved_total", "counter", "Alerts that resolved.");
  common::StrAppend(out, "podscope_alerts_resolved_total ", c.alerts_resolved, "\n");
  Family(out, "podscope_evidence_captures_total", "counter",
         "Evidence captures for alerts that fired, by outcome (rate_limited: the job had one "
         "within evidence.interval_s).");
  common::StrAppend(
      out, "podscope_evidence_captures_total{outcome=\"started\"} ", c.evidence_captures, "\n",
      "podscope_evidence_captures_total{outcome=\"rate_limited\"} ", c.evidence_rate_limited, "\n",
      "podscope_evidence_captures_total{outcome=\"failed\"} ", c.evidence_failed, "\n");
}

// Firing alerts by job, rule and kind: what the shipped Prometheus rules alert on.
void AppendFiring(const std::vector<watch::Alert>& alerts, std::string* out) {
  std::map<std::tuple<std::string, std::string, std::string>, int> firing;
  for (const watch::Alert& a : alerts) {
    if (a.state == watch::AlertState::kFiring)
      ++firing[{a.job, a.rule, std::string(watch::AlertKindName(a.kind))}];
  }
  Family(out, "podscope_alerts_firing", "gauge", "Alerts firing now, by job, rule and kind.");
  for (const auto& [key, n] : firing) {
    common::StrAppend(out, "podscope_alerts_firing{training_job=\"",
                      PromLabelValue(std::get<0>(key)), "\",rule=\"",
                      PromLabelValue(std::get<1>(key)), "\",kind=\"", std::get<2>(key), "\"} ", n,
                      "\n");
  }
}

// The median rank's exposed communication over its step time; nothing without a timed step.
std::optional<double> MedianExposedShare(const watch::WindowStats& w) {
  std::vector<double> shares;
  for (const watch::RankWindow& r : w.ranks) {
    if (r.step_time_ns > 0)
      shares.push_back(static_cast<double>(r.exposed_comm_ns) /
                       static_cast<double>(r.step_time_ns));
  }
  if (shares.empty()) return std::nullopt;
  std::nth_element(shares.begin(), shares.begin() + static_cast<std::ptrdiff_t>(shares.size() / 2),
                   shares.end());
  return shares[shares.size() / 2];
}

// Per job: its ranks, last step, step-time quantiles, exposed communication and bandwidth.
void AppendJobGauges(const std::map<std::string, watch::WindowStats>& windows, std::string* out) {
  Family(out, "podscope_watch_job_ranks", "gauge", "Ranks in the job's watch window.");
  for (const auto& [job, w] : windows) {
    common::StrAppend(out, "podscope_watch_job_ranks{training_job=\"", PromLabelValue(job), "\"} ",
                      w.ranks.size(), "\n");
  }
  Family(out, "podscope_watch_job_last_step", "gauge", "The newest settled step of the job.");
  for (const auto& [job, w] : windows) {
    common::StrAppend(out, "podscope_watch_job_last_step{training_job=\"", PromLabelValue(job),
                      "\"} ", w.last_step, "\n");
  }
  Family(out, "podscope_watch_job_step_seconds", "gauge",
         "The job's step time over its window (stat p50, p90, p99 of the per-step median over "
         "ranks; a gauge, not a summary).");
  for (const auto& [job, w] : windows) {
    if (w.step_time_ns.empty()) continue;
    std::vector<TimeNs> sorted = w.step_time_ns;
    std::sort(sorted.begin(), sorted.end());
    for (const auto& [label, q] :
         {std::pair<const char*, double>{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}}) {
      const size_t i =
          std::min(sorted.size() - 1, static_cast<size_t>(q * static_cast<double>(sorted.size())));
      common::StrAppend(out, "podscope_watch_job_step_seconds{training_job=\"", PromLabelValue(job),
                        "\",stat=\"", label, "\"} ", Seconds(sorted[i]), "\n");
    }
  }
  Family(out, "podscope_watch_job_exposed_communication_ratio", "gauge",
         "The median rank's exposed communication (its last collective's wait and transfer) over "
         "its step time.");
  for (const auto& [job, w] : windows) {
    const std::optional<double> share = MedianExposedShare(w);
    if (!share) continue;
    common::StrAppend(out, "podscope_watch_job_exposed_communication_ratio{training_job=\"",
                      PromLabelValue(job), "\"} ", fmt::format("{:.6f}", *share), "\n");
  }
  Family(out, "podscope_watch_job_allreduce_busbw_bytes_per_second", "gauge",
         "AllReduce bus bandwidth over the window, bytes-weighted, in bytes per second "
         "(Prometheus's base unit; podscope's reports say GB/s).");
  for (const auto& [job, w] : windows) {
    if (w.allreduce_bytes <= 0) continue;
    common::StrAppend(out, "podscope_watch_job_allreduce_busbw_bytes_per_second{training_job=\"",
                      PromLabelValue(job), "\"} ",
                      fmt::format("{:.0f}", w.allreduce_busbw_gbytes_per_s * 1e9), "\n");
  }
}

// The indexes of the job's ranks that caused the most delay, most first: only these get
// per-rank series, a bound that holds at any job size.
std::vector<size_t> TopRanks(const watch::WindowStats& w) {
  std::vector<size_t> order;
  for (size_t i = 0; i < w.ranks.size(); ++i) {
    if (w.ranks[i].caused_delay_ns > 0) order.push_back(i);
  }
  const size_t n = std::min(order.size(), kMetricsTopRanks);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                    [&](size_t a, size_t b) {
                      return w.ranks[a].caused_delay_ns != w.ranks[b].caused_delay_ns
                                 ? w.ranks[a].caused_delay_ns > w.ranks[b].caused_delay_ns
                                 : w.ranks[a].rank < w.ranks[b].rank;
                    });
  order.resize(n);
  return order;
}

std::string RankLabels(const std::string& job, const watch::WindowStats& w, size_t i) {
  const std::string& host = i < w.hosts.size() ? w.hosts[i] : std::string();
  return common::StrCat("{training_job=\"", PromLabelValue(job), "\",rank=\"", w.ranks[i].rank,
                        "\",host=\"", PromLabelValue(host), "\"} ");
}

void AppendRankGauges(const std::map<std::string, watch::WindowStats>& windows, std::string* out) {
  std::map<std::string, std::vector<size_t>> top;
  for (const auto& [job, w] : windows) top[job] = TopRanks(w);
  Family(out, "podscope_watch_rank_caused_delay_seconds", "gauge",
         "Delay a rank caused others over the window (it arrived last), for the job's top ranks "
         "only.");
  for (const auto& [job, w] : windows) {
    for (const size_t i : top[job]) {
      common::StrAppend(out, "podscope_watch_rank_caused_delay_seconds", RankLabels(job, w, i),
                        Seconds(w.ranks[i].caused_delay_ns), "\n");
    }
  }
  Family(out, "podscope_watch_rank_last_arriver_share", "gauge",
         "Share of its collectives a rank arrived last at, for the same top ranks.");
  for (const auto& [job, w] : windows) {
    for (const size_t i : top[job]) {
      const watch::RankWindow& r = w.ranks[i];
      const double share = r.collectives > 0 ? static_cast<double>(r.last_arrivals) /
                                                   static_cast<double>(r.collectives)
                                             : 0;
      common::StrAppend(out, "podscope_watch_rank_last_arriver_share", RankLabels(job, w, i),
                        fmt::format("{:.6f}", share), "\n");
    }
  }
}

}  // namespace

void AppendWatchMetrics(const watch::WatchService& watch, std::string* out) {
  AppendCounters(watch.counters(), out);
  AppendFiring(watch.Alerts(), out);
  const std::map<std::string, watch::WindowStats> windows = watch.Windows();
  AppendJobGauges(windows, out);
  AppendRankGauges(windows, out);
}

}  // namespace podscope::coordinator
