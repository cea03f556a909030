#include "coordinator/watch/alert_json.h"

namespace podscope::coordinator::watch {

void WriteAlertJson(common::JsonWriter& out, const Alert& a) {
  out.BeginObject().Key("id").String(a.id).Key("rule").String(a.rule);
  out.Key("kind").String(AlertKindName(a.kind)).Key("state").String(AlertStateName(a.state));
  out.Key("job").String(a.job).Key("subject").String(a.subject);
  out.Key("ranks").BeginArray();
  for (int32_t rank : a.ranks) out.Int(rank);
  out.EndArray().Key("hosts").BeginArray();
  for (const std::string& host : a.hosts) out.String(host);
  out.EndArray().Key("evidence").BeginObject();
  for (const Evidence& e : a.finding.evidence) {
    out.Key(e.name);
    if (e.text.empty()) {
      out.Double(e.number);
    } else {
      out.String(e.text);
    }
  }
  if (!a.finding.steps.empty()) {
    out.Key("steps").BeginArray();
    for (int64_t step : a.finding.steps) out.Int(step);
    out.EndArray();
  }
  if (!a.finding.last_completed.empty()) {
    out.Key("last_completed").BeginArray();
    for (const auto& [rank, sequence] : a.finding.last_completed)
      out.BeginObject().Key("rank").Int(rank).Key("sequence").Int(sequence).EndObject();
    out.EndArray();
  }
  out.EndObject();
  out.Key("message").String(a.finding.message);
  out.Key("first_seen_ns").Int(a.first_seen_ns).Key("last_seen_ns").Int(a.last_seen_ns);
  if (a.fired_at_step >= 0) out.Key("fired_at_step").Int(a.fired_at_step);
  if (a.state == AlertState::kResolved) out.Key("resolved_ns").Int(a.resolved_ns);
  out.Key("capture_id");
  if (a.capture_id) {
    out.String(*a.capture_id);
  } else {
    out.Null();
  }
  out.EndObject();
}

std::string AlertToJson(const Alert& alert) {
  common::JsonWriter out;
  WriteAlertJson(out, alert);
  return std::move(out.buffer());
}

}  // namespace podscope::coordinator::watch
