#include "coordinator/api/schedules_api.h"

#include "common/json_writer.h"
#include "common/str_util.h"

namespace podscope::coordinator {

void SchedulesApi::Register(http::Router& router) {
  auto bind = [this](http::HttpResponse (SchedulesApi::*method)(http::HttpRequest&)) {
    return [this, method](http::HttpRequest& r) { return (this->*method)(r); };
  };
  router.Add({.method = "POST",
              .pattern = "/v1/schedules",
              .handler = bind(&SchedulesApi::Create),
              .access = http::Access::kCapture});
  router.Add({.method = "GET",
              .pattern = "/v1/schedules",
              .handler = bind(&SchedulesApi::List),
              .access = http::Access::kRead});
  router.Add({.method = "GET",
              .pattern = "/v1/schedules/{id}",
              .handler = bind(&SchedulesApi::Get),
              .access = http::Access::kRead});
  router.Add({.method = "DELETE",
              .pattern = "/v1/schedules/{id}",
              .handler = bind(&SchedulesApi::Delete),
              .access = http::Access::kCapture});
}

// POST /v1/schedules {"job", "every_s", "duration_ms", "ranks"?}: 201 with the schedule, and a
// "warning" when no connected agent serves the job.
http::HttpResponse SchedulesApi::Create(http::HttpRequest& r) {
  absl::StatusOr<ScheduleSpec> spec = ParseScheduleSpec(r.body);
  if (!spec.ok())
    return http::HttpResponse::Problem(400, "Bad Request", std::string(spec.status().message()));
  absl::StatusOr<Schedule> added = runner_.Add(std::move(*spec));
  if (!added.ok()) {
    if (added.status().code() == absl::StatusCode::kResourceExhausted) {
      return http::HttpResponse::Problem(409, "Conflict", std::string(added.status().message()));
    }
    if (added.status().code() == absl::StatusCode::kInvalidArgument) {
      return http::HttpResponse::Problem(400, "Bad Request", std::string(added.status().message()));
    }
    return http::HttpResponse::Problem(500, "Internal Server Error",
                                       std::string(added.status().message()));
  }
  std::string warning;
  if (!job_served_(added->spec)) {
    warning = common::StrCat("no connected agent serves job ", added->spec.job,
                             added->spec.ranks.empty() ? "" : " with every rank asked for",
                             " now: its captures fail until one does (see podscope workers)");
  }
  http::HttpResponse response =
      http::HttpResponse::Json(201, ScheduleToJson(*added, warning) + "\n");
  response.headers.emplace_back("Location", common::StrCat("/v1/schedules/", added->id));
  return response;
}

http::HttpResponse SchedulesApi::List(http::HttpRequest&) {
  common::JsonWriter out;
  out.BeginObject().Key("schedules").BeginArray();
  for (const Schedule& s : runner_.List()) out.RawValue(ScheduleToJson(s));
  // Stored schedules a start could not read back: kept, not run (storage/set_aside.h).
  out.EndArray().Key("set_aside").RawValue(storage::SetAsideToJson(runner_.SetAside()));
  out.EndObject().EndLine();
  return http::HttpResponse::Json(200, std::move(out.buffer()));
}

http::HttpResponse SchedulesApi::Get(http::HttpRequest& r) {
  const std::optional<Schedule> s = runner_.Get(r.params["id"]);
  if (!s)
    return http::HttpResponse::Problem(404, "Not Found",
                                       common::StrCat("no schedule ", r.params["id"]));
  return http::HttpResponse::Json(200, ScheduleToJson(*s) + "\n");
}

// DELETE /v1/schedules/{id}: no more captures; one already started runs to its end.
http::HttpResponse SchedulesApi::Delete(http::HttpRequest& r) {
  const absl::Status s = runner_.Remove(r.params["id"]);
  if (s.code() == absl::StatusCode::kNotFound)
    return http::HttpResponse::Problem(404, "Not Found", std::string(s.message()));
  if (!s.ok())
    return http::HttpResponse::Problem(500, "Internal Server Error", std::string(s.message()));
  http::HttpResponse response;
  response.status = 204;
  return response;
}

}  // namespace podscope::coordinator
