#include "coordinator/api/watch_api.h"

#include "common/json_writer.h"
#include "common/str_util.h"

namespace podscope::coordinator {
namespace {

void WriteAlert(common::JsonWriter& out, const watch::Alert& a) {
  out.Char('{').Key("id").String(a.id);
  out.Char(',').Key("rule").String(a.rule);
  out.Char(',').Key("kind").String(watch::AlertKindName(a.kind));
  out.Char(',').Key("state").String(watch::AlertStateName(a.state));
  out.Char(',').Key("job").String(a.job);
  out.Char(',').Key("subject").String(a.subject);
  out.Char(',').Key("ranks").Char('[');
  for (size_t i = 0; i < a.ranks.size(); ++i) (i ? out.Char(',') : out).Int(a.ranks[i]);
  out.Char(']').Char(',').Key("hosts").Char('[');
  for (size_t i = 0; i < a.hosts.size(); ++i) (i ? out.Char(',') : out).String(a.hosts[i]);
  out.Char(']').Char(',').Key("evidence").Char('{');
  bool first = true;
  for (const watch::Evidence& e : a.finding.evidence) {
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
    for (size_t i = 0; i < a.finding.steps.size(); ++i) (i ? out.Char(',') : out).Int(a.finding.steps[i]);
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
  if (a.state == watch::AlertState::kResolved) out.Char(',').Key("resolved_ns").Int(a.resolved_ns);
  out.Char(',').Key("capture_id");
  if (a.capture_id) {
    out.String(*a.capture_id);
  } else {
    out.Raw("null");
  }
  out.Char('}');
}

}  // namespace

std::string AlertToJson(const watch::Alert& alert) {
  common::JsonWriter out;
  WriteAlert(out, alert);
  return std::move(out.buffer());
}

void WatchApi::Register(Router& router) {
  auto bind = [this](HttpResponse (WatchApi::*method)(HttpRequest&)) {
    return [this, method](HttpRequest& r) { return (this->*method)(r); };
  };
  router.Add({"GET", "/v1/alerts", bind(&WatchApi::ListAlerts), false, false, Access::kRead});
  router.Add({"GET", "/v1/alerts/rules", bind(&WatchApi::GetRules), false, false, Access::kRead});
  router.Add({"PUT", "/v1/alerts/rules", bind(&WatchApi::PutRules), false, false, Access::kAdmin});
}

// GET /v1/alerts[?state=firing|resolved][&job=J]: firing alerts (newest first), then resolved ones.
HttpResponse WatchApi::ListAlerts(HttpRequest& r) {
  const std::string state = r.Query("state");
  if (!state.empty() && state != "firing" && state != "resolved") {
    return HttpResponse::Problem(400, "Bad Request", "state must be firing or resolved");
  }
  const std::string job = r.Query("job");
  common::JsonWriter out;
  out.Char('{').Key("alerts").Char('[');
  bool first = true;
  for (const watch::Alert& a : watch_.Alerts()) {
    if (!state.empty() && watch::AlertStateName(a.state) != state) continue;
    if (!job.empty() && a.job != job) continue;
    if (!first) out.Char(',');
    first = false;
    WriteAlert(out, a);
  }
  out.Char(']').Char('}');
  return HttpResponse::Json(200, std::move(out.buffer()));
}

HttpResponse WatchApi::GetRules(HttpRequest&) { return HttpResponse::Json(200, watch_.RulesJson()); }

// PUT /v1/alerts/rules: the whole rule set. Checked before anything changes; stored, then applied.
HttpResponse WatchApi::PutRules(HttpRequest& r) {
  if (absl::Status s = watch_.SetRules(r.body); !s.ok()) {
    if (s.code() == absl::StatusCode::kInvalidArgument) return HttpResponse::Problem(400, "Bad Request", std::string(s.message()));
    return HttpResponse::Problem(500, "Internal Server Error", std::string(s.message()));
  }
  return HttpResponse::Json(200, watch_.RulesJson());
}

}  // namespace podscope::coordinator
