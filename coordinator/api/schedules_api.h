// The REST routes of scheduled captures (docs/gpu-efficiency.md): POST/GET/DELETE /v1/schedules.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "coordinator/capture/schedule_runner.h"
#include "coordinator/http/http_types.h"

namespace podscope::coordinator {

class SchedulesApi {
 public:
  // `job_served`: whether connected agents serve the spec's job, and every rank it names, now. A
  // schedule they do not is still taken (jobs come and go), with a warning in the answer.
  using JobServed = std::function<bool(const ScheduleSpec& spec)>;
  SchedulesApi(ScheduleRunner& runner, JobServed job_served)
      : runner_(runner), job_served_(std::move(job_served)) {}
  void Register(Router& router);

 private:
  HttpResponse Create(HttpRequest& request);
  HttpResponse List(HttpRequest& request);
  HttpResponse Get(HttpRequest& request);
  HttpResponse Delete(HttpRequest& request);

  ScheduleRunner& runner_;
  const JobServed job_served_;
};

}  // namespace podscope::coordinator
