#include "coordinator/watch/watch_service.h"

#include "common/str_util.h"
#include "spdlog/spdlog.h"

namespace podscope::coordinator::watch {

absl::StatusOr<std::unique_ptr<WatchService>> WatchService::Create(storage::TraceStore& store,
                                                                   std::function<TimeNs()> now,
                                                                   WatchServiceOptions options) {
  absl::StatusOr<std::optional<std::string>> stored = store.GetSetting(kRulesSetting);
  if (!stored.ok()) return stored.status();
  RuleSet rules = DefaultRules();
  if (stored->has_value()) {
    absl::StatusOr<RuleSet> parsed = ParseRules(**stored);
    if (!parsed.ok()) {
      return absl::DataLossError(common::StrCat("the stored alert rules no longer parse: ", parsed.status().message()));
    }
    rules = std::move(*parsed);
  }
  return std::unique_ptr<WatchService>(new WatchService(store, std::move(now), std::move(rules), options));
}

WatchService::WatchService(storage::TraceStore& store, std::function<TimeNs()> now, RuleSet rules,
                           WatchServiceOptions options)
    : store_(store), now_(std::move(now)), options_(options), engine_(std::move(rules), options.engine) {}

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
  {
    absl::MutexLock lock(&mu_);
    events = engine_.Evaluate(now_());
    for (const AlertEvent& e : events) ++(e.transition == Transition::kFired ? counters_.alerts_fired : counters_.alerts_resolved);
    listeners = listeners_;
  }
  for (const AlertEvent& e : events) {
    spdlog::info("alert {} {}: job {} rule {}: {}", e.alert.id,
                 e.transition == Transition::kFired ? "firing" : "resolved", e.alert.job, e.alert.rule,
                 e.alert.finding.message);
    for (const auto& listener : listeners) listener(e);
  }
  return events;
}

void WatchService::OnTransition(std::function<void(const AlertEvent&)> listener) {
  absl::MutexLock lock(&mu_);
  listeners_.push_back(std::move(listener));
}

void WatchService::Start() {
  thread_ = std::thread([this] {
    absl::MutexLock lock(&run_mu_);
    while (!stopping_) {
      run_mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Nanoseconds(options_.evaluate_interval_ns));
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
    events = engine_.SetRules(std::move(*rules), now_());
    counters_.alerts_resolved += events.size();
    listeners = listeners_;
  }
  for (const AlertEvent& e : events) {
    for (const auto& listener : listeners) listener(e);
  }
  return absl::OkStatus();
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
