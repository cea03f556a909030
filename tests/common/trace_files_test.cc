#include "common/trace_files.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/test_paths.h"

namespace podscope::common {
namespace {

using podscope::testing::ScratchDir;

std::string MinimalTrace(int rank) {
  return R"({"distributedInfo": {"rank": )" + std::to_string(rank) +
         R"(, "world_size": 16}, "traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2}]})";
}

TEST(TraceFilesTest, DirectoriesExpandInNaturalOrder) {
  ScratchDir dir;
  for (int r : {10, 2, 1}) dir.Write("rank-" + std::to_string(r) + ".json", MinimalTrace(r));
  dir.Write("notes.txt", "not a trace");
  absl::StatusOr<std::vector<std::string>> files = ExpandTraceInputs({dir.path()});
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(*files, (std::vector<std::string>{dir.File("rank-1.json"), dir.File("rank-2.json"),
                                              dir.File("rank-10.json")}));
}

TEST(TraceFilesTest, MissingPathsAndEmptyDirectoriesAreErrors) {
  ScratchDir dir;
  EXPECT_EQ(ExpandTraceInputs({dir.path()}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ExpandTraceInputs({dir.File("nope.json")}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(TraceFilesTest, LoadsRanksFromTheirTraces) {
  ScratchDir dir;
  dir.Write("a.json", MinimalTrace(5));
  dir.Write("b.json", MinimalTrace(3));
  absl::StatusOr<Capture> capture = LoadCapture(*ExpandTraceInputs({dir.path()}), {.threads = 2});
  ASSERT_TRUE(capture.ok()) << capture.status();
  ASSERT_EQ(capture->workers.size(), 2u);
  EXPECT_EQ(capture->workers[0].info.rank, 5);
  EXPECT_EQ(capture->workers[1].info.rank, 3);
  EXPECT_EQ(CaptureView(*capture).worker(0).info.rank, 3);  // the view orders by rank
}

TEST(TraceFilesTest, DuplicateRanksAreAnError) {
  ScratchDir dir;
  dir.Write("a.json", MinimalTrace(1));
  dir.Write("b.json", MinimalTrace(1));
  absl::StatusOr<Capture> capture = LoadCapture(*ExpandTraceInputs({dir.path()}));
  ASSERT_FALSE(capture.ok());
  EXPECT_NE(capture.status().message().find("rank 1 appears in both"), std::string::npos);
}

TEST(TraceFilesTest, OneBadFileFailsTheWholeLoad) {
  ScratchDir dir;
  dir.Write("rank-0.json", MinimalTrace(0));
  dir.Write("rank-1.json", MinimalTrace(1).substr(0, 60));
  std::vector<size_t> progress;
  LoadOptions options;
  options.progress = [&progress](const LoadProgress& p) { progress.push_back(p.files_done); };
  absl::StatusOr<Capture> capture = LoadCapture(*ExpandTraceInputs({dir.path()}), options);
  ASSERT_FALSE(capture.ok());
  EXPECT_NE(capture.status().message().find("rank-1.json: byte offset"), std::string::npos)
      << capture.status();
  EXPECT_EQ(progress.size(), 2u);
}

TEST(TraceFilesTest, TracesWithoutRanksGetTheirFilePosition) {
  ScratchDir dir;
  const std::string no_rank = R"({"traceEvents": []})";
  dir.Write("x0.json", no_rank);
  dir.Write("x1.json", no_rank);
  absl::StatusOr<Capture> capture = LoadCapture(*ExpandTraceInputs({dir.path()}));
  ASSERT_TRUE(capture.ok()) << capture.status();
  EXPECT_EQ(capture->workers[0].info.rank, 0);
  EXPECT_EQ(capture->workers[1].info.rank, 1);
}

}  // namespace
}  // namespace podscope::common
