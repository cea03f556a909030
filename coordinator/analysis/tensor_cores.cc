#include "coordinator/analysis/tensor_cores.h"

namespace podscope::coordinator::analysis {
namespace {

// The PyTorch profiler's list (its TensorBoard plugin's tensor_core.py, from NVIDIA PyProf):
// Volta to Ampere cuBLAS / cuDNN kernel names. Matched as substrings, case-sensitively.
constexpr std::string_view kPyTorchPatterns[] = {"h884",
                                                 "s884",
                                                 "h1688",
                                                 "s1688",
                                                 "hmma",
                                                 "i8816",
                                                 "16816",
                                                 "dgrad_1x1_stride_2x2",
                                                 "first_layer_wgrad_kernel",
                                                 "conv1x1",
                                                 "conv2d_c1_k1",
                                                 "direct_group",
                                                 "xmma_implicit_gemm",
                                                 "xmma_sparse_conv",
                                                 "xmma_warp_specialized_implicit_gemm",
                                                 "xmma_gemm",
                                                 "xmma_sparse_gemm",
                                                 "c1688"};

// Kernels that list misses: CUTLASS's tensor-op kernels, Hopper's warpgroup MMA (wgmma, and
// cuBLAS's gmma names), cuBLASLt's Hopper/Blackwell "nvjet" kernels, integer MMA, and
// FlashAttention, whose every kernel is built on MMA instructions.
constexpr std::string_view kAddedPatterns[] = {"tensorop", "gmma",      "nvjet",
                                               "imma",     "flash_fwd", "flash_bwd"};

}  // namespace

bool UsesTensorCores(std::string_view kernel_name) {
  for (std::string_view p : kPyTorchPatterns) {
    if (kernel_name.find(p) != std::string_view::npos) return true;
  }
  for (std::string_view p : kAddedPatterns) {
    if (kernel_name.find(p) != std::string_view::npos) return true;
  }
  return false;
}

std::span<const std::string_view> PyTorchTensorCorePatterns() { return kPyTorchPatterns; }
std::span<const std::string_view> AddedTensorCorePatterns() { return kAddedPatterns; }

}  // namespace podscope::coordinator::analysis
