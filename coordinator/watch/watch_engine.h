// Every watched job's window, the detectors and the alerts (docs/watch.md), as one pure state
// machine: summaries in, alert transitions out, time passed in with every call. The watch
// service (which owns threads, the store and the sinks) drives it under its lock; tests drive it
// with hand-made summaries and an injected clock.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/watch/alert_rules.h"
#include "coordinator/watch/alert_tracker.h"
#include "coordinator/watch/job_watch.h"

namespace podscope::coordinator::watch {

struct EngineLimits {
  size_t max_jobs = 1'024;
  // What every job's watch keeps, in all (each job also has WatchLimits::max_bytes): past it,
  // new records are dropped and counted, so no agent's data can grow the coordinator further.
  size_t max_total_bytes = size_t{512} << 20;
  // A job with no data for this long is forgotten (its window, pending collectives and hosts;
  // its alerts resolve): jobs end, and the max_jobs slots go to the jobs that run. Never sooner
  // than twice the longest threshold of the enabled hang rules, so that a hang is named first.
  TimeNs forget_quiet_after_ns = int64_t{30} * 60 * 1'000'000'000;
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
  // The agent that sends `rank`'s steps: named when the rank stops reporting.
  void NoteAgent(const std::string& job, int32_t rank, const std::string& agent);
  // Forgets `job` (its window, hosts and alerts, which resolve now): another shard owns it.
  std::vector<AlertEvent> ForgetJob(const std::string& job, TimeNs now);

  // Settles every job's new steps and runs the rules on each new window, then looks for hangs
  // at `now`, then forgets the jobs quiet for too long. Returns what fired and resolved, in
  // order.
  std::vector<AlertEvent> Evaluate(TimeNs now);
  // The jobs forgotten for quiet since the last call (for the log and counters).
  std::vector<std::string> TakeForgotten() { return std::exchange(forgotten_, {}); }
  // How long a job may be quiet before it is forgotten, with these rules.
  TimeNs ForgetQuietAfter() const;

  const AlertTracker& tracker() const { return tracker_; }
  AlertTracker& tracker() { return tracker_; }
  // The latest window of each job that has one (for /metrics and `podscope watch`).
  const std::map<std::string, WindowStats>& latest() const { return latest_; }
  std::vector<std::string> jobs() const;
  // Bytes a job's watch keeps (0 for a job not watched).
  size_t job_bytes(const std::string& job) const {
    auto it = jobs_.find(job);
    return it == jobs_.end() ? 0 : it->second->bytes();
  }
  // Bytes every job's watch keeps (an estimate), and records dropped at a memory bound.
  size_t memory_bytes() const { return memory_.used; }
  uint64_t over_memory() const { return memory_.refused; }

 private:
  JobWatch* JobOf(const std::string& job);
  static bool Applies(const AlertRule& rule, const std::string& job) {
    return rule.enabled && (rule.job.empty() || rule.job == job);
  }
  void AddHosts(const std::string& job, Finding* f) const;

  RuleSet rules_;
  EngineLimits limits_;
  WatchMemory memory_;  // before jobs_: each job gives its bytes back as it goes
  std::map<std::string, std::unique_ptr<JobWatch>> jobs_;
  // When each job last had data, on the clock of Evaluate; kFresh: data since the last one.
  static constexpr TimeNs kFresh = INT64_MIN;
  std::map<std::string, TimeNs> last_data_ns_;
  std::vector<std::string> forgotten_;
  std::map<std::string, WindowStats> latest_;
  std::map<std::string, std::map<int32_t, std::string>> hosts_;   // job -> rank -> host
  std::map<std::string, std::map<int32_t, std::string>> agents_;  // job -> rank -> agent
  AlertTracker tracker_;
};

}  // namespace podscope::coordinator::watch
