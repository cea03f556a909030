// Per-step breakdown: within a worker's step span every instant belongs to exactly
// one category, chosen by what is active on the device then (and, when the device is idle, by
// what the host is doing). The categories sum to the span exactly.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "analysis/communication.h"
#include "analysis/steps.h"
#include "common/capture.h"

namespace podscope::analysis {

struct StepBreakdown {
  int64_t step = 0;
  Interval span;  // the step's device span (own clock)
  TimeNs span_ns = 0;
  TimeNs compute_ns = 0;        // only computation kernels
  TimeNs overlap_ns = 0;        // computation and communication kernels together
  TimeNs communication_ns = 0;  // only communication kernels = comm_wait + comm_transfer
  TimeNs comm_wait_ns = 0;
  TimeNs comm_transfer_ns = 0;
  TimeNs memcpy_ns = 0;  // only copies / memsets = the four below
  TimeNs memcpy_h2d_ns = 0, memcpy_d2h_ns = 0, memcpy_d2d_ns = 0, memcpy_other_ns = 0;
  TimeNs idle_input_ns = 0;   // device idle, host in an input / dataloader span
  TimeNs idle_launch_ns = 0;  // device idle, host in a CUDA call or a launch in flight
  TimeNs idle_host_ns = 0;    // device idle, host busy in other work
  TimeNs idle_other_ns = 0;
  // Before the span: from the previous step's span to this one's, the device ran none of either
  // step's work (0 for a worker's first step). Split by what the host did, as the idle
  // categories; `before_other_ns` also holds device work launched outside any step. Not part of
  // the span: an input-bound worker's dataloader usually runs here, before its first kernel.
  TimeNs before_ns = 0;
  TimeNs before_input_ns = 0, before_launch_ns = 0, before_host_ns = 0, before_other_ns = 0;

  TimeNs Sum() const {
    return compute_ns + overlap_ns + communication_ns + memcpy_ns + idle_input_ns + idle_launch_ns +
           idle_host_ns + idle_other_ns;
  }
  // Share of communication-kernel time hidden behind computation, in percent; none without
  // communication kernels.
  std::optional<double> OverlapPercent() const {
    const TimeNs comm = overlap_ns + communication_ns;
    if (comm <= 0) return std::nullopt;
    return 100.0 * static_cast<double>(overlap_ns) / static_cast<double>(comm);
  }
};

struct WorkerBreakdown {
  int32_t rank = 0;
  StepSource step_source = StepSource::kNone;
  std::vector<StepBreakdown> steps;  // steps with device activity, by start
};

// `steps` comes from FindAllSteps; `communication` supplies each collective's wait (nullptr:
// all communication is transfer). Pure; parallel over workers.
std::vector<WorkerBreakdown> ComputeBreakdown(const common::CaptureView& capture,
                                              const std::vector<WorkerSteps>& steps,
                                              const CommunicationReport* communication);
WorkerBreakdown ComputeWorkerBreakdown(const common::WorkerTrace& trace, const WorkerSteps& steps,
                                       const std::vector<TimeNs>* collective_wait);

}  // namespace podscope::analysis
