// What a kernel computes on, decided from its name: Tensor Cores (MMA instructions) or CUDA
// cores, and among the latter the FP32 matrix multiplies that TF32 or bf16 would move to Tensor
// Cores. Kernel names carry their math: cuBLAS and cuDNN name the instruction (`ffma`,
// `tensor16x8x16`), CUTLASS its opcode class (`simt`, `tensorop`), older libraries a precision
// code (`sgemm`, `h884gemm`). Precision markers are read first, and a family name alone
// (`xmma_gemm`, which the PyTorch profiler counts as Tensor Cores) decides nothing, so an FP32
// kernel is never taken for a Tensor Core one. Every rule is tested on real kernel names. Each
// rule and where it comes from: KernelMathRules(), and docs/gpu-efficiency.md.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace podscope::analysis {

enum class KernelMath : uint8_t {
  kCudaCores,          // no marker of MMA: elementwise, reductions, copies, SIMT kernels
  kFp32GemmCudaCores,  // an FP32 GEMM on CUDA cores (FFMA)
  kTensorCores,        // MMA instructions: HMMA, IMMA, warpgroup MMA
};

struct KernelMathRule {
  std::string_view id;      // the marker, as docs and tests name the rule
  KernelMath math;          // what a name that matches runs on (GEMMs of kFp32GemmCudaCores
                            // rules; other kernels that match them: kCudaCores)
  std::string_view source;  // where the naming comes from
};

struct KernelMathResult {
  KernelMath math = KernelMath::kCudaCores;
  std::string_view rule;  // the rule that decided; empty when none matched
};

KernelMathResult ClassifyKernelMath(std::string_view kernel_name);
// "tensor_cores", "fp32_gemm_cuda_cores", "cuda_cores".
std::string_view KernelMathName(KernelMath math);
inline bool UsesTensorCores(std::string_view kernel_name) {
  return ClassifyKernelMath(kernel_name).math == KernelMath::kTensorCores;
}

// Kernels of NVIDIA's libraries (cuBLAS, cuBLASLt, CUTLASS, cuDNN, NCCL) and FlashAttention:
// tiles, registers and occupancy are chosen by the library for the shape, so advice to change
// them would be advice the user cannot take.
bool IsLibraryKernel(std::string_view kernel_name);

// In the order they are tried; the first that matches decides.
std::span<const KernelMathRule> KernelMathRules();

// Whether the GPU a kernel ran on has TF32 Tensor Cores (compute capability 8.0 or later), from
// the device's compute capability when the trace gives it (`compute_major` > 0), else from the
// architecture the kernel was built for (`sm80_`, `ampere_`, `cutlass_80_`, ...): a kernel
// built for 8.0 runs only on 8.0 or later. nullopt-like false when neither says.
bool HasTf32TensorCores(int32_t compute_major, std::string_view kernel_name);

}  // namespace podscope::analysis
