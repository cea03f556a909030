#include "coordinator/watch/detectors.h"

#include <algorithm>
#include <climits>

#include "analysis/statistics.h"
#include "analysis/stragglers.h"
#include "common/ranges.h"
#include "common/str_util.h"

namespace podscope::coordinator::watch {
namespace {

using analysis::Median;

double Ms(TimeNs ns) { return static_cast<double>(ns) / 1e6; }

std::string Percent(double share) { return fmt::format("{:.1f}%", share * 100); }

std::vector<int64_t> WindowSteps(const WindowStats& w) {
  std::vector<int64_t> steps;
  for (int64_t s = w.first_step; s <= w.last_step && steps.size() < 1000; ++s) steps.push_back(s);
  return steps;
}

}  // namespace

std::vector<Finding> FindStragglers(const WindowStats& w, const AlertRule& rule) {
  std::vector<Finding> out;
  if (w.total_caused_delay_ns <= 0 || w.window_step_time_ns <= 0) return out;
  analysis::StragglerOptions options;
  options.min_share_of_caused_delay = rule.min_share_of_caused_delay;
  options.min_share_of_step_time = rule.min_share_of_step_time;
  options.min_last_arriver_share = rule.min_last_arriver_share;
  const double total = static_cast<double>(w.total_caused_delay_ns);
  const double step_time = static_cast<double>(w.window_step_time_ns);
  for (const RankWindow& r : w.ranks) {
    const double share_caused = static_cast<double>(r.caused_delay_ns) / total;
    // Persistence: the delay must hold without the rank's worst step. One hiccup (a process
    // descheduled once, a page fault storm) stays in 20 overlapping windows and would otherwise
    // fire on its own; a straggler causes delay step after step and loses one step's worth.
    const double share_step =
        static_cast<double>(r.caused_delay_ns - r.largest_step_caused_ns) / step_time;
    const double last_share =
        r.collectives ? static_cast<double>(r.last_arrivals) / static_cast<double>(r.collectives)
                      : 0;
    if (!analysis::IsCausedDelayStraggler(share_caused, share_step, last_share, w.ranks.size(),
                                          options))
      continue;
    Finding f;
    f.kind = AlertKind::kStraggler;
    f.subject = common::StrCat("rank ", r.rank);
    f.ranks = {r.rank};
    f.steps = r.late_steps;
    f.evidence = {{"caused_delay_ms", Ms(r.caused_delay_ns), ""},
                  {"share_of_caused_delay", share_caused, ""},
                  {"share_of_step_time", share_step, ""},
                  {"last_arriver_share", last_share, ""},
                  {"window_step_time_ms", Ms(w.window_step_time_ns), ""},
                  {"first_step", static_cast<double>(w.first_step), ""},
                  {"last_step", static_cast<double>(w.last_step), ""}};
    f.message = fmt::format(
        "rank {} held the others for {:.1f} ms over steps {}-{} ({} of all waiting it caused, "
        "last to arrive at {} of its collectives)",
        r.rank, Ms(r.caused_delay_ns), w.first_step, w.last_step, Percent(share_caused),
        Percent(last_share));
    out.push_back(std::move(f));
  }
  std::sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    return a.evidence[0].number > b.evidence[0].number;
  });
  return out;
}

std::vector<Finding> FindRegression(const WindowStats& w, const AlertRule& rule) {
  if (w.baseline_step_time_ns.size() < static_cast<size_t>(rule.min_baseline_steps) ||
      w.step_time_ns.empty()) {
    return {};
  }
  const TimeNs now = Median(w.step_time_ns);
  const TimeNs base = Median(w.baseline_step_time_ns);
  if (base <= 0) return {};
  if (static_cast<double>(now) <= static_cast<double>(base) * (1 + rule.max_slowdown)) return {};
  const double slowdown = static_cast<double>(now) / static_cast<double>(base) - 1;
  Finding f;
  f.kind = AlertKind::kRegression;
  f.subject = "job";
  f.steps = WindowSteps(w);
  f.evidence = {{"step_time_ms", Ms(now), ""},
                {"baseline_step_time_ms", Ms(base), ""},
                {"slowdown", slowdown, ""},
                {"baseline_steps", static_cast<double>(w.baseline_step_time_ns.size()), ""}};
  f.message = fmt::format(
      "median step time {:.1f} ms over steps {}-{}, {} slower than {:.1f} ms over the {} steps "
      "before",
      Ms(now), w.first_step, w.last_step, Percent(slowdown), Ms(base),
      w.baseline_step_time_ns.size());
  return {std::move(f)};
}

std::vector<Finding> FindExposedCommunication(const WindowStats& w, const AlertRule& rule) {
  std::vector<double> shares;
  for (const RankWindow& r : w.ranks) {
    if (r.step_time_ns > 0)
      shares.push_back(static_cast<double>(r.exposed_comm_ns) /
                       static_cast<double>(r.step_time_ns));
  }
  if (shares.empty()) return {};
  const double median = Median(shares);
  if (median <= rule.max_exposed_share) return {};
  Finding f;
  f.kind = AlertKind::kExposedCommunication;
  f.subject = "job";
  f.steps = WindowSteps(w);
  f.evidence = {{"exposed_share", median, ""},
                {"max_rank_exposed_share", *std::max_element(shares.begin(), shares.end()), ""}};
  f.message = fmt::format(
      "{} of the median rank's step time is exposed communication over steps {}-{} (rule: {})",
      Percent(median), w.first_step, w.last_step, Percent(rule.max_exposed_share));
  return {std::move(f)};
}

std::vector<Finding> FindAllReduceInefficiency(const WindowStats& w, const AlertRule& rule) {
  if (rule.link_gbytes_per_s <= 0 || w.allreduce_bytes <= 0) return {};
  const double efficiency = w.allreduce_busbw_gbytes_per_s / rule.link_gbytes_per_s;  // GB/s both
  if (efficiency >= rule.min_efficiency) return {};
  Finding f;
  f.kind = AlertKind::kAllReduceEfficiency;
  f.subject = "job";
  f.steps = WindowSteps(w);
  f.evidence = {{"busbw_gbytes_per_s", w.allreduce_busbw_gbytes_per_s, ""},
                {"efficiency", efficiency, ""},
                {"link_gbytes_per_s", rule.link_gbytes_per_s, ""}};
  f.message = fmt::format(
      "AllReduce bus bandwidth {:.1f} GB/s is {} of the {:.0f} GB/s link over steps {}-{}",
      w.allreduce_busbw_gbytes_per_s, Percent(efficiency), rule.link_gbytes_per_s, w.first_step,
      w.last_step);
  return {std::move(f)};
}

std::vector<Finding> FindHangs(const std::vector<CommunicatorProgress>& progress, TimeNs now,
                               const AlertRule& rule) {
  std::vector<Finding> out;
  for (const CommunicatorProgress& c : progress) {
    if (c.ranks.size() < 2) continue;
    // The newest collective anyone entered, and when the first rank entered it.
    int64_t newest = -1;
    for (const common::RankProgress& r : c.ranks) newest = std::max(newest, r.entered_sequence);
    if (newest < 0) continue;
    // A collective completes on one rank only once every rank entered it, so a rank that has
    // not entered the newest completed one has moved on since its report: its newer one is on
    // its way (a probe reports a communicator only once it has gone quiet).
    int64_t newest_completed = -1;
    for (const common::RankProgress& r : c.ranks)
      newest_completed = std::max(newest_completed, r.completed_sequence);
    TimeNs entered_at = INT64_MAX;
    const common::RankProgress* example = nullptr;
    std::vector<int32_t> missing;
    bool all_completed = true;
    bool any_stale = false;
    for (const common::RankProgress& r : c.ranks) {
      all_completed = all_completed && r.completed_sequence >= newest;
      any_stale = any_stale || r.entered_sequence < newest_completed;
      if (r.entered_sequence < newest) {
        missing.push_back(r.rank);
      } else if (r.entered_ns < entered_at) {
        entered_at = r.entered_ns;
        example = &r;
      }
    }
    if (all_completed || missing.empty() || example == nullptr) continue;
    // Stale reports wait for their newer ones up to twice the threshold; past that, a rank
    // silent that long is named with the ranks that never entered.
    const TimeNs wait = any_stale ? 2 * rule.hang_after_ns : rule.hang_after_ns;
    if (now - entered_at <= wait) continue;
    Finding f;
    f.kind = AlertKind::kHang;
    f.subject = fmt::format("communicator {:016x}", c.communicator);
    f.ranks = missing;
    for (const common::RankProgress& r : c.ranks)
      f.last_completed.emplace_back(r.rank, r.completed_sequence);
    f.evidence = {{"communicator", 0, fmt::format("{:016x}", c.communicator)},
                  {"sequence", static_cast<double>(newest), ""},
                  {"op", 0, std::string(common::CollectiveOpName(example->entered_op))},
                  {"bytes", static_cast<double>(example->entered_bytes), ""},
                  {"nranks", static_cast<double>(c.nranks), ""},
                  {"waiting_ranks", static_cast<double>(c.ranks.size() - missing.size()), ""},
                  {"waiting_s", static_cast<double>(now - entered_at) / 1e9, ""}};
    std::string names;
    for (size_t i = 0; i < missing.size() && i < 16; ++i)
      common::StrAppend(&names, i ? "," : "", missing[i]);
    if (missing.size() > 16) common::StrAppend(&names, ",... (", missing.size(), " ranks)");
    f.message = fmt::format(
        "rank(s) {} never entered {} #{} ({} bytes) of communicator {:016x}; {} rank(s) have "
        "waited "
        "in it for {:.0f} s",
        names, common::CollectiveOpName(example->entered_op), newest, example->entered_bytes,
        c.communicator, c.ranks.size() - missing.size(),
        static_cast<double>(now - entered_at) / 1e9);
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Finding> FindRanksNotReporting(const WindowStats& w) {
  if (w.missing_ranks.empty()) return {};
  Finding f;
  f.kind = AlertKind::kRanksNotReporting;
  f.subject = "job";
  f.ranks = w.missing_ranks;
  f.steps = {w.last_step};
  f.evidence = {{"ranks_missing", static_cast<double>(w.missing_ranks.size()), ""},
                {"since_step", static_cast<double>(w.missing_since_step), ""}};
  f.message = fmt::format(
      "{} of the job's ranks ({}) reported no step since step {} (the others are at step {}): "
      "their processes, or the agents that serve them{}, stopped; the other alerts wait for them",
      w.missing_ranks.size(), common::FormatRankList(w.missing_ranks), w.missing_since_step,
      w.last_step,
      w.missing_agents.empty() ? "" : fmt::format(" ({})", fmt::join(w.missing_agents, ", ")));
  return {std::move(f)};
}

std::vector<Finding> Detect(const WindowStats& window, const AlertRule& rule) {
  switch (rule.kind) {
    case AlertKind::kStraggler:
      return FindStragglers(window, rule);
    case AlertKind::kRegression:
      return FindRegression(window, rule);
    case AlertKind::kExposedCommunication:
      return FindExposedCommunication(window, rule);
    case AlertKind::kAllReduceEfficiency:
      return FindAllReduceInefficiency(window, rule);
    case AlertKind::kRanksNotReporting:
      return FindRanksNotReporting(window);
    case AlertKind::kHang:
      return {};
  }
  return {};
}

}  // namespace podscope::coordinator::watch
