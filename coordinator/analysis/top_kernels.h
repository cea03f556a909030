// Top kernels per worker and pod-wide: count, total, mean, min, max, share of kernel time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/capture.h"
#include "coordinator/analysis/intervals.h"

namespace podscope::coordinator::analysis {

struct KernelStats {
  std::string name;
  std::string kernel_class;  // compute | communication
  uint64_t count = 0;
  TimeNs total_ns = 0, min_ns = 0, max_ns = 0;
  TimeNs mean_ns() const { return count ? total_ns / static_cast<TimeNs>(count) : 0; }
  double share = 0;  // of all kernel time of the worker (or pod)
};

struct WorkerKernels {
  int32_t rank = 0;
  std::vector<KernelStats> top;  // by total time, descending
};

struct KernelReport {
  std::vector<WorkerKernels> workers;
  std::vector<KernelStats> pod;
};

// `limit`: kernels kept per list (0 = all). Pure.
KernelReport ComputeTopKernels(const common::CaptureView& capture, size_t limit = 20);

}  // namespace podscope::coordinator::analysis
