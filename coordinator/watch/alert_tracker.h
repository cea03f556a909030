// Alerts from findings, with hysteresis (docs/watch.md): a subject (a rank, a communicator, the
// job) fires after K of the last M evaluations of its rule found it, and resolves after R clean
// evaluations in a row. Keeps the firing alerts and a bounded history of resolved ones.
//
// Not thread-safe; time comes in with every call.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "coordinator/watch/alert_rules.h"
#include "coordinator/watch/detectors.h"

namespace podscope::coordinator::watch {

enum class AlertState : uint8_t { kFiring, kResolved };
std::string_view AlertStateName(AlertState state);

struct Alert {
  std::string id;
  std::string rule;
  AlertKind kind = AlertKind::kStraggler;
  AlertState state = AlertState::kFiring;
  std::string job;
  std::string subject;
  std::vector<int32_t> ranks;
  std::vector<std::string> hosts;
  Finding finding;  // the latest evidence
  TimeNs first_seen_ns = 0;
  TimeNs last_seen_ns = 0;
  int64_t fired_at_step =
      -1;  // the window's newest step when it fired (-1: not a window's finding)
  TimeNs resolved_ns = 0;
  std::optional<std::string> capture_id;  // the evidence capture
};

enum class Transition : uint8_t { kFired, kResolved };

struct AlertEvent {
  Transition transition = Transition::kFired;
  Alert alert;  // as it stands after the transition
};

struct TrackerLimits {
  size_t max_subjects = 100'000;  // subjects under observation (not yet firing, or firing)
  size_t max_resolved = 1'000;    // resolved alerts kept, newest first
};

class AlertTracker {
 public:
  explicit AlertTracker(TrackerLimits limits = {});

  // One evaluation of `rule` on `job`: what it found now. Subjects of this rule and job that are
  // not among the findings count a clean evaluation.
  std::vector<AlertEvent> Observe(const AlertRule& rule, const std::string& job,
                                  const std::vector<Finding>& findings, TimeNs now);

  // Forget a rule (deleted or changed): its firing alerts resolve now.
  std::vector<AlertEvent> Drop(const std::string& rule_name, TimeNs now);
  // Forget a job (another coordinator shard owns it now): its firing alerts resolve now.
  std::vector<AlertEvent> DropJob(const std::string& job, TimeNs now);

  bool SetCaptureId(const std::string& alert_id, const std::string& capture_id);
  // Firing alerts first (newest first), then resolved ones (newest first).
  std::vector<Alert> Alerts() const;
  size_t firing() const;
  uint64_t dropped_subjects() const { return dropped_subjects_; }

 private:
  using Key = std::tuple<std::string, std::string, std::string>;  // rule, job, subject
  struct Subject {
    std::deque<bool> recent;  // the last M evaluations, newest at the back
    int32_t clean_in_a_row = 0;
    std::optional<Alert> alert;  // set while firing
  };
  AlertEvent Resolve(Subject& s, TimeNs now);

  TrackerLimits limits_;
  std::map<Key, Subject> subjects_;
  std::deque<Alert> resolved_;
  uint64_t dropped_subjects_ = 0;
};

}  // namespace podscope::coordinator::watch
