// Pod view: per step one row per worker with its breakdown, step time and
// deviation from the median worker; and a worker x step matrix of step times.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/breakdown.h"

namespace podscope::analysis {

struct PodRow {
  int32_t rank = 0;
  StepBreakdown breakdown;
  TimeNs step_ns = 0;
  TimeNs deviation_ns = 0;  // step_ns - median over workers
  double deviation_pct = 0;
};

struct PodStep {
  int64_t step = 0;
  TimeNs median_step_ns = 0;
  std::vector<PodRow> rows;  // by rank
};

struct PodView {
  std::vector<int64_t> step_numbers;              // columns of the matrix
  std::vector<int32_t> ranks;                     // rows of the matrix
  std::vector<std::vector<TimeNs>> step_time_ns;  // [rank row][step column], -1 if missing
  std::vector<PodStep> steps;
};

// `first_step`/`last_step` restrict the range (inclusive; -1 = open). Pure.
PodView ComputePodView(const std::vector<WorkerBreakdown>& breakdown, int64_t first_step = -1,
                       int64_t last_step = -1);

}  // namespace podscope::analysis
