// The coordinator's watch (docs/watch.md) as a service: watch data in from the agents (already on
// the coordinator's clock), the engine evaluated on a timer, the rules kept in the store, the
// alerts and windows read by the REST API and /metrics. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/time_source.h"
#include "common/watch_wire.h"
#include "coordinator/watch/watch_engine.h"
#include "http/rate_limited_log.h"
#include "storage/set_aside.h"
#include "storage/trace_store.h"

namespace podscope::coordinator::watch {

struct WatchServiceOptions {
  TimeNs evaluate_interval_ns = 500'000'000;
  EngineLimits engine;
  // Jobs one agent's data may open (of the engine's max_jobs): one agent, or one stolen
  // certificate, cannot take every job slot.
  size_t max_jobs_per_agent = 64;
  // What the jobs an agent's data opened may keep, together: past it, the agent's batches are
  // dropped and counted (a job several agents feed counts for each).
  size_t max_agent_bytes = size_t{128} << 20;
};

struct ServiceCounters {
  uint64_t batches = 0;
  uint64_t steps = 0;
  uint64_t progress = 0;
  uint64_t refused_steps = 0;        // malformed summaries (named in the log)
  uint64_t agent_dropped_steps = 0;  // what agents' bounded queues dropped, as they report it
  uint64_t alerts_fired = 0;
  uint64_t alerts_resolved = 0;
  uint64_t evidence_captures = 0;      // started for alerts that fired
  uint64_t evidence_rate_limited = 0;  // not started: the job had one within evidence.interval_s
  uint64_t evidence_failed = 0;        // the scheduler refused (named in the log)
  uint64_t refused_jobs = 0;    // data for a new job past max_jobs or max_jobs_per_agent (dropped)
  uint64_t forgotten_jobs = 0;  // quiet past the engine's forget_quiet_after_ns
  uint64_t memory_bytes = 0;    // what the engine keeps of every job (an estimate)
  uint64_t over_memory = 0;     // records dropped at a memory bound: a job's, an agent's, in all
};

// Starts an evidence capture of every rank of `job` for `duration_ns`; the capture's id. The
// capture scheduler, wired in main.cc (this folder does not depend on it).
using EvidenceStarter =
    std::function<absl::StatusOr<std::string>(const std::string& job, TimeNs duration_ns)>;

// A stored rule set, read at start-up: a rule that does not parse is set aside and the others
// are kept; settings that do not parse set the whole text aside, and the defaults apply.
struct StoredRules {
  RuleSet rules;
  std::vector<storage::SetAsideRecord> set_aside;
};
StoredRules ParseStoredRules(std::string_view json);

class WatchService {
 public:
  // Loads the stored rules, or the defaults when none were stored. What no longer parses is set
  // aside (storage/set_aside.h): logged, kept, listed under GET /v1/alerts/rules' "set_aside".
  // `time` is the coordinator's clock, which the engine evaluates at; it must outlive the service.
  static absl::StatusOr<std::unique_ptr<WatchService>> Create(
      storage::TraceStore& store, const common::TimeSource& time = common::RealTime(),
      WatchServiceOptions options = {});
  ~WatchService();

  // Watch data from agent `agent_id`, times on the coordinator's clock.
  void Ingest(const std::string& agent_id, const common::DecodedWatch& data);
  void SetHost(const std::string& job, int32_t rank, std::string host);
  // Stops watching the jobs `keep` says no (another shard owns them now); their alerts resolve,
  // and listeners hear of it.
  void ForgetJobs(const std::function<bool(const std::string& job)>& keep);

  // Runs the engine at the time source's now; what fired and resolved goes to the listener.
  std::vector<AlertEvent> Evaluate();
  // Called (outside the lock) with every transition, from Evaluate's caller.
  void OnTransition(std::function<void(const AlertEvent&)> listener);
  // When an alert of a rule with capture_evidence fires, a capture of its job is started (at
  // most one per job per evidence.interval_s) and linked to the alert before listeners hear of it.
  // Alerts of the job that fire while that capture still records share it.
  void SetEvidenceStarter(EvidenceStarter starter);

  // Evaluates every evaluate_interval on a thread of its own until Stop.
  void Start();
  void Stop();

  std::vector<Alert> Alerts() const;
  // The rules as PUT takes them, with "set_aside": the stored ones a start could not read.
  std::string RulesJson() const;
  // Parses, checks that the stored form reads back the same, stores, then applies; a bad rule
  // set changes nothing (InvalidArgument, named).
  absl::Status SetRules(std::string_view json);
  // The stored rules that did not read back, at this start or an earlier one.
  const std::vector<storage::SetAsideRecord>& SetAside() const { return set_aside_; }
  std::map<std::string, WindowStats> Windows() const;
  ServiceCounters counters() const;
  size_t firing() const;

 private:
  WatchService(storage::TraceStore& store, const common::TimeSource& time, RuleSet rules,
               WatchServiceOptions options, std::vector<storage::SetAsideRecord> set_aside);

  storage::TraceStore& store_;
  const common::TimeSource& time_;
  const WatchServiceOptions options_;
  const std::vector<storage::SetAsideRecord> set_aside_;
  mutable absl::Mutex mu_;
  WatchEngine engine_ ABSL_GUARDED_BY(mu_);
  ServiceCounters counters_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void(const AlertEvent&)>> listeners_ ABSL_GUARDED_BY(mu_);
  EvidenceStarter evidence_starter_ ABSL_GUARDED_BY(mu_);
  struct Evidence {
    TimeNs started_ns = 0;
    std::string capture_id;  // empty until started (or when it failed)
  };
  std::map<std::string, Evidence> last_evidence_
      ABSL_GUARDED_BY(mu_);  // by job; bounded by the engine's jobs
  // The jobs each agent's data opened, bounded by max_jobs_per_agent each; an agent's entry
  // goes with its last job.
  std::map<std::string, std::set<std::string>> agent_jobs_ ABSL_GUARDED_BY(mu_);
  uint64_t over_agent_memory_ ABSL_GUARDED_BY(mu_) = 0;  // batch records dropped for that
  // Forgets what the service keeps of jobs the engine forgot.
  void ForgetServiceState(const std::string& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Data for a job the engine has no room for: dropped, counted, and not held against the agent.
  void RefuseJob(const std::string& agent_id, const std::string& job, const absl::Status& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `agent_id` may send data for `job` (a job it has not fed yet counts against it).
  bool AdmitJob(const std::string& agent_id, const std::string& job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Mutex run_mu_;
  bool stopping_ ABSL_GUARDED_BY(run_mu_) = false;
  std::thread thread_;
  http::RateLimitedLog refused_log_{"watch"};  // a flood of bad summaries cannot flood the log
};

inline constexpr std::string_view kRulesSetting = "alert_rules";

}  // namespace podscope::coordinator::watch
