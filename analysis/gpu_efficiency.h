// GPU efficiency per worker and step, as the PyTorch profiler's overview defines it
// (docs/gpu-efficiency.md): GPU utilization, Est. SM Efficiency and Est. Achieved Occupancy,
// for every worker of a pod side by side, with pod-wide medians and the least busy workers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/steps.h"
#include "common/capture.h"

namespace podscope::analysis {

struct GpuFigures {
  TimeNs span_ns = 0;          // the step spans' length
  TimeNs busy_ns = 0;          // time with at least one kernel running
  double gpu_utilization = 0;  // busy / span
  // Over the span, min(sum of the running kernels' blocks per SM, 1); nullopt when no kernel's
  // shape and device are known.
  std::optional<double> sm_efficiency;
  // Est. Achieved Occupancy weighted by kernel time; kernels of unknown occupancy left out.
  std::optional<double> achieved_occupancy;

  // Sums that combine steps (and workers) exactly.
  double sm_weighted_ns = 0, occupancy_weighted_ns = 0;
  TimeNs occupancy_ns = 0;
  bool sm_known = false;
  void Add(const GpuFigures& other);
  void Finish();  // the fractions from the sums
};

struct StepGpu {
  int64_t step = 0;
  GpuFigures figures;
};

struct WorkerGpu {
  int32_t rank = 0;
  std::string device;  // the name of the worker's first device, when the trace says
  uint64_t kernels = 0;
  uint64_t kernels_without_occupancy = 0;  // no launch shape, or no device limits
  GpuFigures total;                        // over every step
  std::vector<StepGpu> steps;
};

struct GpuPod {
  std::optional<double> median_gpu_utilization, median_sm_efficiency, median_achieved_occupancy;
  std::vector<int32_t> least_utilized;  // ranks, least GPU utilization first
};

struct GpuReport {
  std::vector<WorkerGpu> workers;  // by rank
  GpuPod pod;
};

// Steps from FindAllSteps; the kernels of a step are those running inside its device span
// (its host span when it launched nothing), clipped to it. CUDA sync records are not kernels.
// `first_step`/`last_step` restrict the steps (inclusive; -1 = open). Pure.
GpuReport ComputeGpuEfficiency(const common::CaptureView& capture,
                               const std::vector<WorkerSteps>& steps, int64_t first_step = -1,
                               int64_t last_step = -1, size_t least_utilized = 5);
// The same in two parts, for workers read one at a time: each worker's, then the pod's from
// them (in any order).
WorkerGpu ComputeWorkerGpu(const common::WorkerTrace& trace, const WorkerSteps& steps,
                           int64_t first_step = -1, int64_t last_step = -1);
GpuReport FinishGpu(std::vector<WorkerGpu> workers, size_t least_utilized = 5);

}  // namespace podscope::analysis
