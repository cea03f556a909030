#include "coordinator/api/watch_api.h"

#include <algorithm>

#include "common/json_writer.h"
#include "common/str_util.h"
#include "coordinator/watch/alert_json.h"

namespace podscope::coordinator {

void WatchApi::Register(http::Router& router) {
  auto bind = [this](http::HttpResponse (WatchApi::*method)(http::HttpRequest&)) {
    return [this, method](http::HttpRequest& r) { return (this->*method)(r); };
  };
  router.Add({.method = "GET",
              .pattern = "/v1/alerts",
              .handler = bind(&WatchApi::ListAlerts),
              .access = http::Access::kRead});
  router.Add({.method = "GET",
              .pattern = "/v1/alerts/rules",
              .handler = bind(&WatchApi::GetRules),
              .access = http::Access::kRead});
  router.Add({.method = "PUT",
              .pattern = "/v1/alerts/rules",
              .handler = bind(&WatchApi::PutRules),
              .access = http::Access::kAdmin});
  router.Add({.method = "GET",
              .pattern = "/v1/watch/jobs/{job}",
              .handler = bind(&WatchApi::JobWindow),
              .access = http::Access::kRead});
}

// GET /v1/alerts[?state=firing|resolved][&job=J]: firing alerts (newest first), then resolved ones.
http::HttpResponse WatchApi::ListAlerts(http::HttpRequest& r) {
  const std::string state = r.Query("state");
  if (!state.empty() && state != "firing" && state != "resolved") {
    return http::HttpResponse::Problem(400, "Bad Request", "state must be firing or resolved");
  }
  const std::string job = r.Query("job");
  common::JsonWriter out;
  out.BeginObject().Key("alerts").BeginArray();
  for (const watch::Alert& a : watch_.Alerts()) {
    if (!state.empty() && watch::AlertStateName(a.state) != state) continue;
    if (!job.empty() && a.job != job) continue;
    watch::WriteAlertJson(out, a);
  }
  out.EndArray().EndObject();
  return http::HttpResponse::Json(200, std::move(out.buffer()));
}

http::HttpResponse WatchApi::GetRules(http::HttpRequest&) {
  return http::HttpResponse::Json(200, watch_.RulesJson());
}

// PUT /v1/alerts/rules: the whole rule set. Checked before anything changes; stored, then applied.
http::HttpResponse WatchApi::PutRules(http::HttpRequest& r) {
  if (absl::Status s = watch_.SetRules(r.body); !s.ok()) {
    if (s.code() == absl::StatusCode::kInvalidArgument)
      return http::HttpResponse::Problem(400, "Bad Request", std::string(s.message()));
    return http::HttpResponse::Problem(500, "Internal Server Error", std::string(s.message()));
  }
  return http::HttpResponse::Json(200, watch_.RulesJson());
}

// GET /v1/watch/jobs/{job}: the job's latest window, per rank: steps, mean step time, lag (its
// mean step time over the median rank's), caused delay and last-arriver share.
http::HttpResponse WatchApi::JobWindow(http::HttpRequest& r) {
  const std::string& job = r.params["job"];
  const std::map<std::string, watch::WindowStats> windows = watch_.Windows();
  const auto it = windows.find(job);
  if (it == windows.end()) {
    return http::HttpResponse::Problem(
        404, "Not Found",
        common::StrCat("no watch data for job ", job,
                       " yet (agents stream it once its ranks run)"));
  }
  const watch::WindowStats& w = it->second;
  std::vector<double> means;
  for (const watch::RankWindow& rank : w.ranks) {
    if (rank.steps > 0)
      means.push_back(static_cast<double>(rank.step_time_ns) / static_cast<double>(rank.steps));
  }
  double median = 0;
  if (!means.empty()) {
    std::nth_element(means.begin(), means.begin() + static_cast<std::ptrdiff_t>(means.size() / 2),
                     means.end());
    median = means[means.size() / 2];
  }
  common::JsonWriter out;
  out.BeginObject().Key("job").String(job);
  out.Key("first_step").Int(w.first_step).Key("last_step").Int(w.last_step);
  out.Key("full").Bool(w.full);
  for (const auto& [key, ranks] :
       {std::pair{"absent_ranks", &w.absent_ranks}, std::pair{"missing_ranks", &w.missing_ranks}}) {
    out.Key(key).BeginArray();
    for (int32_t rank : *ranks) out.Int(rank);
    out.EndArray();
  }
  out.Key("step_time_ms")
      .Double(w.step_time_ns.empty() ? 0 : static_cast<double>(w.step_time_ns.back()) / 1e6);
  out.Key("ranks").BeginArray();
  for (size_t i = 0; i < w.ranks.size(); ++i) {
    const watch::RankWindow& rank = w.ranks[i];
    const double mean =
        rank.steps > 0 ? static_cast<double>(rank.step_time_ns) / static_cast<double>(rank.steps)
                       : 0;
    out.BeginObject().Key("rank").Int(rank.rank);
    out.Key("host").String(i < w.hosts.size() ? w.hosts[i] : "").Key("steps").Int(rank.steps);
    out.Key("step_time_ms").Double(mean / 1e6).Key("lag_ms").Double((mean - median) / 1e6);
    out.Key("caused_delay_ms").Double(static_cast<double>(rank.caused_delay_ns) / 1e6);
    out.Key("last_arriver_share")
        .Double(rank.collectives > 0 ? static_cast<double>(rank.last_arrivals) /
                                           static_cast<double>(rank.collectives)
                                     : 0);
    out.EndObject();
  }
  out.EndArray().EndObject();
  return http::HttpResponse::Json(200, std::move(out.buffer()));
}

}  // namespace podscope::coordinator
