// Sends alert transitions out (docs/watch.md): to Alertmanager's v2 API (POST /api/v2/alerts, with
// firing alerts re-sent periodically, as Alertmanager expects of its clients) and to webhooks
// (POST of {"event": "fired"|"resolved", "alert": {...}}, or Slack's {"text": "..."}). Each
// destination has its own thread and bounded queue (drop oldest, counted), a deadline on each
// attempt's whole exchange and retries with backoff, so a destination that fails, never answers
// or answers a byte at a time delays only its own deliveries: Notify never blocks, and Stop
// cancels deliveries in flight.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/cancellation.h"
#include "coordinator/watch/alert_tracker.h"
#include "http/http_client.h"
#include "http/rate_limited_log.h"

namespace podscope::coordinator::watch {

struct NotifierOptions {
  std::vector<std::string> alertmanagers;   // http[s]://host:port of each Alertmanager
  std::vector<std::string> webhooks;        // http[s]://host:port/path: the alert as JSON
  std::vector<std::string> slack_webhooks;  // Slack-compatible incoming webhooks: {"text": ...}
  std::string ca_file;                      // for https destinations with a private CA
  std::string external_url;                 // this coordinator's REST URL, for links in alerts
  // Per attempt, the whole exchange: connecting, the request and the whole answer.
  absl::Duration timeout = absl::Seconds(5);
  int max_attempts = 5;
  absl::Duration first_retry = absl::Milliseconds(500);
  absl::Duration max_retry = absl::Seconds(30);
  size_t max_queued = 1'024;  // per destination
  absl::Duration alertmanager_resend = absl::Seconds(60);
};

struct DestinationCounters {
  uint64_t delivered = 0;
  uint64_t retried = 0;
  uint64_t failed = 0;     // every attempt failed
  uint64_t dropped = 0;    // pushed out of a full queue
  uint64_t timed_out = 0;  // attempts (deliveries and re-sends) that ran past their deadline
};

class AlertNotifier {
 public:
  // `firing` lists the alerts firing now (for Alertmanager's periodic re-send). Bad URLs are an
  // error naming them.
  static absl::StatusOr<std::unique_ptr<AlertNotifier>> Create(
      NotifierOptions options, std::function<std::vector<Alert>()> firing);
  ~AlertNotifier();

  void Start();
  void Stop();  // cancels deliveries in flight and joins: returns within a poll's wake-up
  // Queues the transition for every destination; never blocks.
  void Notify(const AlertEvent& event);
  // Per destination: podscope_notifications_total{destination, outcome}.
  void AppendMetrics(std::string* out) const;
  std::vector<std::pair<std::string, DestinationCounters>> counters() const;

 private:
  struct Delivery {
    std::string body;
    int attempts = 0;
    absl::Time not_before = absl::InfinitePast();
  };
  struct Destination {
    std::string url;
    bool alertmanager = false;
    bool slack = false;
    http::ServerAddress address;
    mutable absl::Mutex mu;
    std::deque<Delivery> queue ABSL_GUARDED_BY(mu);
    DestinationCounters counters ABSL_GUARDED_BY(mu);
    std::thread thread;
  };

  AlertNotifier(NotifierOptions options, std::function<std::vector<Alert>()> firing);
  void Run(Destination& d);
  absl::Status Post(const Destination& d, const std::string& body) const;
  std::string AlertmanagerBody(const std::vector<Alert>& alerts) const;

  const NotifierOptions options_;
  const std::function<std::vector<Alert>()> firing_;
  common::Cancellation cancel_;  // raised by Stop; every destination's exchanges watch it
  std::vector<std::unique_ptr<Destination>> destinations_;
  absl::Mutex stop_mu_;
  bool stopping_ ABSL_GUARDED_BY(stop_mu_) = false;
  http::RateLimitedLog log_{"notify"};
};

}  // namespace podscope::coordinator::watch
