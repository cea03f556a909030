#include "coordinator/watch/watch_service.h"

#include <algorithm>
#include <boost/json.hpp>

#include "common/status_macros.h"
#include "common/str_util.h"
#include "spdlog/spdlog.h"

namespace podscope::coordinator::watch {

StoredRules ParseStoredRules(std::string_view json) {
  StoredRules stored;
  absl::StatusOr<RuleSet> whole = ParseRules(json);
  if (whole.ok()) {
    stored.rules = std::move(*whole);
    return stored;
  }
  // Rule by rule: the settings with no rules, then each rule beside them.
  boost::json::error_code ec;
  boost::json::value root = boost::json::parse(json, ec);
  boost::json::object* o = ec ? nullptr : root.if_object();
  boost::json::value* rules = o != nullptr ? o->if_contains("rules") : nullptr;
  absl::StatusOr<RuleSet> settings = absl::InvalidArgumentError(whole.status().message());
  boost::json::array list;
  if (rules != nullptr && rules->is_array()) {
    list = std::move(rules->get_array());
    *rules = boost::json::array();
    settings = ParseRules(boost::json::serialize(*o));
  }
  if (!settings.ok()) {
    stored.rules = DefaultRules();
    stored.set_aside.push_back(
        {.id = "",
         .error = common::StrCat("the stored rule set: ", settings.status().message(),
                                 "; the default rules apply"),
         .record = std::string(json)});
    return stored;
  }
  stored.rules = std::move(*settings);
  for (size_t i = 0; i < list.size(); ++i) {
    const boost::json::value* name =
        list[i].is_object() ? list[i].get_object().if_contains("name") : nullptr;
    storage::SetAsideRecord aside{.id = name != nullptr && name->is_string()
                                            ? std::string(name->get_string())
                                            : common::StrCat("rules[", i, "]"),
                                  .error = "",
                                  .record = boost::json::serialize(list[i])};
    (*o)["rules"] = boost::json::array{list[i]};
    absl::StatusOr<RuleSet> one = ParseRules(boost::json::serialize(*o));
    const bool taken = one.ok() && std::any_of(stored.rules.rules.begin(), stored.rules.rules.end(),
                                               [&one](const AlertRule& r) {
                                                 return r.name == one->rules[0].name;
                                               });
    if (one.ok() && !taken) {
      stored.rules.rules.push_back(std::move(one->rules[0]));
      continue;
    }
    aside.error = one.ok() ? "a second rule with this name" : std::string(one.status().message());
    stored.set_aside.push_back(std::move(aside));
  }
  return stored;
}

absl::StatusOr<std::unique_ptr<WatchService>> WatchService::Create(storage::TraceStore& store,
                                                                   const common::TimeSource& time,
                                                                   WatchServiceOptions options) {
  ASSIGN_OR_RETURN(std::optional<std::string> stored, store.GetSetting(kRulesSetting));
  StoredRules rules{DefaultRules(), {}};
  if (stored.has_value()) rules = ParseStoredRules(*stored);
  for (storage::SetAsideRecord& r : rules.set_aside) {
    r.set_aside_ns = time.Now();
    spdlog::error("stored alert rule {}: {}: set aside (GET /v1/alerts/rules lists it)",
                  r.id.empty() ? "set" : r.id, r.error);
  }
  const bool any_new = !rules.set_aside.empty();
  // Kept before the rules are stored again without them: nothing is lost if this start stops.
  ASSIGN_OR_RETURN(std::vector<storage::SetAsideRecord> set_aside,
                   storage::SetAside(store, kRulesSetting, std::move(rules.set_aside)));
  if (any_new) {
    if (absl::Status s = store.PutSetting(kRulesSetting, RulesToJson(rules.rules)); !s.ok()) {
      return s;
    }
  }
  return std::unique_ptr<WatchService>(
      new WatchService(store, time, std::move(rules.rules), options, std::move(set_aside)));
}

WatchService::WatchService(storage::TraceStore& store, const common::TimeSource& time,
                           RuleSet rules, WatchServiceOptions options,
                           std::vector<storage::SetAsideRecord> set_aside)
    : store_(store),
      time_(time),
      options_(options),
      set_aside_(std::move(set_aside)),
      engine_(std::move(rules), options.engine) {}

WatchService::~WatchService() { Stop(); }

bool WatchService::AdmitJob(const std::string& agent_id, const std::string& job) {
  std::set<std::string>& jobs = agent_jobs_[agent_id];
  if (jobs.contains(job)) return true;
  if (jobs.size() >= options_.max_jobs_per_agent) {
    ++counters_.refused_jobs;
    refused_log_.Warn(
        "watch: agent {}: data for job {} dropped: the agent feeds {} jobs already "
        "(max_jobs_per_agent)",
        agent_id, job, jobs.size());
    if (jobs.empty()) agent_jobs_.erase(agent_id);
    return false;
  }
  jobs.insert(job);
  return true;
}

void WatchService::RefuseJob(const std::string& agent_id, const std::string& job,
                             const absl::Status& why) {
  ++counters_.refused_jobs;
  refused_log_.Warn("watch: agent {}, job {}: {}", agent_id, job, std::string(why.message()));
  auto it = agent_jobs_.find(agent_id);
  if (it == agent_jobs_.end()) return;
  it->second.erase(job);  // never opened: it takes none of the agent's slots
  if (it->second.empty()) agent_jobs_.erase(it);
}

void WatchService::ForgetServiceState(const std::string& job) {
  last_evidence_.erase(job);
  for (auto it = agent_jobs_.begin(); it != agent_jobs_.end();) {
    it->second.erase(job);
    it = it->second.empty() ? agent_jobs_.erase(it) : std::next(it);
  }
}

void WatchService::Ingest(const std::string& agent_id, const common::DecodedWatch& data) {
  absl::MutexLock lock(&mu_);
  ++counters_.batches;
  counters_.agent_dropped_steps += data.dropped_steps;
  // An agent whose jobs keep their share of memory already adds nothing more.
  if (auto jobs = agent_jobs_.find(agent_id); jobs != agent_jobs_.end()) {
    size_t bytes = 0;
    for (const std::string& job : jobs->second) bytes += engine_.job_bytes(job);
    if (bytes >= options_.max_agent_bytes) {
      over_agent_memory_ += data.steps.size() + data.progress.size();
      refused_log_.Warn(
          "watch: agent {}: a batch dropped: its jobs keep {} MiB (max_agent_bytes {} MiB)",
          agent_id, bytes >> 20, options_.max_agent_bytes >> 20);
      return;
    }
  }
  for (const auto& [job, step] : data.steps) {
    if (!AdmitJob(agent_id, job)) continue;
    const absl::Status s = engine_.Add(job, step);
    if (s.code() == absl::StatusCode::kResourceExhausted) {
      RefuseJob(agent_id, job, s);
      continue;
    }
    if (s.ok()) {
      ++counters_.steps;
      engine_.NoteAgent(job, step.rank, agent_id);
      continue;
    }
    ++counters_.refused_steps;
    refused_log_.Warn("watch: agent {}, job {}: {}", agent_id, job, std::string(s.message()));
  }
  for (const auto& [job, progress] : data.progress) {
    if (!AdmitJob(agent_id, job)) continue;
    const absl::Status s = engine_.Add(job, progress);
    if (s.ok()) {
      ++counters_.progress;
    } else if (s.code() == absl::StatusCode::kResourceExhausted) {
      RefuseJob(agent_id, job, s);
    }
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
    for (const std::string& job : engine_.TakeForgotten()) {
      ForgetServiceState(job);
      ++counters_.forgotten_jobs;
      spdlog::info("watch: job {} forgotten after {} s without data (its alerts resolve)", job,
                   engine_.ForgetQuietAfter() / 1'000'000'000);
    }
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
  std::string json;
  {
    absl::MutexLock lock(&mu_);
    json = RulesToJson(engine_.rules());
  }
  json.pop_back();  // the object's closing brace
  common::StrAppend(&json, ",\"set_aside\":", storage::SetAsideToJson(set_aside_), "}");
  return json;
}

absl::Status WatchService::SetRules(std::string_view json) {
  ASSIGN_OR_RETURN(RuleSet rules, ParseRules(json));
  // Stored in the canonical form, so what GET returns is what was stored; and only once that
  // form reads back as the same rules, so that no start-up finds a rule it cannot read.
  const std::string text = RulesToJson(rules);
  absl::StatusOr<RuleSet> back = ParseRules(text);
  if (!back.ok() || RulesToJson(*back) != text) {
    return absl::InvalidArgumentError(
        common::StrCat("these rules would not read back as they are after a restart",
                       back.ok() ? "" : common::StrCat(": ", back.status().message())));
  }
  RETURN_IF_ERROR(store_.PutSetting(kRulesSetting, text));
  std::vector<AlertEvent> events;
  std::vector<std::function<void(const AlertEvent&)>> listeners;
  {
    absl::MutexLock lock(&mu_);
    events = engine_.SetRules(std::move(rules), time_.Now());
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
      ForgetServiceState(job);
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
  ServiceCounters c = counters_;
  c.memory_bytes = engine_.memory_bytes();
  c.over_memory = engine_.over_memory() + over_agent_memory_;
  return c;
}

size_t WatchService::firing() const {
  absl::MutexLock lock(&mu_);
  return engine_.tracker().firing();
}

}  // namespace podscope::coordinator::watch
