// The REST routes of scheduled captures (docs/gpu-efficiency.md): POST/GET/DELETE /v1/schedules.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "coordinator/capture/schedule_runner.h"
#include "http/http_types.h"

namespace podscope::coordinator {

class SchedulesApi {
 public:
  // `job_served`: whether connected agents serve the spec's job, and every rank it names, now. A
  // schedule they do not is still taken (jobs come and go), with a warning in the answer.
  using JobServed = std::function<bool(const ScheduleSpec& spec)>;
  SchedulesApi(ScheduleRunner& runner, JobServed job_served)
      : runner_(runner), job_served_(std::move(job_served)) {}
  void Register(http::Router& router);

 private:
  http::HttpResponse Create(http::HttpRequest& request);
  http::HttpResponse List(http::HttpRequest& request);
  http::HttpResponse Get(http::HttpRequest& request);
  http::HttpResponse Delete(http::HttpRequest& request);

  ScheduleRunner& runner_;
  const JobServed job_served_;
};

}  // namespace podscope::coordinator
