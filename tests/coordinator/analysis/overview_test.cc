#include "coordinator/analysis/overview.h"

#include <gtest/gtest.h>

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
  in.summary.link_gbps = 400;
  in.summary.collectives = 10;
  in.summary.median_busbw_gbps = 160;
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
  EXPECT_NE(o.recommendations[1].title.find("40.0% of the link (160.0 of 400 Gbit/s"),
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

}  // namespace
}  // namespace podscope::coordinator::analysis
