// The overview (docs/gpu-efficiency.md): step time and its breakdown, GPU efficiency and
// communication for the pod in one place, ending in ranked, rule-based recommendations, each with
// the numbers that triggered it. What the TensorFlow profiler's overview page ends in, for a pod.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/cast_copies.h"
#include "analysis/gpu_efficiency.h"
#include "analysis/input_pipeline.h"
#include "analysis/parallelism.h"
#include "analysis/summary.h"
#include "analysis/top_kernels.h"

namespace podscope::analysis {

struct OverviewOptions {
  double low_utilization = 0.80;  // median GPU utilization under this: the GPUs wait
  double launch_share = 0.10;     // device idle while the host launches, over step time
  double exposed_communication = 0.10;
  double allreduce_efficiency = 0.50;  // of the link, when a link bandwidth is given
  double hot_kernel_share = 0.05;      // of kernel time
  double low_occupancy = 0.15;         // Est. Achieved Occupancy, kernels not on Tensor Cores
  double fp32_gemm_share = 0.05;       // of kernel time, in FP32 GEMMs on CUDA cores
  double straggler_share = 0.01;       // a straggler's loss (else its caused delay) over step time
  double collective_waiting = 0.10;    // ranks waiting in collectives, over step time
  double cast_copy_share = 0.05;       // of kernel time, in dtype casts (cast_copies.h)
};

struct Recommendation {
  std::string rule;    // low_gpu_utilization, launch_bound, input_bound, exposed_communication,
                       // collective_waiting, allreduce_efficiency, fp32_gemm_on_cuda_cores,
                       // cast_copies, low_occupancy_kernel, straggler
  std::string title;   // what was found, with its number
  std::string advice;  // what to try
  // The share of step time at stake: what fixing the finding could give back at most, as a
  // fraction of the step time, the same way for every rule (docs/analyses.md). Ranks the list.
  double step_share = 0;
  std::vector<std::pair<std::string, double>> evidence;  // the figures behind it
  std::vector<int32_t> ranks;  // the workers concerned; empty: the pod as a whole
  std::string subject;         // the kernel (low_occupancy_kernel, fp32_gemm_on_cuda_cores) or the
                               // operator (cast_copies)
};

// The pod's step time by category: sums over every worker and step, as shares of the step time
// (the spans and the gaps before them).
struct PodBreakdown {
  TimeNs step_ns = 0;
  TimeNs compute_ns = 0, overlap_ns = 0, comm_wait_ns = 0, comm_transfer_ns = 0, memcpy_ns = 0;
  TimeNs idle_input_ns = 0, idle_launch_ns = 0, idle_host_ns = 0,
         idle_other_ns = 0;  // span and gap
  double Share(TimeNs part) const {
    return step_ns > 0 ? static_cast<double>(part) / static_cast<double>(step_ns) : 0;
  }
};

struct OverviewReport {
  size_t workers = 0, steps = 0;
  TimeNs step_p50_ns = 0, step_max_ns = 0;
  PodBreakdown breakdown;
  GpuPod gpu;
  double tensor_core_share = 0;            // of compute-kernel time
  double fp32_gemm_share = 0;              // of kernel time: FP32 GEMMs on CUDA cores of TF32 GPUs
  double exposed_communication_share = 0;  // the median worker's (summary.h)
  std::optional<double> overlap_pct;       // none without communication kernels
  std::optional<double> median_busbw_gbytes_per_s, median_efficiency;
  double link_gbytes_per_s = 0;  // 0: not given
  size_t straggler_count = 0;
  ParallelismReport parallelism;  // what the communicators are for (parallelism.h)
  // Of kernel time, in dtype casts (cast_copies.h); none for a trace without host operators.
  std::optional<double> cast_copy_share;
  std::vector<Recommendation> recommendations;  // most at stake first
};

// Pure. `parallelism` and `casts` may be null: no communicator kinds, no cast rule.
OverviewReport ComputeOverview(const SummaryReport& summary,
                               const std::vector<WorkerBreakdown>& breakdown, const GpuReport& gpu,
                               const KernelReport& kernels, const InputReport& input,
                               const ParallelismReport* parallelism = nullptr,
                               const CastCopies* casts = nullptr,
                               const OverviewOptions& options = {});

}  // namespace podscope::analysis
