#include "coordinator/analysis/tensor_cores.h"

#include <gtest/gtest.h>

namespace podscope::coordinator::analysis {
namespace {

TEST(TensorCoresTest, NamesAreClassifiedAsThePyTorchProfilerDoesAndNewerKernelsToo) {
  // The PyTorch profiler's list: substrings, case-sensitive.
  EXPECT_TRUE(UsesTensorCores("volta_h884gemm_64x128_ldg8_nn"));
  EXPECT_TRUE(UsesTensorCores("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn"));
  EXPECT_TRUE(UsesTensorCores("sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize96x128x32_stage4"));
  EXPECT_TRUE(UsesTensorCores("void cudnn::detail::dgrad_1x1_stride_2x2_kernel<...>"));
  EXPECT_FALSE(UsesTensorCores("volta_sgemm_128x64_nn"));  // FP32 SIMT GEMM
  EXPECT_FALSE(UsesTensorCores("void at::native::vectorized_elementwise_kernel<4, ...>"));
  EXPECT_FALSE(UsesTensorCores("ncclKernel_AllReduce_RING_LL_Sum_float"));
  EXPECT_FALSE(UsesTensorCores("VOLTA_H884GEMM"));  // case matters, as in the profiler
  // Added: CUTLASS tensor ops, Hopper warpgroup MMA, cuBLASLt nvjet, FlashAttention.
  EXPECT_TRUE(
      UsesTensorCores("cutlass_80_tensorop_f16_s16816gemm_relu_f16_256x128_32x3_nn_align8"));
  EXPECT_TRUE(
      UsesTensorCores("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_"
                      "warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"));
  EXPECT_TRUE(UsesTensorCores("nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NTT"));
  EXPECT_TRUE(UsesTensorCores("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>"));
  EXPECT_EQ(PyTorchTensorCorePatterns().size(), 18u);
  EXPECT_EQ(AddedTensorCorePatterns().size(), 6u);
}

}  // namespace
}  // namespace podscope::coordinator::analysis
