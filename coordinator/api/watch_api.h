// The REST routes of watching (docs/gpu-efficiency.md): alerts, and the alert rules.
#pragma once

#include "coordinator/http/http_types.h"
#include "coordinator/watch/watch_service.h"

namespace podscope::coordinator {

class WatchApi {
 public:
  explicit WatchApi(watch::WatchService& watch) : watch_(watch) {}

  void Register(Router& router);

 private:
  HttpResponse ListAlerts(HttpRequest& request);
  HttpResponse GetRules(HttpRequest& request);
  HttpResponse PutRules(HttpRequest& request);
  HttpResponse JobWindow(HttpRequest& request);

  watch::WatchService& watch_;
};

}  // namespace podscope::coordinator
