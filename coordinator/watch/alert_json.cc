#include "coordinator/watch/alert_json.h"

namespace podscope::coordinator::watch {

void WriteAlertJson(common::JsonWriter& out, const Alert& a) {
  out.Char('{').Key("id").String(a.id);
  out.Char(',').Key("rule").String(a.rule);
  out.Char(',').Key("kind").String(AlertKindName(a.kind));
  out.Char(',').Key("state").String(AlertStateName(a.state));
  out.Char(',').Key("job").String(a.job);
  out.Char(',').Key("subject").String(a.subject);
  out.Char(',').Key("ranks").Char('[');
  for (size_t i = 0; i < a.ranks.size(); ++i) (i ? out.Char(',') : out).Int(a.ranks[i]);
  out.Char(']').Char(',').Key("hosts").Char('[');
  for (size_t i = 0; i < a.hosts.size(); ++i) (i ? out.Char(',') : out).String(a.hosts[i]);
  out.Char(']').Char(',').Key("evidence").Char('{');
  bool first = true;
  for (const Evidence& e : a.finding.evidence) {
    if (!first) out.Char(',');
    first = false;
    out.Key(e.name);
    if (e.text.empty()) {
      out.Double(e.number);
    } else {
      out.String(e.text);
    }
  }
  if (!a.finding.steps.empty()) {
    if (!first) out.Char(',');
    first = false;
    out.Key("steps").Char('[');
    for (size_t i = 0; i < a.finding.steps.size(); ++i)
      (i ? out.Char(',') : out).Int(a.finding.steps[i]);
    out.Char(']');
  }
  if (!a.finding.last_completed.empty()) {
    if (!first) out.Char(',');
    out.Key("last_completed").Char('[');
    for (size_t i = 0; i < a.finding.last_completed.size(); ++i) {
      if (i) out.Char(',');
      out.Char('{').Key("rank").Int(a.finding.last_completed[i].first);
      out.Char(',').Key("sequence").Int(a.finding.last_completed[i].second).Char('}');
    }
    out.Char(']');
  }
  out.Char('}');
  out.Char(',').Key("message").String(a.finding.message);
  out.Char(',').Key("first_seen_ns").Int(a.first_seen_ns);
  out.Char(',').Key("last_seen_ns").Int(a.last_seen_ns);
  if (a.fired_at_step >= 0) out.Char(',').Key("fired_at_step").Int(a.fired_at_step);
  if (a.state == AlertState::kResolved) out.Char(',').Key("resolved_ns").Int(a.resolved_ns);
  out.Char(',').Key("capture_id");
  if (a.capture_id) {
    out.String(*a.capture_id);
  } else {
    out.Raw("null");
  }
  out.Char('}');
}

std::string AlertToJson(const Alert& alert) {
  common::JsonWriter out;
  WriteAlertJson(out, alert);
  return std::move(out.buffer());
}

}  // namespace podscope::coordinator::watch
