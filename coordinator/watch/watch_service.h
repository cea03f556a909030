// The coordinator's watch (DESIGN §11) as a service: watch data in from the agents (already on
// the coordinator's clock), the engine evaluated on a timer, the rules kept in the store, the
// alerts and windows read by the REST API and /metrics. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/time_source.h"
#include "common/watch_wire.h"
#include "coordinator/http/rate_limited_log.h"
#include "coordinator/watch/watch_engine.h"
#include "storage/trace_store.h"

namespace podscope::coordinator::watch {

struct WatchServiceOptions {
  TimeNs evaluate_interval_ns = 500'000'000;
  EngineLimits engine;
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
};

// Starts an evidence capture of every rank of `job` for `duration_ns`; the capture's id. The
// capture scheduler, wired in main.cc (this folder does not depend on it).
using EvidenceStarter =
    std::function<absl::StatusOr<std::string>(const std::string& job, TimeNs duration_ns)>;

class WatchService {
 public:
  // Loads the stored rules, or the defaults when none were stored. A stored rule set that no
  // longer parses is an error naming it (the coordinator does not start on rules it cannot read).
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
  std::string RulesJson() const;
  // Parses, stores, then applies; a bad rule set changes nothing (InvalidArgument, named).
  absl::Status SetRules(std::string_view json);
  std::map<std::string, WindowStats> Windows() const;
  ServiceCounters counters() const;
  size_t firing() const;

 private:
  WatchService(storage::TraceStore& store, const common::TimeSource& time, RuleSet rules,
               WatchServiceOptions options);

  storage::TraceStore& store_;
  const common::TimeSource& time_;
  const WatchServiceOptions options_;
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
  absl::Mutex run_mu_;
  bool stopping_ ABSL_GUARDED_BY(run_mu_) = false;
  std::thread thread_;
  RateLimitedLog refused_log_{"watch"};  // a flood of bad summaries cannot flood the log
};

inline constexpr std::string_view kRulesSetting = "alert_rules";

}  // namespace podscope::coordinator::watch
