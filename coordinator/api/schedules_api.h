// The REST routes of scheduled captures (docs/gpu-efficiency.md): POST/GET/DELETE /v1/schedules.
#pragma once

#include "coordinator/capture/schedule_runner.h"
#include "coordinator/http/http_types.h"

namespace podscope::coordinator {

class SchedulesApi {
 public:
  explicit SchedulesApi(ScheduleRunner& runner) : runner_(runner) {}
  void Register(Router& router);

 private:
  HttpResponse Create(HttpRequest& request);
  HttpResponse List(HttpRequest& request);
  HttpResponse Get(HttpRequest& request);
  HttpResponse Delete(HttpRequest& request);

  ScheduleRunner& runner_;
};

}  // namespace podscope::coordinator
