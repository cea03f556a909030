#include "coordinator/watch/alert_tracker.h"

#include <algorithm>
#include <functional>

#include "fmt/format.h"

namespace podscope::coordinator::watch {

std::string_view AlertStateName(AlertState state) {
  return state == AlertState::kFiring ? "firing" : "resolved";
}

AlertTracker::AlertTracker(TrackerLimits limits) : limits_(limits) {}

std::vector<AlertEvent> AlertTracker::Observe(const AlertRule& rule, const std::string& job,
                                              const std::vector<Finding>& findings, TimeNs now) {
  std::vector<AlertEvent> events;
  const size_t window = static_cast<size_t>(rule.hysteresis.of_windows);
  std::map<std::string, const Finding*> found;
  for (const Finding& f : findings) found.emplace(f.subject, &f);

  for (const auto& [subject, f] : found) {
    const Key key{rule.name, job, subject};
    auto it = subjects_.find(key);
    if (it == subjects_.end()) {
      if (subjects_.size() >= limits_.max_subjects) {
        ++dropped_subjects_;
        continue;
      }
      it = subjects_.emplace(key, Subject{}).first;
    }
    Subject& s = it->second;
    s.recent.push_back(true);
    while (s.recent.size() > window) s.recent.pop_front();
    s.clean_in_a_row = 0;
    if (s.alert) {
      s.alert->finding = *f;
      s.alert->ranks = f->ranks;
      s.alert->hosts = f->hosts;
      s.alert->last_seen_ns = now;
      continue;
    }
    if (std::count(s.recent.begin(), s.recent.end(), true) < rule.hysteresis.fire_after) continue;
    Alert a;
    a.id = fmt::format("{:016x}", std::hash<std::string>{}(rule.name + '\n' + job + '\n' + subject +
                                                           '\n' + std::to_string(now)));
    a.rule = rule.name;
    a.kind = rule.kind;
    a.job = job;
    a.subject = subject;
    a.ranks = f->ranks;
    a.hosts = f->hosts;
    a.finding = *f;
    a.first_seen_ns = a.last_seen_ns = now;
    a.fired_at_step = f->window_last_step;
    s.alert = a;
    events.push_back({Transition::kFired, std::move(a)});
  }

  // Everything else this rule watches on this job had a clean evaluation.
  for (auto it = subjects_.lower_bound(Key{rule.name, job, ""});
       it != subjects_.end() && std::get<0>(it->first) == rule.name &&
       std::get<1>(it->first) == job;) {
    if (found.contains(std::get<2>(it->first))) {
      ++it;
      continue;
    }
    Subject& s = it->second;
    s.recent.push_back(false);
    while (s.recent.size() > window) s.recent.pop_front();
    ++s.clean_in_a_row;
    if (s.alert && s.clean_in_a_row >= rule.hysteresis.resolve_after)
      events.push_back(Resolve(s, now));
    if (!s.alert && std::count(s.recent.begin(), s.recent.end(), true) == 0) {
      it = subjects_.erase(it);
    } else {
      ++it;
    }
  }
  return events;
}

AlertEvent AlertTracker::Resolve(Subject& s, TimeNs now) {
  Alert a = std::move(*s.alert);
  s.alert.reset();
  a.state = AlertState::kResolved;
  a.resolved_ns = now;
  resolved_.push_front(a);
  while (resolved_.size() > limits_.max_resolved) resolved_.pop_back();
  return {Transition::kResolved, std::move(a)};
}

std::vector<AlertEvent> AlertTracker::Drop(const std::string& rule_name, TimeNs now) {
  std::vector<AlertEvent> events;
  for (auto it = subjects_.lower_bound(Key{rule_name, "", ""});
       it != subjects_.end() && std::get<0>(it->first) == rule_name;) {
    if (it->second.alert) events.push_back(Resolve(it->second, now));
    it = subjects_.erase(it);
  }
  return events;
}

std::vector<AlertEvent> AlertTracker::DropJob(const std::string& job, TimeNs now) {
  std::vector<AlertEvent> events;
  for (auto it = subjects_.begin(); it != subjects_.end();) {
    if (std::get<1>(it->first) != job) {
      ++it;
      continue;
    }
    if (it->second.alert) events.push_back(Resolve(it->second, now));
    it = subjects_.erase(it);
  }
  return events;
}

bool AlertTracker::SetCaptureId(const std::string& alert_id, const std::string& capture_id) {
  for (auto& [key, s] : subjects_) {
    if (s.alert && s.alert->id == alert_id) {
      s.alert->capture_id = capture_id;
      return true;
    }
  }
  for (Alert& a : resolved_) {
    if (a.id == alert_id) {
      a.capture_id = capture_id;
      return true;
    }
  }
  return false;
}

std::vector<Alert> AlertTracker::Alerts() const {
  std::vector<Alert> out;
  for (const auto& [key, s] : subjects_) {
    if (s.alert) out.push_back(*s.alert);
  }
  std::sort(out.begin(), out.end(), [](const Alert& a, const Alert& b) {
    return a.first_seen_ns != b.first_seen_ns ? a.first_seen_ns > b.first_seen_ns : a.id < b.id;
  });
  out.insert(out.end(), resolved_.begin(), resolved_.end());
  return out;
}

size_t AlertTracker::firing() const {
  size_t n = 0;
  for (const auto& [key, s] : subjects_) n += s.alert ? 1 : 0;
  return n;
}

}  // namespace podscope::coordinator::watch
