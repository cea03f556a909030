// The REST routes of live captures (docs/life-of-a-capture.md): the agents' workers, starting a
// capture on them, and cancelling it. Progress and results come through the capture routes of
// RestApi.
#pragma once

#include "common/time_source.h"
#include "coordinator/agents/agent_registry.h"
#include "coordinator/capture/capture_scheduler.h"
#include "coordinator/clock/clock_aligner.h"
#include "http/http_types.h"

namespace podscope::coordinator {

class LiveApi {
 public:
  LiveApi(AgentRegistry& registry, ClockAligner& aligner, CaptureScheduler& scheduler,
          const common::TimeSource& time)
      : registry_(registry), aligner_(aligner), scheduler_(scheduler), time_(time) {}

  void Register(http::Router& router);

 private:
  http::HttpResponse ListWorkers(http::HttpRequest& request);
  http::HttpResponse StartCapture(http::HttpRequest& request);
  http::HttpResponse CancelCapture(http::HttpRequest& request);

  AgentRegistry& registry_;
  ClockAligner& aligner_;
  CaptureScheduler& scheduler_;
  const common::TimeSource& time_;
};

}  // namespace podscope::coordinator
