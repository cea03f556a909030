// The input pipeline per worker and step (docs/gpu-efficiency.md), as the TensorFlow profiler's
// input-pipeline analysis: how long the device waited on input, the host's dataloader time
// behind it, and whether the worker is input-bound.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "analysis/breakdown.h"
#include "common/capture.h"

namespace podscope::analysis {

// TensorFlow's profiler calls a job highly input-bound above 20% of the step waiting on input,
// moderately above 5%.
enum class InputVerdict : uint8_t { kNotInputBound = 0, kModerately = 1, kHighly = 2 };
std::string_view InputVerdictName(InputVerdict verdict);

struct InputOptions {
  double moderate_share = 0.05;
  double high_share = 0.20;
};

struct StepInput {
  int64_t step = 0;
  TimeNs step_ns = 0;        // the step's span and the gap before it (the device's whole step)
  TimeNs input_wait_ns = 0;  // device idle while the host was in a dataloader span (both parts)
  TimeNs dataloader_ns = 0;  // the host's dataloader spans over the same time (their union)
  double input_share() const {
    return step_ns > 0 ? static_cast<double>(input_wait_ns) / static_cast<double>(step_ns) : 0;
  }
};

struct WorkerInput {
  int32_t rank = 0;
  TimeNs step_ns = 0, input_wait_ns = 0, dataloader_ns = 0;
  double input_share = 0;
  InputVerdict verdict = InputVerdict::kNotInputBound;
  std::vector<StepInput> steps;
};

struct InputReport {
  InputOptions options;
  std::vector<WorkerInput> workers;  // by rank
  std::optional<double> median_input_share;
  std::vector<int32_t> input_bound;  // ranks at least moderately input-bound, most first
};

// From the step breakdown (its idle_input, and the same before the span). Pure.
InputReport ComputeInputPipeline(const common::CaptureView& capture,
                                 const std::vector<WorkerBreakdown>& breakdown,
                                 const InputOptions& options = {});
// The same, a worker at a time: each worker's part from its trace and breakdown, then the report
// from the parts (in any order).
WorkerInput ComputeWorkerInput(const common::WorkerTrace& trace, const WorkerBreakdown& breakdown,
                               const InputOptions& options = {});
InputReport FinishInput(std::vector<WorkerInput> workers, const InputOptions& options = {});

}  // namespace podscope::analysis
