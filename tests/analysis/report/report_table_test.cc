#include "analysis/report/report_table.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "analysis/analysis_run.h"
#include "sim/workload_model.h"
#include "tests/analysis/hand_trace.h"

namespace podscope::analysis {
namespace {

using podscope::testing::HandTrace;

// Three of PyTorch's foreach kernels, as CUPTI names them: alike for their first 90 characters.
const char* const kForeachKernels[] = {
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
    "namespace)::TensorListMetadata<2>, at::native::(anonymous "
    "namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float>(at::native::"
    "(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous "
    "namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float)",
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
    "namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::UnaryOpFunctor<float, "
    "1, "
    "1, 0>, at::native::(anonymous namespace)::Copy<float, float>>(at::native::(anonymous "
    "namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::UnaryOpFunctor<float, "
    "1, "
    "1, 0>, at::native::(anonymous namespace)::Copy<float, float>)",
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
    "namespace)::TensorListMetadata<3>, at::native::(anonymous "
    "namespace)::PointwiseOpScalarFunctor<float, 3, 3, 0>, std::multiplies<float>, "
    "float>(at::native::(anonymous namespace)::TensorListMetadata<3>, at::native::(anonymous "
    "namespace)::PointwiseOpScalarFunctor<float, 3, 3, 0>, std::multiplies<float>, float)"};

TEST(ReportTableTest, ShortNamesStayDistinctAndFitTheirColumn) {
  const std::vector<std::string_view> names = {kForeachKernels[0], kForeachKernels[1],
                                               kForeachKernels[2], "ampere_sgemm_128x64_nn",
                                               "void gemv2T_kernel<int, int, float>()"};
  const std::vector<std::string> shown = ShortNames(names, 48);
  ASSERT_EQ(shown.size(), names.size());
  for (const std::string& s : shown) {
    EXPECT_LE(s.size(), 48u) << s;
    EXPECT_EQ(s.find("(anonymous namespace)"), std::string::npos) << s;
    EXPECT_FALSE(s.starts_with("void ")) << s;
  }
  EXPECT_EQ(std::set<std::string>(shown.begin(), shown.end()).size(), names.size())
      << shown[0] << "\n"
      << shown[1] << "\n"
      << shown[2];
  // Each shows where it differs from the others.
  EXPECT_NE(shown[0].find("Metadata<2>"), std::string::npos) << shown[0];
  EXPECT_NE(shown[1].find("Metadata<1>"), std::string::npos) << shown[1];
  EXPECT_NE(shown[2].find("Metadata<3>"), std::string::npos) << shown[2];
  EXPECT_EQ(shown[3], "ampere_sgemm_128x64_nn");
  EXPECT_EQ(shown[4], "gemv2T_kernel<int, int, float>()");
  // Alike for longer than the column: numbered.
  const std::string a(60, 'k');
  const std::vector<std::string> twins = ShortNames({a + "1", a + "2"}, 48);
  EXPECT_NE(twins[0], twins[1]);
  EXPECT_LE(twins[1].size(), 48u);
}

TEST(ReportTableTest, TheKernelTableShowsEachKernelOnceDistinctAndWholeWhenWide) {
  common::Capture capture;
  HandTrace t(0, 1);
  t.Step(0, 0, 10'000'000);
  for (int k = 0; k < 3; ++k)
    t.Kernel(k * 1'000'000, k * 1'000'000 + 500'000, kForeachKernels[k], k);
  capture.workers.push_back(t.Build());
  const common::CaptureView view(capture);
  analysis::AnalysisRequest request;
  request.reports = {"kernels"};
  ASSERT_TRUE(analysis::ValidateRequest(&request).ok());
  const analysis::AnalysisResults results = analysis::RunAnalyses(view, request);
  const std::string table = RenderTables(view, request, results);
  std::set<std::string> rows;
  for (size_t at = table.find("\nat::native::"); at != std::string::npos;
       at = table.find("\nat::native::", at + 1)) {
    rows.insert(table.substr(at + 1, 48));
  }
  EXPECT_EQ(rows.size(), 3u) << table;
  request.wide_names = true;
  const std::string wide = RenderTables(view, request, results);
  for (const char* name : kForeachKernels) EXPECT_NE(wide.find(name), std::string::npos) << wide;
}

// In synchronous training every rank's step lasts as long as the slowest's: the pod table ranks
// by own time (the step less its wait for others), so the straggler comes first, in every step,
// and the long tables show it first too.
TEST(ReportTableTest, ThePodTableAndTheLongTablesPutTheStragglerFirst) {
  sim::WorkloadOptions o;
  o.ranks = 16;
  o.steps = 6;
  o.seed = 5;
  o.slowdowns.push_back({.rank = 5, .factor = 1.2});
  const common::Capture job = sim::SimulateJob(o).capture;
  const common::CaptureView view(job);
  analysis::AnalysisRequest request;
  request.reports = {"pod", "steps"};
  request.top_workers = 3;
  request.communication.clocks = analysis::ClockTrust::kAligned;
  ASSERT_TRUE(analysis::ValidateRequest(&request).ok());
  const std::string table = RenderTables(view, request, analysis::RunAnalyses(view, request));
  size_t steps = 0;
  for (size_t at = table.find("\nstep "); at != std::string::npos;
       at = table.find("\nstep ", at + 1)) {
    const size_t first_row = table.find('\n', table.find('\n', at + 1) + 1) + 1;
    EXPECT_EQ(table.substr(first_row, 8), "      5 ") << table.substr(at, 400);
    ++steps;
  }
  EXPECT_GE(steps, 4u) << table;
  EXPECT_NE(table.find("worst first by own time"), std::string::npos);
  const size_t steps_table = table.find("== steps:");
  ASSERT_NE(steps_table, std::string::npos);
  const size_t first_row = table.find('\n', table.find('\n', steps_table) + 1) + 1;
  EXPECT_EQ(table.substr(first_row, 6), "    5 ") << table.substr(steps_table, 600);

  // The overview counts in words: "1 straggler", not "1 straggler(s)".
  request.reports = {"overview"};
  ASSERT_TRUE(analysis::ValidateRequest(&request).ok());
  const std::string overview = RenderTables(view, request, analysis::RunAnalyses(view, request));
  EXPECT_NE(overview.find("; 1 straggler\n"), std::string::npos) << overview;
  EXPECT_EQ(overview.find("(s)"), std::string::npos) << overview;
}

// Live captures number steps from the job's own counter (11 digits); the tables show
// them relative to the capture's first step, named above the table, so they fit their columns.
TEST(ReportTableTest, LiveStepNumbersAreShownRelativeToTheCapture) {
  common::Capture capture;
  for (int r = 0; r < 2; ++r) {
    HandTrace t(r, 2);
    for (int i = 0; i < 3; ++i) {
      const common::TimeNs base = i * 1'000'000;
      t.Step(18'852'415'958 + i, base, base + 1'000'000)
          .Kernel(base + 100, base + 900, "gemm", base + 50);
    }
    capture.workers.push_back(t.Build());
  }
  const common::CaptureView view(capture);
  analysis::AnalysisRequest request;
  request.reports = {"steps", "pod"};
  ASSERT_TRUE(analysis::ValidateRequest(&request).ok());
  const std::string tables = RenderTables(view, request, analysis::RunAnalyses(view, request));
  EXPECT_NE(tables.find("(steps shown relative to the capture's first, step 18852415958)"),
            std::string::npos)
      << tables;
  EXPECT_NE(tables.find("\n    0      +2 "), std::string::npos) << tables;
  EXPECT_NE(tables.find("step +1 (median"), std::string::npos) << tables;
  EXPECT_EQ(tables.find("18852415959"), std::string::npos) << tables;
}

}  // namespace
}  // namespace podscope::analysis
