// `podscope analyze` reads its files packed and analyses a worker at a time; what it says must be
// what the whole capture in memory says, byte for byte, on real traces.
#include <gtest/gtest.h>

#include "analysis/analysis_run.h"
#include "analysis/report/report_json.h"
#include "common/trace_files.h"
#include "tests/test_paths.h"

namespace podscope::analysis {
namespace {

void ExpectSameReports(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> files =
      common::ExpandTraceInputs({podscope::testing::SharedDataDir() + "/kineto/" + dir});
  ASSERT_TRUE(files.ok()) << files.status();
  AnalysisRequest request;
  request.reports = {"all"};
  ASSERT_TRUE(ValidateRequest(&request).ok());

  absl::StatusOr<common::Capture> whole = common::LoadCapture(*files);
  ASSERT_TRUE(whole.ok()) << whole.status();
  const common::CaptureView whole_view(*whole);
  const std::string expected = RenderJson(whole_view, request, RunAnalyses(whole_view, request));

  absl::StatusOr<common::PackedWorkers> packed = common::LoadPackedWorkers(*files);
  ASSERT_TRUE(packed.ok()) << packed.status();
  common::Capture tables;
  absl::StatusOr<AnalysisResults> streamed = RunAnalysesByWorker(*packed, request, &tables);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  const common::CaptureView view(tables);
  const std::string got = RenderJson(view, request, *streamed);
  EXPECT_GT(expected.size(), 1000u);
  EXPECT_TRUE(got == expected) << dir << ": the packed analysis differs (" << got.size()
                               << " bytes against " << expected.size() << ")";
}

TEST(PackedAnalysisTest, EightDlrmRanksSayTheSameReadAWorkerAtATime) {
  ExpectSameReports("dlrm_8rank");
}

TEST(PackedAnalysisTest, TwoSampledRanksSayTheSameReadAWorkerAtATime) {
  ExpectSameReports("trace_filter");
}

}  // namespace
}  // namespace podscope::analysis
