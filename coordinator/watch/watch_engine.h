// Every watched job's window, the detectors and the alerts (DESIGN §11), as one pure state
// machine: summaries in, alert transitions out, time passed in with every call. The watch
// service (which owns threads, the store and the sinks) drives it under its lock; tests drive it
// with hand-made summaries and an injected clock.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/watch/alert_rules.h"
#include "coordinator/watch/alert_tracker.h"
#include "coordinator/watch/job_watch.h"

namespace podscope::coordinator::watch {

struct EngineLimits {
  size_t max_jobs = 1'024;
  WatchLimits job;  // window_steps and baseline_steps come from the rules
  TrackerLimits tracker;
};

class WatchEngine {
 public:
  explicit WatchEngine(RuleSet rules, EngineLimits limits = {});

  // Replaces the rules. Alerts of rules that are gone or changed resolve now; a new window
  // length restarts every job's window.
  std::vector<AlertEvent> SetRules(RuleSet rules, TimeNs now);
  const RuleSet& rules() const { return rules_; }

  // Times on the coordinator's clock. A job past max_jobs is refused (ResourceExhausted).
  absl::Status Add(const std::string& job, const common::StepSummary& summary);
  absl::Status Add(const std::string& job, const common::RankProgress& progress);
  void SetHost(const std::string& job, int32_t rank, std::string host);
  // Forgets `job` (its window, hosts and alerts, which resolve now): another shard owns it.
  std::vector<AlertEvent> ForgetJob(const std::string& job, TimeNs now);

  // Settles every job's new steps and runs the rules on each new window, then looks for hangs
  // at `now`. Returns what fired and resolved, in order.
  std::vector<AlertEvent> Evaluate(TimeNs now);

  const AlertTracker& tracker() const { return tracker_; }
  AlertTracker& tracker() { return tracker_; }
  // The latest window of each job that has one (for /metrics and `podscope watch`).
  const std::map<std::string, WindowStats>& latest() const { return latest_; }
  std::vector<std::string> jobs() const;

 private:
  JobWatch* JobOf(const std::string& job);
  static bool Applies(const AlertRule& rule, const std::string& job) {
    return rule.enabled && (rule.job.empty() || rule.job == job);
  }
  void AddHosts(const std::string& job, Finding* f) const;

  RuleSet rules_;
  EngineLimits limits_;
  std::map<std::string, std::unique_ptr<JobWatch>> jobs_;
  std::map<std::string, WindowStats> latest_;
  std::map<std::string, std::map<int32_t, std::string>> hosts_;  // job -> rank -> host
  AlertTracker tracker_;
};

}  // namespace podscope::coordinator::watch
