#include "coordinator/watch/alert_notifier.h"

#include <algorithm>

#include "common/json_writer.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "coordinator/watch/alert_json.h"
#include "spdlog/spdlog.h"

namespace podscope::coordinator::watch {
namespace {

std::string Rfc3339(TimeNs ns) {
  return absl::FormatTime(absl::RFC3339_full, absl::FromUnixNanos(ns), absl::UTCTimeZone());
}

std::string AlertName(AlertKind kind) {
  switch (kind) {
    case AlertKind::kStraggler:
      return "PodscopeStraggler";
    case AlertKind::kHang:
      return "PodscopeHang";
    case AlertKind::kRegression:
      return "PodscopeStepTimeRegression";
    case AlertKind::kExposedCommunication:
      return "PodscopeExposedCommunication";
    case AlertKind::kAllReduceEfficiency:
      return "PodscopeAllReduceEfficiency";
    case AlertKind::kRanksNotReporting:
      return "PodscopeRanksNotReporting";
  }
  return "Podscope";
}

std::string Joined(const std::vector<int32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) common::StrAppend(&out, i ? "," : "", ranks[i]);
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<AlertNotifier>> AlertNotifier::Create(
    NotifierOptions options, std::function<std::vector<Alert>()> firing) {
  std::unique_ptr<AlertNotifier> n(new AlertNotifier(std::move(options), std::move(firing)));
  auto add = [&](const std::string& url, bool alertmanager, bool slack = false) -> absl::Status {
    absl::StatusOr<http::ServerAddress> address = http::ParseServerUrl(url);
    if (!address.ok()) {
      return absl::InvalidArgumentError(common::StrCat(alertmanager ? "notify.alertmanagers: "
                                                       : slack      ? "notify.slack_webhooks: "
                                                                    : "notify.webhooks: ",
                                                       address.status().message()));
    }
    auto d = std::make_unique<Destination>();
    d->url = url;
    d->alertmanager = alertmanager;
    d->slack = slack;
    d->address = *address;
    d->address.ca_file = n->options_.ca_file;
    d->address.timeout_seconds =
        std::max<int>(1, static_cast<int>(absl::ToInt64Seconds(n->options_.timeout)));
    d->address.deadline_ms =
        std::max<int>(1, static_cast<int>(absl::ToInt64Milliseconds(n->options_.timeout)));
    d->address.cancel = &n->cancel_;
    d->address.max_response_bytes = 64 << 10;
    d->address.user_agent = "podscope-coordinator";
    n->destinations_.push_back(std::move(d));
    return absl::OkStatus();
  };
  for (const std::string& url : n->options_.alertmanagers) {
    RETURN_IF_ERROR(add(url, true));
  }
  for (const std::string& url : n->options_.webhooks) {
    RETURN_IF_ERROR(add(url, false));
  }
  for (const std::string& url : n->options_.slack_webhooks) {
    RETURN_IF_ERROR(add(url, false, true));
  }
  return n;
}

AlertNotifier::AlertNotifier(NotifierOptions options, std::function<std::vector<Alert>()> firing)
    : options_(std::move(options)), firing_(std::move(firing)) {}

AlertNotifier::~AlertNotifier() { Stop(); }

void AlertNotifier::Start() {
  for (auto& d : destinations_) {
    Destination* raw = d.get();
    d->thread = std::thread([this, raw] { Run(*raw); });
  }
}

void AlertNotifier::Stop() {
  {
    absl::MutexLock lock(&stop_mu_);
    stopping_ = true;
  }
  cancel_.Cancel();  // a delivery in flight ends now, whatever its sink is doing
  for (auto& d : destinations_) {
    if (d->thread.joinable()) d->thread.join();
  }
}

std::string AlertNotifier::AlertmanagerBody(const std::vector<Alert>& alerts) const {
  common::JsonWriter out;
  out.BeginArray();
  for (const Alert& a : alerts) {
    // Labels identify the alert to Alertmanager and must not change while it fires: what it is
    // about, not the latest evidence (which goes in the annotations).
    out.BeginObject().Key("labels").BeginObject();
    out.Key("alertname").String(AlertName(a.kind)).Key("training_job").String(a.job);
    out.Key("rule").String(a.rule).Key("kind").String(AlertKindName(a.kind));
    out.Key("subject").String(a.subject);
    out.Key("severity")
        .String(a.kind == AlertKind::kHang || a.kind == AlertKind::kRanksNotReporting ? "critical"
                                                                                      : "warning");
    out.Key("source").String("podscope").EndObject();
    out.Key("annotations").BeginObject();
    out.Key("summary").String(a.finding.message).Key("ranks").String(Joined(a.ranks));
    std::string hosts;
    for (size_t h = 0; h < a.hosts.size(); ++h) common::StrAppend(&hosts, h ? "," : "", a.hosts[h]);
    out.Key("hosts").String(hosts).Key("podscope_alert_id").String(a.id);
    if (a.capture_id) out.Key("evidence_capture").String(*a.capture_id);
    out.EndObject();
    out.Key("startsAt").String(Rfc3339(a.first_seen_ns));
    if (a.state == AlertState::kResolved) out.Key("endsAt").String(Rfc3339(a.resolved_ns));
    if (!options_.external_url.empty()) {
      out.Key("generatorURL")
          .String(common::StrCat(options_.external_url, "/v1/alerts?job=", a.job));
    }
    out.EndObject();
  }
  out.EndArray();
  return std::move(out.buffer());
}

void AlertNotifier::Notify(const AlertEvent& event) {
  std::string webhook_body;
  {
    common::JsonWriter out;
    out.BeginObject().Key("event").String(event.transition == Transition::kFired ? "fired"
                                                                                 : "resolved");
    out.Key("alert");
    WriteAlertJson(out, event.alert);
    out.EndObject();
    webhook_body = std::move(out.buffer());
  }
  const std::string alertmanager_body = AlertmanagerBody({event.alert});
  // Slack (and the chat tools that take its incoming-webhook format): one line a person reads.
  std::string slack_body;
  {
    const Alert& a = event.alert;
    common::JsonWriter out;
    out.BeginObject().Key("text").String(common::StrCat(
        event.transition == Transition::kFired ? ":rotating_light: *firing*"
                                               : ":white_check_mark: *resolved*",
        " podscope ", AlertKindName(a.kind), " in job `", a.job, "` (rule ", a.rule,
        "): ", a.finding.message,
        a.capture_id ? common::StrCat(" Evidence capture: ", *a.capture_id, ".") : std::string()));
    out.EndObject();
    slack_body = std::move(out.buffer());
  }
  for (auto& d : destinations_) {
    absl::MutexLock lock(&d->mu);
    while (d->queue.size() >= options_.max_queued && !d->queue.empty()) {
      d->queue.pop_front();
      ++d->counters.dropped;
    }
    if (options_.max_queued == 0) {
      ++d->counters.dropped;
      continue;
    }
    d->queue.push_back({d->alertmanager ? alertmanager_body
                        : d->slack      ? slack_body
                                        : webhook_body,
                        0, absl::InfinitePast()});
  }
}

absl::Status AlertNotifier::Post(const Destination& d, const std::string& body) const {
  const std::string target = d.alertmanager
                                 ? d.address.base_path + "/api/v2/alerts"
                                 : (d.address.base_path.empty() ? "/" : d.address.base_path);
  absl::StatusOr<http::HttpClientResponse> r =
      http::HttpRequestTo(d.address, "POST", target, body, "application/json");
  if (!r.ok()) return r.status();
  if (r->status < 200 || r->status > 299) return absl::UnavailableError(http::ProblemDetail(*r));
  return absl::OkStatus();
}

void AlertNotifier::Run(Destination& d) {
  absl::Time next_resend = absl::Now() + options_.alertmanager_resend;
  while (true) {
    // The next due delivery, or the periodic re-send, or stopping.
    Delivery delivery;
    bool resend = false;
    {
      absl::MutexLock lock(&d.mu);
      auto due = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu) {
        return !d.queue.empty() && d.queue.front().not_before <= absl::Now();
      };
      const absl::Time wake_by =
          std::min(d.queue.empty() ? absl::InfiniteFuture() : d.queue.front().not_before,
                   d.alertmanager ? next_resend : absl::InfiniteFuture());
      // Wakes at least every 200 ms to see a Stop (which does not hold this destination's lock).
      d.mu.AwaitWithDeadline(absl::Condition(&due),
                             std::min(wake_by, absl::Now() + absl::Milliseconds(200)));
      if (due()) {
        delivery = std::move(d.queue.front());
        d.queue.pop_front();
      } else if (d.alertmanager && absl::Now() >= next_resend) {
        resend = true;
      }
    }
    {
      absl::MutexLock lock(&stop_mu_);
      if (stopping_) return;
    }
    if (resend) {
      // Alertmanager resolves an alert nobody re-sent within its resolve_timeout.
      next_resend = absl::Now() + options_.alertmanager_resend;
      const std::vector<Alert> firing = firing_();
      if (!firing.empty()) {
        if (absl::Status s = Post(d, AlertmanagerBody(firing)); !s.ok()) {
          if (s.code() == absl::StatusCode::kCancelled) return;
          if (s.code() == absl::StatusCode::kDeadlineExceeded) {
            absl::MutexLock lock(&d.mu);
            ++d.counters.timed_out;
          }
          log_.Warn("notify {}: re-sending {} firing alerts: {}", d.url, firing.size(),
                    std::string(s.message()));
        }
      }
      continue;
    }
    if (delivery.body.empty()) continue;
    const absl::Status s = Post(d, delivery.body);
    if (s.code() == absl::StatusCode::kCancelled) return;  // stopping
    absl::MutexLock lock(&d.mu);
    if (s.ok()) {
      ++d.counters.delivered;
      continue;
    }
    if (s.code() == absl::StatusCode::kDeadlineExceeded) ++d.counters.timed_out;
    if (++delivery.attempts >= options_.max_attempts) {
      ++d.counters.failed;
      log_.Warn("notify {}: giving up after {} attempts: {}", d.url, delivery.attempts,
                std::string(s.message()));
      continue;
    }
    ++d.counters.retried;
    absl::Duration wait = options_.first_retry;
    for (int i = 1; i < delivery.attempts && wait < options_.max_retry; ++i) wait *= 2;
    delivery.not_before = absl::Now() + std::min(wait, options_.max_retry);
    log_.Warn("notify {}: attempt {} failed ({}); again in {}", d.url, delivery.attempts,
              std::string(s.message()), absl::FormatDuration(std::min(wait, options_.max_retry)));
    // Back at the front: transitions reach a destination in the order they happened.
    d.queue.push_front(std::move(delivery));
  }
}

std::vector<std::pair<std::string, DestinationCounters>> AlertNotifier::counters() const {
  std::vector<std::pair<std::string, DestinationCounters>> out;
  for (const auto& d : destinations_) {
    absl::MutexLock lock(&d->mu);
    out.emplace_back(d->url, d->counters);
  }
  return out;
}

void AlertNotifier::AppendMetrics(std::string* out) const {
  if (destinations_.empty()) return;
  common::StrAppend(
      out, "# HELP podscope_notifications_total Alert notifications by destination and outcome.\n",
      "# TYPE podscope_notifications_total counter\n");
  for (const auto& [url, c] : counters()) {
    std::string label;
    for (const char ch : url) {
      if (ch == '\\' || ch == '"') label += '\\';
      label += ch;
    }
    for (const auto& [outcome, n] : {std::pair<const char*, uint64_t>{"delivered", c.delivered},
                                     {"retried", c.retried},
                                     {"failed", c.failed},
                                     {"dropped", c.dropped},
                                     {"timed_out", c.timed_out}}) {
      common::StrAppend(out, "podscope_notifications_total{destination=\"", label, "\",outcome=\"",
                        outcome, "\"} ", n, "\n");
    }
  }
}

}  // namespace podscope::coordinator::watch
