#include "coordinator/watch/watch_service.h"

#include <algorithm>

#include "common/str_util.h"
#include "spdlog/spdlog.h"

namespace podscope::coordinator::watch {

absl::StatusOr<std::unique_ptr<WatchService>> WatchService::Create(storage::TraceStore& store,
                                                                   const common::TimeSource& time,
                                                                   WatchServiceOptions options) {
  absl::StatusOr<std::optional<std::string>> stored = store.GetSetting(kRulesSetting);
  if (!stored.ok()) return stored.status();
  RuleSet rules = DefaultRules();
  if (stored->has_value()) {
    absl::StatusOr<RuleSet> parsed = ParseRules(**stored);
    if (!parsed.ok()) {
      return absl::DataLossError(
          common::StrCat("the stored alert rules no longer parse: ", parsed.status().message()));
    }
    rules = std::move(*parsed);
  }
  return std::unique_ptr<WatchService>(new WatchService(store, time, std::move(rules), options));
}

WatchService::WatchService(storage::TraceStore& store, const common::TimeSource& time,
                           RuleSet rules, WatchServiceOptions options)
    : store_(store), time_(time), options_(options), engine_(std::move(rules), options.engine) {}

WatchService::~WatchService() { Stop(); }

void WatchService::Ingest(const std::string& agent_id, const common::DecodedWatch& data) {
  absl::MutexLock lock(&mu_);
  ++counters_.batches;
  counters_.agent_dropped_steps += data.dropped_steps;
  for (const auto& [job, step] : data.steps) {
    const absl::Status s = engine_.Add(job, step);
    if (s.ok()) {
      ++counters_.steps;
      continue;
    }
    ++counters_.refused_steps;
    refused_log_.Warn("watch: agent {}, job {}: {}", agent_id, job, std::string(s.message()));
  }
  for (const auto& [job, progress] : data.progress) {
    if (engine_.Add(job, progress).ok()) ++counters_.progress;
  }
}

void WatchService::SetHost(const std::string& job, int32_t rank, std::string host) {
  absl::MutexLock lock(&mu_);
  engine_.SetHost(job, rank, std::move(host));
}

std::vector<AlertEvent> WatchService::Evaluate() {
  std::vector<AlertEvent> events;
  std::vector<std::function<void(const AlertEvent&)>> listeners;
  std::vector<size_t> wants_evidence;  // indexes into events
  std::vector<size_t>
      shares_evidence;  // alerts of the same evaluation whose job's capture starts now
  EvidenceStarter starter;
  TimeNs evidence_duration_ns = 0;
  {
    absl::MutexLock lock(&mu_);
    const TimeNs now = time_.Now();
    events = engine_.Evaluate(now);
    const RuleSet& rules = engine_.rules();
    for (size_t i = 0; i < events.size(); ++i) {
      const AlertEvent& e = events[i];
      if (e.transition != Transition::kFired) {
        ++counters_.alerts_resolved;
        continue;
      }
      ++counters_.alerts_fired;
      const auto rule = std::find_if(rules.rules.begin(), rules.rules.end(),
                                     [&](const AlertRule& r) { return r.name == e.alert.rule; });
      if (!evidence_starter_ || rule == rules.rules.end() || !rule->capture_evidence) continue;
      // One evidence capture per job per interval: a job that fires several rules at once, or
      // flaps, does not start a capture storm. An alert that fires while the job's capture
      // still records is linked to it: it is evidence of that alert too.
      auto [last, first] = last_evidence_.try_emplace(e.alert.job, Evidence{now, ""});
      if (!first && now - last->second.started_ns < rules.evidence_interval_ns) {
        ++counters_.evidence_rate_limited;
        if (!last->second.capture_id.empty() &&
            now - last->second.started_ns <= rules.evidence_duration_ns) {
          engine_.tracker().SetCaptureId(e.alert.id, last->second.capture_id);
          events[i].alert.capture_id = last->second.capture_id;
        } else if (last->second.capture_id.empty() && now == last->second.started_ns) {
          shares_evidence.push_back(i);  // same evaluation as the one that starts it
        }
        continue;
      }
      last->second = Evidence{now, ""};
      wants_evidence.push_back(i);
    }
    listeners = listeners_;
    starter = evidence_starter_;
    evidence_duration_ns = rules.evidence_duration_ns;
  }
  // The scheduler has locks of its own: started outside ours.
  for (const size_t i : wants_evidence) {
    Alert& alert = events[i].alert;
    absl::StatusOr<std::string> capture = starter(alert.job, evidence_duration_ns);
    absl::MutexLock lock(&mu_);
    if (!capture.ok()) {
      ++counters_.evidence_failed;
      spdlog::warn("alert {}: no evidence capture of job {}: {}", alert.id, alert.job,
                   std::string(capture.status().message()));
      continue;
    }
    ++counters_.evidence_captures;
    engine_.tracker().SetCaptureId(alert.id, *capture);
    alert.capture_id = *capture;
    last_evidence_[alert.job].capture_id = *capture;
  }
  if (!shares_evidence.empty()) {
    absl::MutexLock lock(&mu_);
    for (const size_t i : shares_evidence) {
      Alert& alert = events[i].alert;
      const auto it = last_evidence_.find(alert.job);
      if (it == last_evidence_.end() || it->second.capture_id.empty()) continue;
      engine_.tracker().SetCaptureId(alert.id, it->second.capture_id);
      alert.capture_id = it->second.capture_id;
    }
  }
  for (const AlertEvent& e : events) {
    spdlog::info("alert {} {}: job {} rule {}: {}{}", e.alert.id,
                 e.transition == Transition::kFired ? "firing" : "resolved", e.alert.job,
                 e.alert.rule, e.alert.finding.message,
                 e.alert.capture_id ? " (evidence capture " + *e.alert.capture_id + ")" : "");
    for (const auto& listener : listeners) listener(e);
  }
  return events;
}

void WatchService::SetEvidenceStarter(EvidenceStarter starter) {
  absl::MutexLock lock(&mu_);
  evidence_starter_ = std::move(starter);
}

void WatchService::OnTransition(std::function<void(const AlertEvent&)> listener) {
  absl::MutexLock lock(&mu_);
  listeners_.push_back(std::move(listener));
}

void WatchService::Start() {
  thread_ = std::thread([this] {
    absl::MutexLock lock(&run_mu_);
    while (!stopping_) {
      // An interval after the last evaluation ended: a slow one never runs back to back.
      time_.AwaitUntil(run_mu_, absl::Condition(&stopping_),
                       time_.Now() + options_.evaluate_interval_ns);
      if (stopping_) break;
      run_mu_.Unlock();
      Evaluate();
      run_mu_.Lock();
    }
  });
}

void WatchService::Stop() {
  {
    absl::MutexLock lock(&run_mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

std::vector<Alert> WatchService::Alerts() const {
  absl::MutexLock lock(&mu_);
  return engine_.tracker().Alerts();
}

std::string WatchService::RulesJson() const {
  absl::MutexLock lock(&mu_);
  return RulesToJson(engine_.rules());
}

absl::Status WatchService::SetRules(std::string_view json) {
  absl::StatusOr<RuleSet> rules = ParseRules(json);
  if (!rules.ok()) return rules.status();
  // Stored in the canonical form, so what GET returns is what was stored.
  if (absl::Status s = store_.PutSetting(kRulesSetting, RulesToJson(*rules)); !s.ok()) return s;
  std::vector<AlertEvent> events;
  std::vector<std::function<void(const AlertEvent&)>> listeners;
  {
    absl::MutexLock lock(&mu_);
    events = engine_.SetRules(std::move(*rules), time_.Now());
    counters_.alerts_resolved += events.size();
    listeners = listeners_;
  }
  for (const AlertEvent& e : events) {
    for (const auto& listener : listeners) listener(e);
  }
  return absl::OkStatus();
}

void WatchService::ForgetJobs(const std::function<bool(const std::string& job)>& keep) {
  std::vector<AlertEvent> events;
  std::vector<std::function<void(const AlertEvent&)>> listeners;
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& job : engine_.jobs()) {
      if (keep(job)) continue;
      std::vector<AlertEvent> dropped = engine_.ForgetJob(job, time_.Now());
      events.insert(events.end(), dropped.begin(), dropped.end());
    }
    counters_.alerts_resolved += events.size();
    listeners = listeners_;
  }
  for (const AlertEvent& e : events) {
    for (const auto& listener : listeners) listener(e);
  }
}

std::map<std::string, WindowStats> WatchService::Windows() const {
  absl::MutexLock lock(&mu_);
  return engine_.latest();
}

ServiceCounters WatchService::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

size_t WatchService::firing() const {
  absl::MutexLock lock(&mu_);
  return engine_.tracker().firing();
}

}  // namespace podscope::coordinator::watch
