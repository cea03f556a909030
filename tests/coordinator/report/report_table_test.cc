#include "coordinator/report/report_table.h"

#include <gtest/gtest.h>

#include "coordinator/analysis/analysis_run.h"
#include "tests/coordinator/analysis/hand_trace.h"

namespace podscope::coordinator {
namespace {

using podscope::testing::HandTrace;

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
}  // namespace podscope::coordinator
