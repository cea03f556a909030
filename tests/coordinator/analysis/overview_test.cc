#include "coordinator/analysis/overview.h"

#include <gtest/gtest.h>

#include "coordinator/analysis/analysis_run.h"
#include "tests/coordinator/analysis/hand_trace.h"

namespace podscope::coordinator::analysis {
namespace {

double Evidence(const Recommendation& r, const std::string& name) {
  for (const auto& [key, value] : r.evidence) {
    if (key == name) return value;
  }
  ADD_FAILURE() << r.rule << " has no evidence " << name;
  return -1;
}

const Recommendation* Find(const OverviewReport& o, const std::string& rule) {
  for (const Recommendation& r : o.recommendations) {
    if (r.rule == rule) return &r;
  }
  return nullptr;
}

// One worker, one step of 1000 ns: 500 compute, 100 exposed communication (60 of it waiting),
// 250 idle launching, 150 idle on input; the GPU busy 60% of it.
struct Inputs {
  SummaryReport summary;
  std::vector<WorkerBreakdown> breakdown;
  GpuReport gpu;
  KernelReport kernels;
  InputReport input;
};

Inputs Busy() {
  Inputs in;
  StepBreakdown s;
  s.span_ns = 1000;
  s.compute_ns = 500;
  s.comm_wait_ns = 60;
  s.comm_transfer_ns = 40;
  s.communication_ns = 100;
  s.idle_launch_ns = 250;
  s.idle_input_ns = 150;
  in.breakdown.push_back({.rank = 0, .steps = {s}});
  in.summary.ranks = 1;
  in.summary.steps = 1;
  in.summary.step_p50_ns = in.summary.step_max_ns = in.summary.window_step_time_ns = 1000;
  in.summary.exposed_communication_share = 0.1;  // not above the 10% threshold
  in.gpu.pod.median_gpu_utilization = 0.6;
  in.gpu.pod.least_utilized = {0};
  WorkerGpu w;
  w.kernels = 40;
  w.total.busy_ns = 600;
  w.steps.resize(1);
  in.gpu.workers.push_back(w);
  KernelStats hot{.name = "layer_norm",
                  .kernel_class = "compute",
                  .share = 0.3,
                  .tensor_core = false,
                  .blocks_per_sm = 0.5,
                  .achieved_occupancy = 0.08};
  KernelStats gemm{.name = "sm90_xmma_gemm",
                   .kernel_class = "compute",
                   .share = 0.5,
                   .tensor_core = true,
                   .blocks_per_sm = 1,
                   .achieved_occupancy = 0.125};
  KernelStats cold{
      .name = "tiny", .kernel_class = "compute", .share = 0.01, .achieved_occupancy = 0.01};
  in.kernels.pod = {gemm, hot, cold};
  in.kernels.tensor_cores = {.compute_ns = 1000, .tensor_core_ns = 500};
  WorkerInput input{.rank = 0,
                    .step_ns = 1000,
                    .input_wait_ns = 150,
                    .input_share = 0.15,
                    .verdict = InputVerdict::kModerately};
  in.input.workers = {input};
  in.input.median_input_share = 0.15;
  in.input.input_bound = {0};
  return in;
}

TEST(OverviewTest, EachRuleFiresOnItsNumberAndTheMostAtStakeComesFirst) {
  const Inputs in = Busy();
  const OverviewReport o = ComputeOverview(in.summary, in.breakdown, in.gpu, in.kernels, in.input);
  EXPECT_DOUBLE_EQ(o.breakdown.Share(o.breakdown.idle_launch_ns), 0.25);
  EXPECT_DOUBLE_EQ(o.tensor_core_share, 0.5);
  ASSERT_EQ(o.recommendations.size(), 4u);

  const Recommendation* idle = Find(o, "low_gpu_utilization");
  ASSERT_NE(idle, nullptr);
  EXPECT_DOUBLE_EQ(idle->step_share, 0.4);
  EXPECT_DOUBLE_EQ(Evidence(*idle, "median_gpu_utilization"), 0.6);
  EXPECT_DOUBLE_EQ(Evidence(*idle, "idle_launch_share"), 0.25);
  EXPECT_EQ(idle->ranks, (std::vector<int32_t>{0}));

  const Recommendation* launch = Find(o, "launch_bound");
  ASSERT_NE(launch, nullptr);
  EXPECT_DOUBLE_EQ(launch->step_share, 0.25);
  EXPECT_DOUBLE_EQ(Evidence(*launch, "kernels_per_step"), 40);
  EXPECT_DOUBLE_EQ(Evidence(*launch, "mean_kernel_busy_ns"), 15);
  EXPECT_NE(launch->advice.find("CUDA graphs"), std::string::npos);

  const Recommendation* input = Find(o, "input_bound");
  ASSERT_NE(input, nullptr);
  EXPECT_DOUBLE_EQ(input->step_share, 0.15);
  EXPECT_NE(input->title.find("rank 0 waits on its dataloader 15.0%"), std::string::npos)
      << input->title;

  // Only the hot kernel that is not on Tensor Cores: its grid leaves SMs idle.
  const Recommendation* kernel = Find(o, "low_occupancy_kernel");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->subject, "layer_norm");
  EXPECT_DOUBLE_EQ(kernel->step_share, 0.3 * 0.6);
  EXPECT_DOUBLE_EQ(Evidence(*kernel, "achieved_occupancy"), 0.08);
  EXPECT_NE(kernel->advice.find("0.50 blocks per SM"), std::string::npos) << kernel->advice;

  EXPECT_EQ(Find(o, "exposed_communication"), nullptr);  // 10% is not above 10%
  EXPECT_EQ(Find(o, "allreduce_efficiency"), nullptr);   // no link bandwidth given
  EXPECT_EQ(o.recommendations[0].rule, "low_gpu_utilization");
  EXPECT_EQ(o.recommendations[1].rule, "launch_bound");
  EXPECT_EQ(o.recommendations[2].rule, "low_occupancy_kernel");
  EXPECT_EQ(o.recommendations[3].rule, "input_bound");
}

TEST(OverviewTest, CommunicationTheLinkAndAStragglerEachNeedTheirNumbers) {
  Inputs in = Busy();
  in.gpu.pod.median_gpu_utilization = 0.95;
  in.breakdown[0].steps[0].idle_launch_ns = 0;
  in.input.input_bound.clear();
  in.kernels.pod.clear();
  in.summary.exposed_communication_share = 0.3;
  in.summary.exposed_communication_ns = 300;
  in.summary.overlap_pct = 25;
  in.summary.link_gbytes_per_s = 400;
  in.summary.collectives = 10;
  in.summary.median_busbw_gbytes_per_s = 160;
  in.summary.median_efficiency = 0.4;
  in.summary.measured_allreduce_ns = 400;
  Straggler g;
  g.rank = 5;
  g.host = "node-1";
  g.category = "idle_input";
  g.step_time_loss_ns = 200;
  g.caused_delay_ns = 900;
  in.summary.stragglers = {g};
  const OverviewReport o = ComputeOverview(in.summary, in.breakdown, in.gpu, in.kernels, in.input);
  ASSERT_EQ(o.recommendations.size(), 3u);
  EXPECT_EQ(o.recommendations[0].rule, "exposed_communication");
  EXPECT_DOUBLE_EQ(o.recommendations[0].step_share, 0.3);
  EXPECT_DOUBLE_EQ(Evidence(o.recommendations[0], "comm_wait_share"), 0.06);
  // The link: 400 of 1000 ns in AllReduce at 40% of the link puts 0.4 x 0.6 at stake.
  EXPECT_EQ(o.recommendations[1].rule, "allreduce_efficiency");
  EXPECT_DOUBLE_EQ(o.recommendations[1].step_share, 0.4 * 0.6);
  EXPECT_NE(
      o.recommendations[1].title.find("Collectives reach 40.0% of the link (160.0 of 400 GB/s"),
      std::string::npos)
      << o.recommendations[1].title;
  // The straggler costs what its loss says, not its caused delay.
  EXPECT_EQ(o.recommendations[2].rule, "straggler");
  EXPECT_DOUBLE_EQ(o.recommendations[2].step_share, 0.2);
  EXPECT_EQ(o.recommendations[2].ranks, (std::vector<int32_t>{5}));
  EXPECT_NE(
      o.recommendations[2].title.find("Rank 5 (node-1) straggles: its extra time is in idle_input"),
      std::string::npos)
      << o.recommendations[2].title;
  EXPECT_NE(o.recommendations[2].advice.find("dataloader"), std::string::npos);

  // A straggler that cost under 1% of the step time is left to the stragglers report.
  in.summary.stragglers[0].step_time_loss_ns = 9;
  EXPECT_EQ(ComputeOverview(in.summary, in.breakdown, in.gpu, in.kernels, in.input)
                .recommendations.size(),
            2u);

  // Nothing crosses a threshold: no recommendation at all.
  in.summary.exposed_communication_share = 0.05;
  in.summary.median_efficiency = 0.9;
  in.summary.stragglers.clear();
  EXPECT_TRUE(ComputeOverview(in.summary, in.breakdown, in.gpu, in.kernels, in.input)
                  .recommendations.empty());
}

// FP32 PyTorch on a GPU with Tensor Cores, as a real H200 loop ran: most kernel time in cuBLAS's
// FFMA GEMM and CUTLASS's SIMT SGEMM (both at low occupancy, as their tiles are designed), some
// in a kernel of the user's own. The first advice is TF32 or bf16; no library kernel is told to
// change its tiles; the user's kernel is.
TEST(OverviewTest, Fp32GemmsOnATensorCoreGpuComeFirstAndLibraryKernelsGetNoTileAdvice) {
  const std::string ffma =
      "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_"
      "alignc4_execute_kernel__5x_cublas";
  const std::string simt = "cutlass_80_simt_sgemm_256x128_8x4_nt_align1";
  const std::string own = "void my_layer_norm_kernel<float>(float const*, float*, int)";
  podscope::testing::HandTrace t(0, 1);
  for (int step = 0; step < 3; ++step) {
    const TimeNs at = step * 10'000;
    t.Step(step + 1, at, at + 10'000)
        .Kernel(at + 100, at + 6'300, ffma, at + 10)     // 62% of the step
        .Kernel(at + 6'300, at + 8'300, simt, at + 20)   // 20%
        .Kernel(at + 8'300, at + 10'000, own, at + 30);  // 17%
  }
  common::Capture capture;
  capture.workers.push_back(t.Build());
  capture.workers[0].info.devices.push_back(
      {.id = 0, .name = "NVIDIA H200", .compute_major = 9, .compute_minor = 0, .sm_count = 132});
  AnalysisRequest request{.reports = {"overview"}};
  ASSERT_TRUE(ValidateRequest(&request).ok());
  const AnalysisResults results = RunAnalyses(common::CaptureView(capture), request);
  ASSERT_TRUE(results.overview.has_value());
  const OverviewReport& o = *results.overview;
  EXPECT_NEAR(o.fp32_gemm_share, 8'200.0 / 9'900.0, 1e-9);
  EXPECT_EQ(o.tensor_core_share, 0);
  ASSERT_FALSE(o.recommendations.empty());
  const Recommendation& first = o.recommendations[0];
  EXPECT_EQ(first.rule, "fp32_gemm_on_cuda_cores");
  EXPECT_EQ(first.subject, ffma);
  EXPECT_NEAR(Evidence(first, "fp32_gemm_share"), 8'200.0 / 9'900.0, 1e-9);
  EXPECT_NE(first.advice.find("set_float32_matmul_precision"), std::string::npos);
  EXPECT_NE(first.advice.find("bfloat16"), std::string::npos);
  size_t occupancy_advice = 0;
  for (const Recommendation& r : o.recommendations) {
    if (r.rule != "low_occupancy_kernel") continue;
    ++occupancy_advice;
    EXPECT_EQ(r.subject, own);  // never the cuBLAS or CUTLASS GEMM
  }
  EXPECT_EQ(occupancy_advice, 1u);
  for (size_t i = 1; i < o.recommendations.size(); ++i) {
    EXPECT_GE(o.recommendations[i - 1].step_share, o.recommendations[i].step_share);
  }

  // The same kernels on a V100 (compute capability 7.0): no TF32 to move to, so no such advice.
  capture.workers[0].info.devices[0].compute_major = 7;
  const AnalysisResults volta = RunAnalyses(common::CaptureView(capture), request);
  EXPECT_EQ(volta.overview->fp32_gemm_share, 0);
  EXPECT_EQ(Find(*volta.overview, "fp32_gemm_on_cuda_cores"), nullptr);
}

}  // namespace
}  // namespace podscope::coordinator::analysis
