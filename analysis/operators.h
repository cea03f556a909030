// The operator view (docs/gpu-efficiency.md), as the PyTorch profiler's: host operators and
// annotations aggregated by name, with their calls, host time (total and self) and the device
// time of the kernels and copies they launched, per worker and pod-wide, with the workers where
// each costs most.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/intervals.h"
#include "common/capture.h"

namespace podscope::analysis {

struct OperatorStats {
  std::string name;
  uint64_t calls = 0;
  TimeNs host_total_ns = 0;
  TimeNs host_self_ns = 0;     // less its child operators and the CUDA calls it made itself
  TimeNs device_total_ns = 0;  // the device work launched inside it, children included
  TimeNs device_self_ns = 0;   // launched by its own CUDA calls
};

struct WorkerOperators {
  int32_t rank = 0;
  std::vector<OperatorStats> top;  // by device self time, then host self time
};

struct OperatorCost {
  int32_t rank = 0;
  TimeNs device_total_ns = 0, host_total_ns = 0;
};

struct PodOperator {
  OperatorStats stats;                  // summed over workers
  std::vector<OperatorCost> costliest;  // up to 3 workers, by device total, then host total
};

struct OperatorReport {
  std::vector<WorkerOperators> workers;  // by rank
  std::vector<PodOperator> pod;
};

// Whether host span `row` is an operator: op, annotation (not a step marker), input, optimizer.
bool IsOperatorSpan(const common::HostSpanTable& spans, size_t row);

// Operators are host spans of category op, annotation (not step markers), input and optimizer;
// on each thread they nest by time. A CUDA call belongs to the innermost operator around it on
// its thread, and its device work (kernels but sync records, copies, memsets) to the call, by
// correlation id. `limit`: operators kept per list (0 = all). Pure; parallel over workers.
OperatorReport ComputeOperators(const common::CaptureView& capture, size_t limit = 20);
// The same in two parts, for workers read one at a time: each worker's operators, then the
// report from them, in the capture view's order.
struct WorkerOperatorStats {
  int32_t rank = 0;
  std::vector<OperatorStats> operators;
};
WorkerOperatorStats ComputeWorkerOperators(const common::WorkerTrace& trace);
OperatorReport FinishOperators(std::vector<WorkerOperatorStats> workers, size_t limit = 20);

}  // namespace podscope::analysis
