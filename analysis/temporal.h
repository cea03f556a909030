// Temporal summary per worker: kernel time, idle, compute, non-compute and
// overlap %. `window=hta` follows Holistic Trace Analysis exactly (its window rule, kernel
// classes and microsecond rounding, see ../shared/data/kineto/README.md) so people moving from
// HTA see the same numbers; `window=steps` uses the capture's steps and podscope's classes.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/intervals.h"
#include "analysis/steps.h"
#include "common/capture.h"

namespace podscope::analysis {

enum class WindowMode : uint8_t { kSteps = 0, kHta = 1 };

struct TemporalOptions {
  WindowMode window = WindowMode::kSteps;
  StepOptions steps;
  TimeNs kernel_wait_threshold_ns = 30'000;  // HTA's idle split: short gaps are kernel waits
};

// Idle time of one GPU stream split by cause (HTA's idle-time analysis).
struct StreamIdle {
  int32_t device = 0;
  int32_t stream = 0;
  TimeNs host_wait_ns = 0;    // the next kernel's launch call started after the stream went idle
  TimeNs kernel_wait_ns = 0;  // short gaps (< threshold, negative gaps included)
  TimeNs other_ns = 0;
};

struct WorkerTemporal {
  int32_t rank = 0;
  TimeNs kernel_time_ns = 0;  // first device activity to last, in the window
  TimeNs idle_ns = 0;
  TimeNs compute_ns = 0;
  TimeNs non_compute_ns = 0;
  double overlap_pct = 0;  // share of communication-kernel time overlapped by computation
  std::vector<StreamIdle> idle_by_stream;
};

struct TemporalReport {
  WindowMode window = WindowMode::kSteps;
  std::vector<WorkerTemporal> workers;
};

// Pure; any thread. Workers are processed independently.
// `steps` (from FindAllSteps) is used by the steps window; nullptr finds them. Parallel over
// workers.
TemporalReport ComputeTemporal(const common::CaptureView& capture, const TemporalOptions& options,
                               const std::vector<WorkerSteps>* steps = nullptr);
WorkerTemporal ComputeWorkerTemporal(const common::WorkerTrace& trace,
                                     const TemporalOptions& options,
                                     const WorkerSteps* steps = nullptr);

}  // namespace podscope::analysis
