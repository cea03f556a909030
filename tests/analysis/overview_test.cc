#include "analysis/overview.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "analysis/analysis_run.h"
#include "tests/analysis/hand_trace.h"

namespace podscope::analysis {
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
  // The link: 400 of 1000 ns in AllReduce at 40% of the link puts 0.4 x 0.6 at stake.
  EXPECT_EQ(o.recommendations[0].rule, "allreduce_efficiency");
  EXPECT_DOUBLE_EQ(o.recommendations[0].step_share, 0.4 * 0.6);
  EXPECT_NE(
      o.recommendations[0].title.find("Collectives reach 40.0% of the link (160.0 of 400 GB/s"),
      std::string::npos)
      << o.recommendations[0].title;
  // The straggler costs what its loss says, not its caused delay.
  EXPECT_EQ(o.recommendations[1].rule, "straggler");
  EXPECT_DOUBLE_EQ(o.recommendations[1].step_share, 0.2);
  EXPECT_EQ(o.recommendations[1].ranks, (std::vector<int32_t>{5}));
  EXPECT_NE(
      o.recommendations[1].title.find("Rank 5 (node-1) straggles: its extra time is in idle_input"),
      std::string::npos)
      << o.recommendations[1].title;
  EXPECT_NE(o.recommendations[1].advice.find("dataloader"), std::string::npos);
  // 30% exposed, but of the step 6% is waiting for the straggler and 4% transferring: only the
  // transfer is at stake for overlap or the link, and the advice sends the reader to the
  // straggler first.
  EXPECT_EQ(o.recommendations[2].rule, "exposed_communication");
  EXPECT_DOUBLE_EQ(o.recommendations[2].step_share, 0.04);
  EXPECT_DOUBLE_EQ(Evidence(o.recommendations[2], "comm_wait_share"), 0.06);
  EXPECT_NE(o.recommendations[2].title.find(
                "10.0% of the pod's step time, 6.0% waiting and 4.0% transferring (30.0% on the "
                "median worker, 25.0% of whose communication is hidden)"),
            std::string::npos)
      << o.recommendations[2].title;
  EXPECT_TRUE(o.recommendations[2].advice.starts_with("More of it is waiting"))
      << o.recommendations[2].advice;
  EXPECT_NE(o.recommendations[2].advice.find("fix the straggler first"), std::string::npos);

  // A straggler that cost under 1% of the step time is left to the stragglers report, and the
  // advice does not send the reader to a straggler the list does not name.
  in.summary.stragglers[0].step_time_loss_ns = 9;
  const OverviewReport small =
      ComputeOverview(in.summary, in.breakdown, in.gpu, in.kernels, in.input);
  EXPECT_EQ(small.recommendations.size(), 2u);
  ASSERT_NE(Find(small, "exposed_communication"), nullptr);
  EXPECT_EQ(Find(small, "exposed_communication")->advice.find("fix the straggler"),
            std::string::npos);
  EXPECT_NE(Find(small, "exposed_communication")->advice.find("find why the ranks arrive apart"),
            std::string::npos);
  // With 30% of the step waiting and that straggler alone, the waiting is named on its own.
  std::vector<WorkerBreakdown> waiting = in.breakdown;
  waiting[0].steps[0].comm_wait_ns = 300;
  EXPECT_NE(Find(ComputeOverview(in.summary, waiting, in.gpu, in.kernels, in.input),
                 "collective_waiting"),
            nullptr);

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

// A tensor-parallel job built like a Megatron-LM trace: 8 ranks in one communicator (described
// only as default_pg), each layer's GEMM followed by an AllReduce of its output, 4 in the forward
// pass and 4 in the backward, for 4 steps. Ranks 0 and 6 are host-bound: before launching a
// layer's GEMM their host runs Python for 400 us (ranks 0 on even layers, 6 on odd ones, 100 us on
// the others), so the other six wait for them at every AllReduce. With
// `forward_collectives` false every AllReduce is called from the backward pass on, as gradient
// buckets are.
common::Capture TensorParallelJob(bool forward_collectives) {
  constexpr int kRanks = 8, kCollectives = 8, kSteps = 4;
  constexpr TimeNs kUs = 1'000;
  std::vector<podscope::testing::HandTrace> traces;
  for (int r = 0; r < kRanks; ++r) traces.emplace_back(r, kRanks);
  TimeNs t = 0;
  int64_t sequence = 0;
  for (int step = 1; step <= kSteps; ++step) {
    const TimeNs step_start = t;
    t += 50 * kUs;
    for (int k = 0; k < kCollectives; ++k) {
      const bool backward = !forward_collectives || k >= kCollectives / 2;
      TimeNs arrival[kRanks];
      TimeNs last = 0;
      for (int r = 0; r < kRanks; ++r) {
        const TimeNs host_ns = r == 0   ? (k % 2 == 0 ? 400 : 100) * kUs
                               : r == 6 ? (k % 2 == 1 ? 400 : 100) * kUs
                                        : 0;
        podscope::testing::HandTrace& h = traces[r];
        if (host_ns > 0) h.Span(t, t + host_ns, "aten::_local_scalar_dense");
        const TimeNs launch = t + host_ns;
        // The layer's operator, which launches its GEMM and then enqueues its AllReduce.
        h.Span(launch, launch + 40 * kUs,
               backward ? "autograd::engine::evaluate_function: LinearWithGradAccumulation"
                          "AndAsyncCommunicationBackward"
                        : "aten::linear",
               common::HostSpanCategory::kOp, backward ? 2 : 1);
        h.Kernel(launch + 10 * kUs, launch + 310 * kUs,
                 "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_"
                 "tensor16x8x16_kernel",
                 launch);
        arrival[r] = launch + 310 * kUs;
        last = std::max(last, arrival[r]);
      }
      const TimeNs end = last + 100 * kUs;
      for (int r = 0; r < kRanks; ++r) {
        const TimeNs enqueue = arrival[r] - 290 * kUs;  // right after the GEMM's launch
        traces[r]
            .Span(enqueue, enqueue + 15 * kUs, "nccl:all_reduce", common::HostSpanCategory::kOp,
                  backward ? 2 : 1)
            .Kernel(arrival[r], end, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", enqueue + 5 * kUs,
                    20)
            .Collective("pg:0", common::CollectiveOp::kAllReduce, sequence, 64 << 20, kRanks,
                        enqueue);
      }
      ++sequence;
      t = end;
    }
    t += 50 * kUs;
    for (int r = 0; r < kRanks; ++r) traces[r].Step(step, step_start, t);
  }
  common::Capture capture;
  for (int r = 0; r < kRanks; ++r) {
    common::WorkerTrace trace = traces[r].Build();
    trace.info.host = "node-0";
    trace.info.process_groups.push_back({"0", "default_pg", {0, 1, 2, 3, 4, 5, 6, 7}});
    capture.workers.push_back(std::move(trace));
  }
  return capture;
}

// Waiting dominates the exposed communication, so the host-bound ranks lead, and what is said
// about the transfer fits tensor parallelism: no gradient buckets.
TEST(OverviewTest, ATensorParallelJobWithHostBoundRanksLeadsWithTheStragglers) {
  const common::Capture capture = TensorParallelJob(true);
  AnalysisRequest request{.reports = {"overview"}};
  ASSERT_TRUE(ValidateRequest(&request).ok());
  const AnalysisResults results = RunAnalyses(common::CaptureView(capture), request);
  ASSERT_TRUE(results.overview.has_value());
  const OverviewReport& o = *results.overview;
  ASSERT_EQ(o.parallelism.communicators.size(), 1u);
  const CommunicatorUse& tp = o.parallelism.communicators[0];
  EXPECT_EQ(tp.kind, ParallelismKind::kTensorParallel);
  EXPECT_EQ(tp.description, "default_pg");
  EXPECT_EQ(tp.size, 8);
  EXPECT_EQ(tp.members.size(), 8u);
  EXPECT_DOUBLE_EQ(tp.CallsPerStep(), 8);
  EXPECT_EQ(tp.forward_calls, 8u * 4 * 4);
  EXPECT_EQ(tp.backward_calls, 8u * 4 * 4);

  ASSERT_GE(o.recommendations.size(), 3u);
  EXPECT_EQ(o.recommendations[0].rule, "straggler") << o.recommendations[0].title;
  EXPECT_EQ(o.recommendations[1].rule, "straggler") << o.recommendations[1].title;
  std::vector<int32_t> named = {o.recommendations[0].ranks.at(0), o.recommendations[1].ranks.at(0)};
  std::sort(named.begin(), named.end());
  EXPECT_EQ(named, (std::vector<int32_t>{0, 6}));
  const Recommendation* exposed = Find(o, "exposed_communication");
  ASSERT_NE(exposed, nullptr);
  EXPECT_LT(exposed->step_share, o.recommendations[1].step_share);
  EXPECT_GT(Evidence(*exposed, "comm_wait_share"), Evidence(*exposed, "comm_transfer_share"));
  EXPECT_DOUBLE_EQ(exposed->step_share, Evidence(*exposed, "comm_transfer_share"));
  EXPECT_NE(exposed->title.find("all tensor-parallel collectives (pg:0, 8 ranks"),
            std::string::npos)
      << exposed->title;
  EXPECT_NE(exposed->advice.find("fix the straggler first"), std::string::npos);
  EXPECT_NE(exposed->advice.find("Tensor-parallel collectives"), std::string::npos);
  EXPECT_EQ(exposed->advice.find("bucket"), std::string::npos) << exposed->advice;
  EXPECT_EQ(Find(o, "collective_waiting"), nullptr);  // the stragglers explain the waiting
  for (size_t i = 1; i < o.recommendations.size(); ++i)
    EXPECT_GE(o.recommendations[i - 1].step_share, o.recommendations[i].step_share);

  // The same job read one worker at a time says the same.
  const common::CaptureView view(capture);
  common::ViewWorkers source(view);
  common::Capture tables;
  absl::StatusOr<AnalysisResults> streamed = RunAnalysesByWorker(source, request, &tables);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  ASSERT_EQ(streamed->overview->recommendations.size(), o.recommendations.size());
  for (size_t i = 0; i < o.recommendations.size(); ++i) {
    EXPECT_EQ(streamed->overview->recommendations[i].title, o.recommendations[i].title);
    EXPECT_DOUBLE_EQ(streamed->overview->recommendations[i].step_share,
                     o.recommendations[i].step_share);
  }
  EXPECT_EQ(streamed->overview->parallelism.dominant, ParallelismKind::kTensorParallel);
}

// The same collectives called from the backward pass on are gradient reduction: the advice is
// about buckets.
TEST(OverviewTest, GradientReductionGetsBucketAdvice) {
  const common::Capture capture = TensorParallelJob(false);
  AnalysisRequest request{.reports = {"overview"}};
  ASSERT_TRUE(ValidateRequest(&request).ok());
  const AnalysisResults results = RunAnalyses(common::CaptureView(capture), request);
  const OverviewReport& o = *results.overview;
  EXPECT_EQ(o.parallelism.dominant, ParallelismKind::kDataParallel);
  const Recommendation* exposed = Find(o, "exposed_communication");
  ASSERT_NE(exposed, nullptr);
  EXPECT_NE(exposed->advice.find("bucket_cap_mb"), std::string::npos) << exposed->advice;
  EXPECT_NE(exposed->title.find("all data-parallel collectives"), std::string::npos)
      << exposed->title;
}

// bf16 autocast on an H200: each step, autocast casts the FP32 weights again (aten::to ->
// aten::_to_copy -> aten::copy_ -> a copy kernel) before the matmul. The casts take 1'400 of every
// 9'980 ns of kernel time: the cast rule names them with their share; at 400 it stays quiet.
// Copies that are not casts count for nothing: DDP's copy of gradients into its bucket (an
// aten::copy_ of its own) and the batch's host-to-device copy (a memcpy).
TEST(OverviewTest, AutocastCastsTakingAShareOfKernelTimeAreNamed) {
  const auto job = [](TimeNs cast_ns) {
    podscope::testing::HandTrace t(0, 1);
    for (int step = 0; step < 3; ++step) {
      const TimeNs at = step * 10'000;
      t.Step(step + 1, at, at + 10'000)
          .Span(at + 2, at + 65, "aten::to")
          .Span(at + 5, at + 60, "aten::_to_copy")
          .Span(at + 8, at + 50, "aten::copy_")
          .Kernel(at + 20, at + 20 + cast_ns,
                  "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_"
                  "cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const>",
                  at + 10)
          .Span(at + 66, at + 69, "aten::_to_copy")
          .Span(at + 67, at + 69, "aten::copy_")
          .Memcpy(at + 70, at + 90, common::MemcpyKind::kHostToDevice, at + 68)
          .Span(at + 70, at + 120, "aten::mm")
          .Kernel(at + 20 + cast_ns, at + 9'000,
                  "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
                  "execute_segment_k_off_kernel__5x_cublas",
                  at + 80)
          .Span(at + 130, at + 140, "aten::copy_")
          .Kernel(at + 9'000, at + 10'000,
                  "void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_"
                  "kernel_cuda(at::TensorIteratorBase&)::{lambda()#1}::operator()() const>",
                  at + 135);
    }
    common::Capture capture;
    capture.workers.push_back(t.Build());
    return capture;
  };
  AnalysisRequest request{.reports = {"overview"}};
  ASSERT_TRUE(ValidateRequest(&request).ok());
  const common::Capture casts = job(1'400);
  const AnalysisResults results = RunAnalyses(common::CaptureView(casts), request);
  const OverviewReport& o = *results.overview;
  ASSERT_TRUE(o.cast_copy_share.has_value());
  EXPECT_NEAR(*o.cast_copy_share, 1'400.0 / 9'980.0, 1e-12);
  const Recommendation* cast = Find(o, "cast_copies");
  ASSERT_NE(cast, nullptr);
  EXPECT_EQ(cast->subject, "aten::_to_copy");
  EXPECT_NEAR(cast->step_share, *o.cast_copy_share * *o.gpu.median_gpu_utilization, 1e-12);
  EXPECT_DOUBLE_EQ(Evidence(*cast, "cast_kernel_ns"), 3 * 1'400);
  EXPECT_DOUBLE_EQ(Evidence(*cast, "kernel_ns"), 3 * 9'980);
  EXPECT_DOUBLE_EQ(Evidence(*cast, "casts_per_step"), 1);
  EXPECT_NE(cast->title.find("14.0% of kernel time: 0.004 ms of 0.030 ms"), std::string::npos)
      << cast->title;
  EXPECT_NE(cast->advice.find("autocast"), std::string::npos);

  // The same through the streamed path.
  const common::CaptureView view(casts);
  common::ViewWorkers source(view);
  common::Capture tables;
  absl::StatusOr<AnalysisResults> streamed = RunAnalysesByWorker(source, request, &tables);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  ASSERT_NE(Find(*streamed->overview, "cast_copies"), nullptr);
  EXPECT_DOUBLE_EQ(*streamed->overview->cast_copy_share, *o.cast_copy_share);

  const common::Capture few = job(400);
  const AnalysisResults quiet = RunAnalyses(common::CaptureView(few), request);
  EXPECT_NEAR(*quiet.overview->cast_copy_share, 400.0 / 9'980.0, 1e-12);
  EXPECT_EQ(Find(*quiet.overview, "cast_copies"), nullptr);

  // A trace without host operators: the casts cannot be seen, so their share is unknown.
  common::Capture bare;
  bare.workers.push_back(podscope::testing::HandTrace(0, 1).Kernel(0, 100, "gemm").Build());
  EXPECT_FALSE(RunAnalyses(common::CaptureView(bare), request).overview->cast_copy_share);
}

}  // namespace
}  // namespace podscope::analysis
