#include "analysis/report/report_json.h"

#include <gtest/gtest.h>

#include "analysis/analysis_run.h"
#include "analysis/report/report_table.h"
#include "tests/analysis/hand_trace.h"

namespace podscope::analysis {
namespace {

using podscope::testing::HandTrace;

// Two ranks, two steps 1 ms apart: compute [0, 600) us, an AllReduce kernel [400, 900) us, so per
// step 400 us computation only, 200 us overlap, 300 us communication only, and a step span (first
// to last device activity) of 900 us.
common::Capture TwoRanks() {
  common::Capture capture;
  for (int r = 0; r < 2; ++r) {
    HandTrace t(r, 2);
    for (int i = 0; i < 2; ++i) {
      const common::TimeNs base = i * 1'000'000;
      t.Step(i, base, base + 1'000'000)
          .Kernel(base, base + 600'000, "gemm", base)
          .Kernel(base + 400'000, base + 900'000, "ncclDevKernel_AllReduce", base + 1)
          .Collective("pg:0", common::CollectiveOp::kAllReduce, i, 4096, 2, base + 1);
    }
    capture.workers.push_back(t.Build());
  }
  return capture;
}

std::string Render(const common::Capture& capture, const std::string& report, bool workers_only) {
  const common::CaptureView view(capture);
  analysis::AnalysisRequest request;
  request.reports = {report};
  request.workers_only = workers_only;
  EXPECT_TRUE(analysis::ValidateRequest(&request).ok());
  return RenderJson(view, request, analysis::RunAnalyses(view, request));
}

// Two ranks that only compute: no communication kernels, no collectives, no link given.
common::Capture ComputeOnly() {
  common::Capture capture;
  for (int r = 0; r < 2; ++r) {
    HandTrace t(r, 2);
    for (int i = 0; i < 2; ++i) {
      const common::TimeNs base = i * 1'000'000;
      t.Step(i, base, base + 1'000'000).Kernel(base, base + 600'000, "gemm", base);
    }
    capture.workers.push_back(t.Build());
  }
  return capture;
}

std::string RenderTable(const common::Capture& capture, const std::string& report) {
  const common::CaptureView view(capture);
  analysis::AnalysisRequest request;
  request.reports = {report};
  EXPECT_TRUE(analysis::ValidateRequest(&request).ok());
  return RenderTables(view, request, analysis::RunAnalyses(view, request));
}

// What does not apply is unknown: null in JSON and "—" or words in tables, never 0.
TEST(ReportJsonTest, WhatDoesNotApplyIsNullNotZero) {
  const common::Capture capture = ComputeOnly();
  const std::string summary = Render(capture, "summary", false);
  EXPECT_NE(summary.find(R"("overlap_pct":null)"), std::string::npos) << summary;
  EXPECT_NE(
      summary.find(
          R"("allreduce":{"collectives":0,"median_busbw_gbytes_per_s":null,"link_gbytes_per_s":null,"median_efficiency":null,)"),
      std::string::npos)
      << summary;
  const std::string overview = Render(capture, "overview", false);
  EXPECT_NE(overview.find(R"("cast_copy_share":null)"), std::string::npos) << overview;
  EXPECT_NE(
      overview.find(
          R"("overlap_pct":null,"median_busbw_gbytes_per_s":null,"link_gbytes_per_s":null,"median_efficiency":null,"dominant_kind":null,"dominant_kind_share":null,"communicators":[],"communicator_groups":[]})"),
      std::string::npos)
      << overview;
  const std::string overlap = Render(capture, "overlap", false);
  EXPECT_NE(overlap.find(R"("overlap_ns":0,"overlap_pct":null})"), std::string::npos) << overlap;
  EXPECT_EQ(overlap.find(R"("overlap_pct":0)"), std::string::npos) << overlap;
  const std::string allreduce = Render(capture, "allreduce", false);
  EXPECT_NE(allreduce.find(R"({"link_gbytes_per_s":null,"median_busbw_gbytes_per_s":null,)"),
            std::string::npos)
      << allreduce;

  const std::string table = RenderTable(capture, "summary");
  EXPECT_NE(table.find("no communication kernels to hide"), std::string::npos) << table;
  EXPECT_NE(table.find("collectives: none"), std::string::npos) << table;
  EXPECT_EQ(table.find("0.0% of its communication hidden"), std::string::npos) << table;
  EXPECT_EQ(table.find("0.0 GB/s"), std::string::npos) << table;
  const std::string overview_table = RenderTable(capture, "overview");
  EXPECT_NE(overview_table.find("communication: none"), std::string::npos) << overview_table;
  const std::string overlap_table = RenderTable(capture, "overlap");
  EXPECT_NE(overlap_table.find("        —\n"), std::string::npos) << overlap_table;
}

// detail=workers (what the web UI loads for 1024 workers): one entry per worker, nothing per step
// or per collective; the totals are the sums of the full report's steps.
TEST(ReportJsonTest, WorkersOnlyKeepsOneEntryPerWorkerWithTheTotalsOfItsSteps) {
  const common::Capture capture = TwoRanks();
  const std::string full_overlap = Render(capture, "overlap", false);
  EXPECT_NE(
      full_overlap.find(
          R"({"rank":0,"steps":[{"step":0,"computation_ns":400000,"communication_ns":300000,"overlap_ns":200000,"overlap_pct":40.00})"),
      std::string::npos)
      << full_overlap;
  const std::string overlap = Render(capture, "overlap", true);
  EXPECT_NE(
      overlap.find(
          R"({"rank":0,"step_count":2,"computation_ns":800000,"communication_ns":600000,"overlap_ns":400000,"overlap_pct":40.00})"),
      std::string::npos)
      << overlap;
  EXPECT_NE(overlap.find(R"({"rank":1,"step_count":2,)"), std::string::npos) << overlap;

  const std::string pod = Render(capture, "pod", true);
  EXPECT_NE(
      pod.find(
          R"({"steps":[],"matrix":{"ranks":[0,1],"steps":[0,1],"step_time_ns":[[900000,900000],[900000,900000]]},"warnings":[]})"),
      std::string::npos)
      << pod;
  EXPECT_NE(Render(capture, "pod", false)
                .find(R"({"steps":[{"step":0,"median_step_ns":900000,"rows":[{"rank":0,)"),
            std::string::npos);

  const std::string kernels = Render(capture, "kernels", true);
  EXPECT_NE(
      kernels.find(R"({"pod":[{"name":"gemm","class":"compute","count":4,"total_ns":2400000,)"),
      std::string::npos)
      << kernels;
  EXPECT_EQ(kernels.find("\"workers\""), std::string::npos) << kernels;
  EXPECT_NE(
      kernels.find(
          R"("tensor_core":false,"math":"cuda_cores","math_rule":"","library":false,"blocks_per_sm":null,"achieved_occupancy":null})"),
      std::string::npos)
      << kernels;
  EXPECT_NE(
      kernels.find(
          R"("tensor_cores":{"compute_ns":2400000,"tensor_core_ns":0,"fp32_gemm_ns":0,"kernel_ns":4400000,"share":0.0000},"warnings":[]})"),
      std::string::npos)
      << kernels;
  EXPECT_NE(
      Render(capture, "kernels", false)
          .find(
              R"("workers":[{"rank":0,"tensor_cores":{"compute_ns":1200000,"tensor_core_ns":0,"fp32_gemm_ns":0,"kernel_ns":2200000,"share":0.0000},"top":[)"),
      std::string::npos);

  // No device record: busy time alone, and null where an estimate needs the device.
  const std::string gpu = Render(capture, "gpu", true);
  EXPECT_NE(
      gpu.find(
          R"({"workers":[{"rank":0,"device":"","kernels":4,"kernels_without_occupancy":4,"span_ns":1800000,"busy_ns":1800000,"gpu_utilization":1.0000,"sm_efficiency":null,"achieved_occupancy":null,"step_count":2},)"),
      std::string::npos)
      << gpu;
  EXPECT_NE(
      gpu.find(
          R"("pod":{"median_gpu_utilization":1.0000,"median_sm_efficiency":null,"median_achieved_occupancy":null,"least_utilized":[0,1]},"warnings":[]})"),
      std::string::npos)
      << gpu;
  EXPECT_NE(
      Render(capture, "gpu", false)
          .find(
              R"("steps":[{"step":0,"span_ns":900000,"busy_ns":900000,"gpu_utilization":1.0000,"sm_efficiency":null,"achieved_occupancy":null},)"),
      std::string::npos);

  const std::string communication = Render(capture, "communication", true);
  EXPECT_NE(communication.find(R"("workers":[{"rank":0,"collectives":2,)"), std::string::npos)
      << communication;
  EXPECT_EQ(communication.find("\"collectives\":["), std::string::npos) << communication;
  EXPECT_NE(Render(capture, "communication", false)
                .find(R"("collectives":[{"communicator":"pg:0","op":"AllReduce")"),
            std::string::npos);
}

}  // namespace
}  // namespace podscope::analysis
