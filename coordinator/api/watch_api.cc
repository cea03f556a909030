#include "coordinator/api/watch_api.h"

#include "common/json_writer.h"
#include "coordinator/watch/alert_json.h"
#include "common/str_util.h"

namespace podscope::coordinator {

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
    watch::WriteAlertJson(out, a);
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
