// Top kernels per worker and pod-wide: count, total, mean, min, max, share of kernel time; and
// the kernel view's columns (docs/gpu-efficiency.md): blocks per SM, Est. Achieved Occupancy,
// Tensor Core use, and the share of compute-kernel time on Tensor Cores.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/intervals.h"
#include "common/capture.h"

namespace podscope::analysis {

struct KernelStats {
  std::string name;
  std::string kernel_class;  // compute | communication
  uint64_t count = 0;
  TimeNs total_ns = 0, min_ns = 0, max_ns = 0;
  TimeNs mean_ns() const { return count ? total_ns / static_cast<TimeNs>(count) : 0; }
  double share = 0;          // of all kernel time of the worker (or pod)
  bool tensor_core = false;  // from the name (tensor_cores.h)
  // What it computes on (tensor_cores.h): "tensor_cores", "fp32_gemm_cuda_cores" or
  // "cuda_cores", and the naming rule that said so ("" when none did).
  std::string math;
  std::string math_rule;
  bool library = false;  // cuBLAS, cuBLASLt, CUTLASS, cuDNN, NCCL or FlashAttention
  // An FP32 GEMM on CUDA cores: its time on GPUs with TF32 Tensor Cores (else 0).
  TimeNs fp32_gemm_ns = 0;
  // Weighted by duration over the calls whose shape and device are known; nullopt when none is.
  std::optional<double> blocks_per_sm, achieved_occupancy;

  // Sums behind the two means.
  double blocks_weighted_ns = 0, occupancy_weighted_ns = 0;
  TimeNs known_ns = 0;
  void Finish();
};

// Compute-kernel time, the part of it in kernels that use Tensor Cores, and the part in FP32
// GEMMs on CUDA cores of GPUs that have TF32 Tensor Cores (compute capability 8.0 or later).
struct TensorCoreTime {
  TimeNs compute_ns = 0, tensor_core_ns = 0, fp32_gemm_ns = 0;
  TimeNs kernel_ns = 0;  // every kernel's, communication too
  double share() const {
    return compute_ns > 0 ? static_cast<double>(tensor_core_ns) / static_cast<double>(compute_ns)
                          : 0;
  }
};

struct WorkerKernels {
  int32_t rank = 0;
  std::vector<KernelStats> top;  // by total time, descending
  TensorCoreTime tensor_cores;
};

struct KernelReport {
  std::vector<WorkerKernels> workers;
  std::vector<KernelStats> pod;
  TensorCoreTime tensor_cores;
  // Of every kernel, not only the listed ones: the FP32 GEMM with the most time on GPUs with
  // TF32 Tensor Cores ("" when none), what the overview's TF32 advice names.
  std::string hottest_fp32_gemm;
};

// `limit`: kernels kept per list (0 = all). Pure.
KernelReport ComputeTopKernels(const common::CaptureView& capture, size_t limit = 20);

// The same for workers read one at a time, added in the capture view's order.
class KernelFold {
 public:
  explicit KernelFold(size_t limit) : limit_(limit) {}
  void Add(const common::WorkerTrace& trace);
  KernelReport Finish();

 private:
  size_t limit_;
  KernelReport report_;
  std::map<std::string, KernelStats> pod_;
};

}  // namespace podscope::analysis
