// The REST routes of watching (docs/gpu-efficiency.md): alerts, and the alert rules.
#pragma once

#include "coordinator/watch/watch_service.h"
#include "http/http_types.h"

namespace podscope::coordinator {

class WatchApi {
 public:
  explicit WatchApi(watch::WatchService& watch) : watch_(watch) {}

  void Register(http::Router& router);

 private:
  http::HttpResponse ListAlerts(http::HttpRequest& request);
  http::HttpResponse GetRules(http::HttpRequest& request);
  http::HttpResponse PutRules(http::HttpRequest& request);
  http::HttpResponse JobWindow(http::HttpRequest& request);

  watch::WatchService& watch_;
};

}  // namespace podscope::coordinator
