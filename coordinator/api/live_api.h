// The REST routes of live captures (docs/life-of-a-capture.md): the agents' workers, starting a
// capture on them, and cancelling it. Progress and results come through the capture routes of
// RestApi.
#pragma once

#include "coordinator/agents/agent_registry.h"
#include "coordinator/capture/capture_scheduler.h"
#include "coordinator/clock/clock_aligner.h"
#include "coordinator/http/http_types.h"

namespace podscope::coordinator {

class LiveApi {
 public:
  LiveApi(AgentRegistry& registry, ClockAligner& aligner, CaptureScheduler& scheduler,
          std::function<TimeNs()> now)
      : registry_(registry), aligner_(aligner), scheduler_(scheduler), now_(std::move(now)) {}

  void Register(Router& router);

 private:
  HttpResponse ListWorkers(HttpRequest& request);
  HttpResponse StartCapture(HttpRequest& request);
  HttpResponse CancelCapture(HttpRequest& request);

  AgentRegistry& registry_;
  ClockAligner& aligner_;
  CaptureScheduler& scheduler_;
  std::function<TimeNs()> now_;
};

}  // namespace podscope::coordinator
