// Training steps per worker: from step markers (ProfilerStep#N,
// explicit step events, or annotations matching a pattern), else inferred from the period of
// the collective sequence, else (a job without collectives: one GPU) from the period of its
// kernel launches. Each step gets its host span and its device span.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/intervals.h"
#include "common/capture.h"
#include "common/worker_trace.h"

namespace podscope::analysis {

enum class StepSource : uint8_t {
  kNone = 0,
  kMarkers = 1,
  kPattern = 2,
  kInferred = 3,  // from the collectives' period
  kLaunches = 4,  // from the kernel launches' period
};
std::string_view StepSourceName(StepSource source);

struct StepSpan {
  int64_t number = 0;
  Interval host;
  Interval device;  // empty (start == end) when no device activity was launched in the step
  bool has_device() const { return device.end > device.start; }
};

struct StepOptions {
  // When set, annotations whose name matches this regex (RE2 syntax, common/step_pattern.h) are
  // the step markers; the last capture group that is all digits is the step number (with none,
  // markers are numbered in order).
  std::string marker_pattern;
};

struct WorkerSteps {
  StepSource source = StepSource::kNone;
  std::vector<StepSpan> steps;  // by host start
  // For every kernel / memcpy row: index into `steps` of the step that launched it, or -1.
  std::vector<int32_t> kernel_step, memcpy_step;
};

// Pure; any thread. An invalid marker_pattern is treated as no pattern (validated by callers).
WorkerSteps FindSteps(const common::WorkerTrace& trace, const StepOptions& options = {});

// FindSteps for every worker of a capture, in parallel.
std::vector<WorkerSteps> FindAllSteps(const common::CaptureView& capture,
                                      const StepOptions& options = {});

// Launch time of every kernel / memcpy row (start of the runtime call with the same
// correlation id), or the row's own start when its launch is not in the trace.
struct LaunchTimes {
  std::vector<TimeNs> kernel, memcpy;
};
LaunchTimes FindLaunchTimes(const common::WorkerTrace& trace);

}  // namespace podscope::analysis
