#include "coordinator/watch/watch_engine.h"

#include <algorithm>
#include <set>

#include "common/str_util.h"
#include "coordinator/watch/detectors.h"

namespace podscope::coordinator::watch {
namespace {

bool SameRule(const AlertRule& a, const AlertRule& b) {
  return RulesToJson({.rules = {a}}) == RulesToJson({.rules = {b}});
}

// Windows missing ranks judge nothing else, so the rule that says so is always there: a rule set
// without one (stored before it existed, or written without it) gets the default, which a rule
// of that kind with "enabled": false turns off.
RuleSet WithNotReportingRule(RuleSet rules) {
  for (const AlertRule& r : rules.rules) {
    if (r.kind == AlertKind::kRanksNotReporting) return rules;
  }
  for (const AlertRule& r : DefaultRules().rules) {
    if (r.kind != AlertKind::kRanksNotReporting) continue;
    AlertRule added = r;
    for (const AlertRule& other : rules.rules) {
      if (other.name == added.name) added.name += " (built in)";
    }
    rules.rules.push_back(std::move(added));
  }
  return rules;
}

}  // namespace

WatchEngine::WatchEngine(RuleSet rules, EngineLimits limits)
    : rules_(WithNotReportingRule(std::move(rules))),
      limits_(limits),
      memory_{.limit = limits.max_total_bytes},
      tracker_(limits.tracker) {
  limits_.job.window_steps = rules_.window_steps;
  limits_.job.baseline_steps = rules_.baseline_steps;
}

std::vector<AlertEvent> WatchEngine::SetRules(RuleSet set, TimeNs now) {
  RuleSet rules = WithNotReportingRule(std::move(set));
  std::vector<AlertEvent> events;
  for (const AlertRule& old : rules_.rules) {
    bool kept = false;
    for (const AlertRule& r : rules.rules) kept = kept || (r.name == old.name && SameRule(r, old));
    if (kept) continue;
    std::vector<AlertEvent> dropped = tracker_.Drop(old.name, now);
    events.insert(events.end(), dropped.begin(), dropped.end());
  }
  const bool new_window =
      rules.window_steps != rules_.window_steps || rules.baseline_steps != rules_.baseline_steps;
  rules_ = std::move(rules);
  limits_.job.window_steps = rules_.window_steps;
  limits_.job.baseline_steps = rules_.baseline_steps;
  if (new_window) {
    for (auto& [name, job] : jobs_) {
      job.reset();  // its bytes back first
      job = std::make_unique<JobWatch>(limits_.job, &memory_);
    }
    for (const auto& [name, ranks] : hosts_) {
      for (const auto& [rank, host] : ranks) jobs_[name]->SetHost(rank, host);
    }
    latest_.clear();
  }
  return events;
}

std::vector<AlertEvent> WatchEngine::ForgetJob(const std::string& job, TimeNs now) {
  jobs_.erase(job);
  latest_.erase(job);
  hosts_.erase(job);
  agents_.erase(job);
  last_data_ns_.erase(job);
  return tracker_.DropJob(job, now);
}

TimeNs WatchEngine::ForgetQuietAfter() const {
  TimeNs after = limits_.forget_quiet_after_ns;
  for (const AlertRule& rule : rules_.rules) {
    if (rule.enabled && rule.kind == AlertKind::kHang) {
      after = std::max(after, 2 * rule.hang_after_ns);
    }
  }
  return after;
}

JobWatch* WatchEngine::JobOf(const std::string& job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) {
    if (jobs_.size() >= limits_.max_jobs) return nullptr;
    it = jobs_.emplace(job, std::make_unique<JobWatch>(limits_.job, &memory_)).first;
  }
  last_data_ns_[job] = kFresh;
  return it->second.get();
}

absl::Status WatchEngine::Add(const std::string& job, const common::StepSummary& summary) {
  JobWatch* w = JobOf(job);
  if (w == nullptr)
    return absl::ResourceExhaustedError(
        common::StrCat("more than ", limits_.max_jobs, " watched jobs"));
  return w->Add(summary);
}

absl::Status WatchEngine::Add(const std::string& job, const common::RankProgress& progress) {
  JobWatch* w = JobOf(job);
  if (w == nullptr)
    return absl::ResourceExhaustedError(
        common::StrCat("more than ", limits_.max_jobs, " watched jobs"));
  w->Add(progress);
  return absl::OkStatus();
}

void WatchEngine::SetHost(const std::string& job, int32_t rank, std::string host) {
  JobWatch* w = JobOf(job);
  if (w == nullptr) return;
  auto& ranks = hosts_[job];
  if (ranks.size() < limits_.job.max_ranks || ranks.contains(rank)) ranks[rank] = host;
  w->SetHost(rank, std::move(host));
}

void WatchEngine::NoteAgent(const std::string& job, int32_t rank, const std::string& agent) {
  auto& ranks = agents_[job];
  auto it = ranks.find(rank);
  if (it != ranks.end()) {
    if (it->second != agent) it->second = agent;
  } else if (ranks.size() < limits_.job.max_ranks) {
    ranks.emplace(rank, agent);
  }
}

void WatchEngine::AddHosts(const std::string& job, Finding* f) const {
  auto it = hosts_.find(job);
  std::set<std::string> seen;
  for (int32_t rank : f->ranks) {
    if (it == hosts_.end()) break;
    auto host = it->second.find(rank);
    if (host != it->second.end() && !host->second.empty() && seen.insert(host->second).second) {
      f->hosts.push_back(host->second);
    }
  }
}

std::vector<AlertEvent> WatchEngine::Evaluate(TimeNs now) {
  std::vector<AlertEvent> events;
  auto observe = [&](const AlertRule& rule, const std::string& job, std::vector<Finding> findings) {
    for (Finding& f : findings) AddHosts(job, &f);
    std::vector<AlertEvent> e = tracker_.Observe(rule, job, findings, now);
    events.insert(events.end(), std::make_move_iterator(e.begin()),
                  std::make_move_iterator(e.end()));
  };
  for (auto& [name, job] : jobs_) {
    for (WindowStats& window : job->Settle(now)) {
      if (auto agents = agents_.find(name); agents != agents_.end()) {
        std::set<std::string> seen;
        for (int32_t rank : window.missing_ranks) {
          auto agent = agents->second.find(rank);
          if (agent != agents->second.end() && seen.insert(agent->second).second)
            window.missing_agents.push_back(agent->second);
        }
      }
      for (const AlertRule& rule : rules_.rules) {
        // Ranks that stopped reporting are judged on every window. The other rules judge full
        // windows only: over the last N steps, not fewer (a job's first steps are too few), and
        // with every rank there (a lost agent must not fire or resolve what its ranks were in).
        if (!window.full && rule.kind != AlertKind::kRanksNotReporting) continue;
        if (rule.kind != AlertKind::kHang && Applies(rule, name)) {
          std::vector<Finding> findings = Detect(window, rule);
          for (Finding& f : findings) f.window_last_step = window.last_step;
          observe(rule, name, std::move(findings));
        }
      }
      latest_[name] = std::move(window);
    }
    const std::vector<CommunicatorProgress> progress = job->Progress();
    for (const AlertRule& rule : rules_.rules) {
      if (rule.kind == AlertKind::kHang && Applies(rule, name))
        observe(rule, name, FindHangs(progress, now, rule));
    }
  }
  // Quiet jobs go, after their hangs had their time to be named.
  const TimeNs forget_after = ForgetQuietAfter();
  std::vector<std::string> quiet;
  for (auto& [name, last] : last_data_ns_) {
    if (last == kFresh) last = now;
    if (now - last > forget_after) quiet.push_back(name);
  }
  for (const std::string& name : quiet) {
    std::vector<AlertEvent> e = ForgetJob(name, now);
    events.insert(events.end(), std::make_move_iterator(e.begin()),
                  std::make_move_iterator(e.end()));
    forgotten_.push_back(name);
  }
  return events;
}

std::vector<std::string> WatchEngine::jobs() const {
  std::vector<std::string> out;
  for (const auto& [name, job] : jobs_) out.push_back(name);
  return out;
}

}  // namespace podscope::coordinator::watch
