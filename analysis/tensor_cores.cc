#include "analysis/tensor_cores.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <span>

namespace podscope::analysis {
namespace {

bool Has(std::string_view name, std::string_view part) {
  return name.find(part) != std::string_view::npos;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// "tensor<M>x<N>x<K>": the MMA shape xmma kernels end in (tensor16x8x16, tensor16x8x8).
bool HasMmaShape(std::string_view name) {
  for (size_t at = name.find("tensor"); at != std::string_view::npos;
       at = name.find("tensor", at + 1)) {
    size_t p = at + 6;
    int parts = 0;
    while (parts < 3) {
      const size_t digits_start = p;
      while (p < name.size() && IsDigit(name[p])) ++p;
      if (p == digits_start) break;
      ++parts;
      if (parts < 3 && p < name.size() && name[p] == 'x')
        ++p;
      else if (parts < 3)
        break;
    }
    if (parts == 3) return true;
  }
  return false;
}

// Both operands FP32 (xmma's type list starts with A's and B's types): not TF32, which is
// written tf32.
bool HasFp32Operands(std::string_view name) {
  return Has(name, "f32f32_f32f32") && !Has(name, "tf32");
}

bool IsAlnum(char c) { return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// A precision code of cuBLAS's and cuDNN's kernels before xmma: a word that starts with a type
// letter (h, s, i, d, c, z), then an MMA shape's digits, then what the kernel is (gemm,
// tf32gemm, cudnn, fprop, dgrad, wgrad): volta_h884gemm_..., turing_fp16_s1688cudnn_...,
// ampere_int32_i16832gemm_... Numbers in other names (fusion_16816, a loop's index) are not.
bool HasPrecisionCode(std::string_view name, std::string_view letters,
                      std::span<const std::string_view> shapes) {
  for (size_t i = 1; i < name.size(); ++i) {
    if (!IsDigit(name[i]) || IsDigit(name[i - 1])) continue;
    size_t j = i;
    while (j < name.size() && IsDigit(name[j])) ++j;
    const bool word_start = i < 2 || !IsAlnum(name[i - 2]);
    const bool type_letter = letters.find(name[i - 1]) != std::string_view::npos;
    const bool known =
        std::find(shapes.begin(), shapes.end(), name.substr(i, j - i)) != shapes.end();
    const std::string_view rest = name.substr(j);
    const bool what = rest.starts_with("gemm") || rest.starts_with("tf32gemm") ||
                      rest.starts_with("cudnn") || rest.starts_with("fprop") ||
                      rest.starts_with("dgrad") || rest.starts_with("wgrad");
    if (word_start && type_letter && known && what) return true;
    i = j;
  }
  return false;
}

constexpr std::string_view kAllShapes[] = {"884",   "1684",  "1688",  "8816",
                                           "16816", "16832", "16864", "168256"};

template <const char* kLetters, const std::string_view& kShape>
bool Code(std::string_view name) {
  return HasPrecisionCode(name, kLetters, std::span<const std::string_view>(&kShape, 1));
}

constexpr char kH[] = "h", kS[] = "s", kI[] = "i", kAny[] = "hsidcz";
constexpr std::string_view k884 = "884", k1688 = "1688", k8816 = "8816", k16816 = "16816";

bool HasMmaShapeCode(std::string_view name) { return HasPrecisionCode(name, kAny, kAllShapes); }

bool IsGemm(std::string_view name) {
  if (!Has(name, "gemm")) return false;
  // cuDNN's convolutions are implicit GEMMs: PyTorch's matmul settings do not reach them.
  for (std::string_view conv : {"implicit_gemm", "conv", "fprop", "dgrad", "wgrad"}) {
    if (Has(name, conv)) return false;
  }
  return true;
}

bool IsFp32Math(std::string_view name) {
  return Has(name, "ffma") || Has(name, "sgemm") || HasFp32Operands(name);
}

using Matcher = bool (*)(std::string_view);

struct Rule {
  KernelMathRule info;
  Matcher matches;  // nullptr: the name holds the rule's id
};

constexpr std::string_view kXmmaSource =
    "cuBLAS and cuDNN xmma kernels name their instruction: "
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_"
    "alignc4_execute_kernel__5x_cublas (FP32 PyTorch on an H200) against "
    "sm80_xmma_gemm_f16f16_f16f32_f32_..._tensor16x8x16_execute_kernel__5x_cublas";
constexpr std::string_view kCutlassSource =
    "CUTLASS names a kernel cutlass_<arch>_<opcode class>_<...>, the opcode class being simt "
    "(CUDA cores), tensorop or wmma_tensorop (CUTLASS profiler documentation)";
constexpr std::string_view kPyTorchSource =
    "the PyTorch profiler's list (its TensorBoard plugin's tensor_core.py, from NVIDIA PyProf)";

// CUDA-core markers first: they say the precision, which the family patterns below do not.
const std::array kRules = {
    Rule{{"ffma", KernelMath::kFp32GemmCudaCores, kXmmaSource}, nullptr},
    Rule{{"simt", KernelMath::kFp32GemmCudaCores, kCutlassSource}, nullptr},
    Rule{{"sgemm", KernelMath::kFp32GemmCudaCores,
          "cuBLAS's and cuDNN's SIMT kernels before xmma: volta_sgemm_128x64_nn, "
          "ampere_sgemm_128x64_tn, implicit_convolve_sgemm; their Tensor Core kernels put the "
          "MMA shape in the precision code instead (s1688gemm, h884gemm)"},
         nullptr},
    Rule{{"tensor<M>x<N>x<K>", KernelMath::kTensorCores, kXmmaSource}, HasMmaShape},
    Rule{{"f32f32_f32f32", KernelMath::kFp32GemmCudaCores,
          "xmma's operand types: A and B in FP32 (TF32 is written tf32f32), in a name without its "
          "instruction"},
         HasFp32Operands},
    Rule{{"warpgroupsize", KernelMath::kTensorCores,
          "Hopper's cuBLAS kernels, built on warpgroup MMA (wgmma): "
          "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
          "segment_k_off_kernel__5x_cublas"},
         nullptr},
    Rule{{"gmma", KernelMath::kTensorCores,
          "Hopper's warpgroup MMA (GMMA, wgmma) in CUTLASS 3's mainloops "
          "(MainloopSm90TmaGmmaWarpSpecialized) and in kernel names"},
         [](std::string_view n) { return Has(n, "gmma") || Has(n, "Gmma") || Has(n, "GMMA"); }},
    Rule{{"tensorop", KernelMath::kTensorCores, kCutlassSource}, nullptr},
    Rule{{"TensorOp", KernelMath::kTensorCores,
          "CUTLASS's template names: cutlass::arch::OpClassTensorOp, MmaTensorOp"},
         nullptr},
    Rule{{"UMMA", KernelMath::kTensorCores,
          "Blackwell's MMA (tcgen05, UMMA) in CUTLASS 3's mainloops: MainloopSm100TmaUmma..."},
         [](std::string_view n) { return Has(n, "Umma") || Has(n, "UMMA"); }},
    Rule{{"nvjet", KernelMath::kTensorCores,
          "cuBLASLt's GEMMs for Hopper and Blackwell (nvjet_hsh_..., nvjet_tst_..., "
          "nvjet_sss_tf32_...), all built on MMA"},
         nullptr},
    Rule{{"hmma", KernelMath::kTensorCores,
          "cuDNN's xmma kernels name their MMA traits: void xmma_cudnn::gemm::kernel<"
          "xmma_cudnn::implicit_gemm::wgrad_indexed::Kernel_traits<xmma_cudnn::Ampere_hmma_fp32_"
          "traits, ...> > (a convolution's weight gradient, fp16 on an Ampere GPU)"},
         nullptr},
    Rule{{"flash_fwd", KernelMath::kTensorCores,
          "FlashAttention, whose every kernel is built on MMA instructions"},
         nullptr},
    Rule{{"flash_bwd", KernelMath::kTensorCores,
          "FlashAttention, whose every kernel is built on MMA instructions"},
         nullptr},
    Rule{{"FlashAttn", KernelMath::kTensorCores,
          "FlashAttention 3's kernels (flash::FlashAttnFwdSm90, ...)"},
         nullptr},
    // The PyTorch profiler's precision codes and cuDNN families, Volta to Ampere.
    Rule{{"h884", KernelMath::kTensorCores, kPyTorchSource}, Code<kH, k884>},
    Rule{{"s884", KernelMath::kTensorCores, kPyTorchSource}, Code<kS, k884>},
    Rule{{"h1688", KernelMath::kTensorCores, kPyTorchSource}, Code<kH, k1688>},
    Rule{{"s1688", KernelMath::kTensorCores, kPyTorchSource}, Code<kS, k1688>},
    Rule{{"i8816", KernelMath::kTensorCores, kPyTorchSource}, Code<kI, k8816>},
    Rule{{"16816", KernelMath::kTensorCores, kPyTorchSource}, Code<kAny, k16816>},
    Rule{{"dgrad_1x1_stride_2x2", KernelMath::kTensorCores, kPyTorchSource}, nullptr},
    // The same precision codes with the MMA shapes the list lacks: Ampere's TF32 (1684), INT8
    // (16832) and sparse (16832, 16864) kernels.
    Rule{{"<mma shape>gemm", KernelMath::kTensorCores,
          "cuBLAS's kernels before xmma put the MMA shape before gemm: "
          "ampere_fp32_s1684tf32gemm_fp32_128x128_ldg4_nt_v1, "
          "ampere_int32_i16832gemm_int8_128x128_ldg16_stages_64x3_nt_v1, "
          "ampere_fp16_s16832gemm_sp_fp16_128x128_ldg8_relu_f2f_stages_64x3_nt_v1"},
         HasMmaShapeCode},
};

std::array<KernelMathRule, kRules.size()> RuleInfos() {
  std::array<KernelMathRule, kRules.size()> out;
  for (size_t i = 0; i < kRules.size(); ++i) out[i] = kRules[i].info;
  return out;
}

const std::array<KernelMathRule, kRules.size()> kRuleInfos = RuleInfos();

// "sm80", "sm_90", "sm100" as a word-ish token: the architecture a kernel was built for.
int ArchFromSmTag(std::string_view name) {
  for (size_t at = name.find("sm"); at != std::string_view::npos; at = name.find("sm", at + 1)) {
    if (at > 0 && std::isalnum(static_cast<unsigned char>(name[at - 1]))) continue;
    size_t p = at + 2;
    if (p < name.size() && name[p] == '_') ++p;
    int value = 0, digits = 0;
    while (p < name.size() && IsDigit(name[p]) && digits < 3) {
      value = value * 10 + (name[p++] - '0');
      ++digits;
    }
    if (digits >= 2 && (p == name.size() || !IsDigit(name[p]))) return value;
  }
  return 0;
}

}  // namespace

KernelMathResult ClassifyKernelMath(std::string_view name) {
  for (const Rule& rule : kRules) {
    if (rule.matches != nullptr ? !rule.matches(name) : !Has(name, rule.info.id)) continue;
    KernelMath math = rule.info.math;
    if (math == KernelMath::kFp32GemmCudaCores && !(IsGemm(name) && IsFp32Math(name))) {
      math = KernelMath::kCudaCores;
    }
    return {math, rule.info.id};
  }
  return {};
}

std::string_view KernelMathName(KernelMath math) {
  switch (math) {
    case KernelMath::kTensorCores:
      return "tensor_cores";
    case KernelMath::kFp32GemmCudaCores:
      return "fp32_gemm_cuda_cores";
    case KernelMath::kCudaCores:
      break;
  }
  return "cuda_cores";
}

std::span<const KernelMathRule> KernelMathRules() { return kRuleInfos; }

bool IsLibraryKernel(std::string_view name) {
  for (std::string_view part :
       {"cublas", "cutlass", "nvjet", "xmma", "cudnn", "nccl", "gemv2T_kernel", "gemv2N_kernel",
        "gemvx", "gemmk1_kernel", "gemmSN_", "splitKreduce_kernel", "implicit_convolve_sgemm",
        "flash_fwd", "flash_bwd"}) {
    if (Has(name, part)) return true;
  }
  if (name.starts_with("void ")) name.remove_prefix(5);
  for (std::string_view arch : {"maxwell_", "pascal_", "volta_", "turing_", "ampere_"}) {
    if (name.starts_with(arch)) return true;  // cuBLAS's and cuDNN's kernels before xmma
  }
  return false;
}

bool HasTf32TensorCores(int32_t compute_major, std::string_view name) {
  if (compute_major > 0) return compute_major >= 8;
  if (name.starts_with("ampere_") || Has(name, "nvjet")) return true;
  if (const size_t at = name.find("cutlass_"); at != std::string_view::npos) {
    const std::string_view rest = name.substr(at + 8);  // cutlass_80_simt_sgemm_...
    if (rest.size() >= 3 && IsDigit(rest[0]) && IsDigit(rest[1]) && rest[2] == '_')
      return (rest[0] - '0') * 10 + (rest[1] - '0') >= 80;
  }
  return ArchFromSmTag(name) >= 80;
}

}  // namespace podscope::analysis
