#include "analysis/tensor_cores.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "analysis/top_kernels.h"
#include "tests/analysis/hand_trace.h"

namespace podscope::analysis {
namespace {

struct Case {
  const char* name;
  KernelMath math;
  const char* rule;
};

// cuDNN's weight-gradient kernel for an fp16 convolution, from a TensorFlow trace on an Ampere GPU:
// the real name, assembled from its repeated parts (the tile, the traits, the namespace).
std::string CudnnHmmaWgradName() {
  const std::string ns = "xmma_cudnn::implicit_gemm::wgrad_indexed::";
  const std::string traits = "xmma_cudnn::Ampere_hmma_fp32_traits";
  const std::string cta = "xmma_cudnn::Cta_tile<xmma_cudnn::Ampere, 256, 128, 32, 4, 2, 1, 1>";
  const std::string kernel_traits =
      ns + "Kernel_traits<" + traits + ", " + cta + ", " + ns + "Gmem_tile_a_n<" + traits + ", " +
      cta + ", 16, false, " + ns + "Gmem_tile_base_a<" + traits + ", " + cta +
      ", 16, xmma_cudnn::Col, 256, 32> >, " + ns + "Gmem_tile_b_t<" + traits + ", " + cta +
      ", false, 16, false, " + ns + "Gmem_tile_base_b<" + traits + ", " + cta +
      ", false, 16, xmma_cudnn::Row, 128, 32> >, false, 3>";
  return "void xmma_cudnn::gemm::kernel<" + kernel_traits + " >(" + kernel_traits + "::Params)";
}
const std::string kCudnnHmmaWgradName = CudnnHmmaWgradName();
const char* const kCudnnHmmaWgrad = kCudnnHmmaWgradName.c_str();

// Kernel names as CUDA libraries write them, each with what it computes on and the rule that
// must decide it. Every name is real: captured on a GPU, or as a public trace, profile or library
// source gives it.
const Case kCases[] = {
    // FP32 PyTorch on an H200: cuBLAS's FFMA GEMM, which the PyTorch profiler's `xmma_gemm`
    // pattern takes for a Tensor Core kernel, and CUTLASS's SIMT SGEMM.
    {"sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_"
     "alignc4_execute_kernel__5x_cublas",
     KernelMath::kFp32GemmCudaCores, "ffma"},
    {"cutlass_80_simt_sgemm_256x128_8x4_nt_align1", KernelMath::kFp32GemmCudaCores, "simt"},
    {"void cutlass::Kernel<cutlass_80_simt_hgemm_256x128_8x2_nn_align1>(...)",
     KernelMath::kCudaCores, "simt"},  // SIMT, but half precision: TF32 changes nothing
    {"volta_sgemm_128x64_nn", KernelMath::kFp32GemmCudaCores, "sgemm"},
    {"ampere_sgemm_128x64_tn", KernelMath::kFp32GemmCudaCores, "sgemm"},
    // cuDNN's FP32 convolutions are CUDA-core work, but not GEMMs PyTorch's matmul settings
    // reach.
    {"void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>(...)",
     KernelMath::kCudaCores, "sgemm"},
    {"sm80_xmma_fprop_implicit_gemm_indexed_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize32x32x8_"
     "stage3_warpsize1x2x1_g1_ffma_aligna4_alignc4_execute_kernel__5x_cudnn",
     KernelMath::kCudaCores, "ffma"},
    // An xmma name without its instruction: the operand types still say FP32.
    {"sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_execute_"
     "kernel__5x_cublas",
     KernelMath::kFp32GemmCudaCores, "f32f32_f32f32"},
    // Tensor Cores.
    {"sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_"
     "execute_kernel__5x_cublas",
     KernelMath::kTensorCores, "tensor<M>x<N>x<K>"},
    {"sm80_xmma_gemm_tf32f32_tf32f32_f32_nt_n_tilesize128x128x16_stage4_warpsize2x2x1_"
     "tensor16x8x8_execute_kernel__5x_cublas",
     KernelMath::kTensorCores, "tensor<M>x<N>x<K>"},
    {"sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
     "segment_k_off_kernel__5x_cublas",
     KernelMath::kTensorCores, "warpgroupsize"},
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
     "segment_k_off_kernel__5x_cublas",
     KernelMath::kTensorCores, "warpgroupsize"},
    {"void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::collective::"
     "CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized<4, ...>>>>(...)",
     KernelMath::kTensorCores, "gmma"},
    {"cutlass_80_tensorop_s1688gemm_128x128_16x3_nn_align4", KernelMath::kTensorCores, "tensorop"},
    {"cutlass_80_wmma_tensorop_f16_s161616gemm_f16_32x32_128x2_tn_align8", KernelMath::kTensorCores,
     "tensorop"},
    {"void cutlass::Kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::threadblock::"
     "MmaMultistage<..., cutlass::arch::OpClassTensorOp, ...>>>(...)",
     KernelMath::kTensorCores, "TensorOp"},
    {"void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::collective::"
     "CollectiveMma<cutlass::gemm::MainloopSm100TmaUmmaWarpSpecialized<4, 2, ...>>>>(...)",
     KernelMath::kTensorCores, "UMMA"},
    {"void flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<...>>(...)",
     KernelMath::kTensorCores, "FlashAttn"},
    // FP32 operands computed on TF32 Tensor Cores: the MMA shape decides.
    {"sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8_"
     "execute_kernel__5x_cublas",
     KernelMath::kTensorCores, "tensor<M>x<N>x<K>"},
    {"nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NTT", KernelMath::kTensorCores, "nvjet"},
    {"nvjet_tst_128x256_64x6_2x1_2cta_v_bz_TNT", KernelMath::kTensorCores, "nvjet"},
    {"nvjet_sss_tf32_128x256_TNT", KernelMath::kTensorCores, "nvjet"},
    {"void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
     "cutlass::bfloat16_t>, false, false, false, false, true, true, false>(Flash_fwd_params)",
     KernelMath::kTensorCores, "flash_fwd"},
    {"void flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8>>"
     "(Flash_bwd_params)",
     KernelMath::kTensorCores, "flash_bwd"},
    // The PyTorch profiler's precision codes.
    {"volta_h884gemm_64x128_ldg8_nn", KernelMath::kTensorCores, "h884"},
    {"volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn", KernelMath::kTensorCores, "s884"},
    {"turing_fp16_s1688gemm_fp16_256x128_ldg8_f2f_tn", KernelMath::kTensorCores, "s1688"},
    {"turing_int32_i8816gemm_int8_128x128_ldg16_relu_nt", KernelMath::kTensorCores, "i8816"},
    {"ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn", KernelMath::kTensorCores,
     "16816"},
    {"void cudnn::detail::dgrad_1x1_stride_2x2_kernel<...>", KernelMath::kTensorCores,
     "dgrad_1x1_stride_2x2"},
    {"turing_h1688gemm_128x128_ldg8_nt", KernelMath::kTensorCores, "h1688"},
    {"volta_fp16_s884cudnn_fp16_128x128_ldg8_splitK_relu_f2f_exp_small_nhwc_tn_v1",
     KernelMath::kTensorCores, "s884"},
    {"volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_f2f_exp_small_nhwc2nchw_tn_v1",
     KernelMath::kTensorCores, "s884"},
    // cuDNN's Volta convolution under autocast, as PyTorch's AMP documentation lists it.
    {"Volta_hmma_implicit_gemm_fprop_fp32_nhwc_128x128x64x1_1x3x3x0x1", KernelMath::kTensorCores,
     "hmma"},
    {"ampere_h1688gemm_128x128_ldg8_stages_32x1_tn", KernelMath::kTensorCores, "h1688"},
    {"ampere_bf16_s1688gemm_bf16_128x128_ldg8_f2f_nt_v1", KernelMath::kTensorCores, "s1688"},
    {"ampere_h16816gemm_256x128_ldg8_stages_64x3_nt_v1", KernelMath::kTensorCores, "16816"},
    // Shapes the profiler's list lacks: TF32, INT8, sparse.
    {"ampere_fp32_s1684tf32gemm_fp32_128x128_ldg4_nt_v1", KernelMath::kTensorCores,
     "<mma shape>gemm"},
    {"ampere_int32_i16832gemm_int8_128x128_ldg16_stages_64x3_nt_v1", KernelMath::kTensorCores,
     "<mma shape>gemm"},
    {"ampere_fp16_s16832gemm_sp_fp16_128x128_ldg8_relu_f2f_stages_64x3_nt_v1",
     KernelMath::kTensorCores, "<mma shape>gemm"},
    {"ampere_int32_i16864gemm_sp_int8_256x128_ldg16_stages_128x3_nt_v1", KernelMath::kTensorCores,
     "<mma shape>gemm"},
    // cuDNN's Tensor Core kernels: xmma with its MMA traits or shape, and CUTLASS inside cuDNN.
    {kCudnnHmmaWgrad, KernelMath::kTensorCores, "hmma"},
    {"sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize256x64x32_stage3_"
     "warpsize4x1x1_g1_tensor16x8x16_kernel",
     KernelMath::kTensorCores, "tensor<M>x<N>x<K>"},
    {"void cutlass_cudnn::Kernel<cutlass_tensorop_f16_s16816fprop_optimized_f16_256x128_32x3>("
     "cutlass_tensorop_f16_s16816fprop_optimized_f16_256x128_32x3::Params)",
     KernelMath::kTensorCores, "tensorop"},
    // CUTLASS's complex TF32 GEMM: tensorop decides before the precision code.
    {"cutlass_80_tensorop_c1688gemm_64x64_16x4_nt_align1", KernelMath::kTensorCores, "tensorop"},
    // Hopper's xmma kernels with their GMMA instruction: warpgroupsize decides, for FP16, TF32
    // (FP32 operands, yet Tensor Cores) and INT8 alike.
    {"sm90_xmma_gemm_f16f16_f16f32_f32_nt_n_tilesize128x128x64_stage4_gmmastage2_"
     "warpgroupsize1x1x1_"
     "hgmma64x128x16",
     KernelMath::kTensorCores, "warpgroupsize"},
    {"sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize256x128x32_cgasize1x2x1_stage4_gmmastage2_"
     "warpgroupsize2x1x1_hgmma64x128x8",
     KernelMath::kTensorCores, "warpgroupsize"},
    {"sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_"
     "k_off_kernel__5x_cublas",
     KernelMath::kTensorCores, "warpgroupsize"},
    {"sm90_xmma_gemm_i8i32_i8i32_f32_tn_n_tilesize128x128x128_stage4_gmmastage2_warpgroupsize1x1x1_"
     "igmma64x128x32",
     KernelMath::kTensorCores, "warpgroupsize"},
    // As nsys printed it, cut at its own "...".
    {"void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::"
     "GroupProblemShape<cute::tuple<long, long, long>>, cutlass::gemm::collective::CollectiveMma<"
     "cutlass::gemm::MainloopSm90ArrayTmaGmmaWarpSpecialized<(int)12, ...",
     KernelMath::kTensorCores, "gmma"},
    {"nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT", KernelMath::kTensorCores, "nvjet"},
    // A depthwise convolution (TensorRT, FP32, Maxwell): the profiler's conv2d_c1_k1 would say
    // Tensor Cores.
    {"sm50_xmma_fprop_conv2d_c1_k1_f32f32_f32_f32_nchwkcrs_nchw_tilesize10x40x8_threadsize4x4_r3s3_"
     "u1v1_xcorr_zerobeta_execute_kernel_trt",
     KernelMath::kCudaCores, ""},
    // No marker of either: CUDA cores, decided by no rule.
    {"void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(...)>",
     KernelMath::kCudaCores, ""},
    {"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     KernelMath::kCudaCores, ""},
    {"void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>",
     KernelMath::kCudaCores, ""},
    {"VOLTA_H884GEMM", KernelMath::kCudaCores, ""},  // case matters, as in the profiler
    {"void tensor_parallel_reduce_kernel<8>(float*, int)", KernelMath::kCudaCores, ""},
    {"void my_tensor2d_copy_kernel(float*)", KernelMath::kCudaCores, ""},  // no MxNxK
    // Numbers that are not a precision code: XLA's and Inductor's numbered kernels.
    {"fusion_16816", KernelMath::kCudaCores, ""},
    {"loop_fusion_168160", KernelMath::kCudaCores, ""},
    {"triton_poi_fused_add_16816_gemm_0", KernelMath::kCudaCores, ""},
};

TEST(TensorCoresTest, EveryNameIsDecidedByItsRule) {
  for (const Case& c : kCases) {
    const KernelMathResult r = ClassifyKernelMath(c.name);
    EXPECT_EQ(r.math, c.math) << c.name;
    EXPECT_EQ(r.rule, c.rule) << c.name;
    EXPECT_EQ(UsesTensorCores(c.name), c.math == KernelMath::kTensorCores) << c.name;
  }
}

TEST(TensorCoresTest, EveryRuleHasASourceAndARealName) {
  std::set<std::string> tested;
  for (const Case& c : kCases) tested.insert(c.rule);
  std::set<std::string> ids;
  for (const KernelMathRule& rule : KernelMathRules()) {
    EXPECT_FALSE(rule.source.empty()) << rule.id;
    EXPECT_TRUE(ids.insert(std::string(rule.id)).second) << "twice: " << rule.id;
  }
  // Every rule decides at least one real name above.
  for (const std::string& id : ids) EXPECT_TRUE(tested.contains(id)) << "no real name tests " << id;
}

TEST(TensorCoresTest, LibraryKernels) {
  for (const char* name :
       {"cutlass_80_simt_sgemm_256x128_8x4_nt_align1",
        "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_"
        "alignc4_execute_kernel__5x_cublas",
        "nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NTT", "volta_sgemm_128x64_nn",
        "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(...)",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>",
        "void splitKreduce_kernel<32, 16, int, float, float, float, float, true, false, false>",
        "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>(Flash_fwd_params)"}) {
    EXPECT_TRUE(IsLibraryKernel(name)) << name;
  }
  for (const char* name :
       {"void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(...)>",
        "my_fused_attention_kernel", "triton_poi_fused_add_mul_0"}) {
    EXPECT_FALSE(IsLibraryKernel(name)) << name;
  }
}

TEST(TensorCoresTest, Tf32TensorCoresFromTheDeviceElseFromTheKernelsArchitecture) {
  EXPECT_TRUE(HasTf32TensorCores(9, "volta_sgemm_128x64_nn"));  // the device decides
  EXPECT_FALSE(HasTf32TensorCores(7, "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_ffma"));
  EXPECT_TRUE(HasTf32TensorCores(0, "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_ffma"));
  EXPECT_TRUE(HasTf32TensorCores(0, "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n"));
  EXPECT_TRUE(HasTf32TensorCores(0, "cutlass_80_simt_sgemm_256x128_8x4_nt_align1"));
  EXPECT_FALSE(HasTf32TensorCores(0, "cutlass_75_tensorop_s1688gemm_64x64_32x2_nn_align1"));
  EXPECT_TRUE(HasTf32TensorCores(0, "ampere_sgemm_128x64_tn"));
  EXPECT_TRUE(HasTf32TensorCores(0, "fmha_cutlassF_f32_aligned_64x64_rf_sm80"));
  EXPECT_FALSE(HasTf32TensorCores(0, "volta_sgemm_128x64_nn"));
  EXPECT_FALSE(HasTf32TensorCores(0, "void gemmSN_NN_kernel<float, 256, 4, 2, 8, 3, 4>"));
  EXPECT_FALSE(HasTf32TensorCores(0, "rmsnorm_kernel"));
}

// The kernels report: FP32 GEMM time counts only on GPUs with TF32 Tensor Cores, and each row
// says what it computes on.
TEST(TensorCoresTest, KernelReportCountsFp32GemmTimeOnTf32Gpus) {
  const std::string ffma =
      "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_"
      "alignc4_execute_kernel__5x_cublas";
  const std::string simt_volta = "volta_sgemm_128x64_nn";
  common::Capture capture;
  for (int32_t rank : {0, 1}) {
    common::WorkerTrace t = podscope::testing::HandTrace(rank, 2)
                                .Kernel(0, 600, ffma)
                                .Kernel(600, 800, simt_volta)
                                .Kernel(800, 1000, "volta_h884gemm_64x128_ldg8_nn")
                                .Build();
    t.info.devices.push_back({.id = 0, .compute_major = rank == 0 ? 9 : 7});
    capture.workers.push_back(std::move(t));
  }
  const KernelReport r = ComputeTopKernels(common::CaptureView(capture));
  ASSERT_EQ(r.workers.size(), 2u);
  EXPECT_EQ(r.workers[0].tensor_cores.compute_ns, 1000);
  EXPECT_EQ(r.workers[0].tensor_cores.tensor_core_ns, 200);
  EXPECT_EQ(r.workers[0].tensor_cores.fp32_gemm_ns, 800);  // an H100-class GPU
  EXPECT_EQ(r.workers[1].tensor_cores.fp32_gemm_ns, 0);    // a V100: no TF32 to move to
  EXPECT_EQ(r.tensor_cores.fp32_gemm_ns, 800);
  EXPECT_EQ(r.tensor_cores.kernel_ns, 2000);
  EXPECT_EQ(r.hottest_fp32_gemm, ffma);
  // Named from every kernel, not only the listed ones.
  common::Capture busy;
  busy.workers.push_back(podscope::testing::HandTrace(0, 1)
                             .Kernel(0, 5000, "void elementwise_kernel<float>()")
                             .Kernel(5000, 5600, ffma)
                             .Build());
  busy.workers[0].info.devices.push_back({.id = 0, .compute_major = 9});
  const KernelReport top1 = ComputeTopKernels(common::CaptureView(busy), /*limit=*/1);
  ASSERT_EQ(top1.pod.size(), 1u);
  EXPECT_NE(top1.pod[0].name, ffma);
  EXPECT_EQ(top1.hottest_fp32_gemm, ffma);
  ASSERT_EQ(r.pod.size(), 3u);
  EXPECT_EQ(r.pod[0].name, ffma);
  EXPECT_EQ(r.pod[0].fp32_gemm_ns, 600) << "rank 0's time only: rank 1 is a V100";
  EXPECT_EQ(r.pod[0].math, "fp32_gemm_cuda_cores");
  EXPECT_EQ(r.pod[0].math_rule, "ffma");
  EXPECT_FALSE(r.pod[0].tensor_core);
  EXPECT_TRUE(r.pod[0].library);
  EXPECT_EQ(r.pod[1].name, "volta_h884gemm_64x128_ldg8_nn");  // 400 ns, as the SGEMM: by name
  EXPECT_EQ(r.pod[1].math, "tensor_cores");
  EXPECT_TRUE(r.pod[1].tensor_core);
  EXPECT_EQ(r.pod[2].math, "fp32_gemm_cuda_cores");
  EXPECT_EQ(r.pod[2].math_rule, "sgemm");
}

}  // namespace
}  // namespace podscope::analysis
