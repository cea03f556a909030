#include "common/worker_trace.h"

#include <gtest/gtest.h>

namespace podscope::common {
namespace {

void AddSpan(WorkerTrace& w, TimeNs start, TimeNs end, const char* name) {
  HostSpanTable& h = w.host_spans;
  h.start.push_back(start);
  h.end.push_back(end);
  h.thread.push_back(7);
  h.name.push_back(w.strings.Intern(name));
  h.category.push_back(HostSpanCategory::kOp);
  h.step.push_back(kNoStep);
  h.external_id.push_back(start / 10);
}

TEST(WorkerTraceTest, SortByTimeKeepsRowsTogether) {
  WorkerTrace w;
  AddSpan(w, 300, 350, "c");
  AddSpan(w, 100, 400, "a");
  AddSpan(w, 200, 210, "b");
  w.SortByTime();
  EXPECT_EQ(w.host_spans.start, (std::vector<TimeNs>{100, 200, 300}));
  EXPECT_EQ(w.host_spans.end, (std::vector<TimeNs>{400, 210, 350}));
  EXPECT_EQ(w.strings.Get(w.host_spans.name[0]), "a");
  EXPECT_EQ(w.strings.Get(w.host_spans.name[2]), "c");
  EXPECT_EQ(w.host_spans.external_id, (std::vector<int64_t>{10, 20, 30}));
  EXPECT_TRUE(w.Validate().ok());
}

TEST(WorkerTraceTest, ValidateRejectsRaggedColumnsBadNamesAndEnums) {
  WorkerTrace ragged;
  AddSpan(ragged, 1, 2, "x");
  ragged.host_spans.thread.push_back(9);
  EXPECT_EQ(ragged.Validate().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(ragged.Validate().message().find("host_spans"), std::string::npos);

  WorkerTrace bad_name;
  AddSpan(bad_name, 1, 2, "x");
  bad_name.host_spans.name[0] = 99;
  EXPECT_NE(bad_name.Validate().message().find("name id 99"), std::string::npos);

  WorkerTrace bad_enum;
  AddSpan(bad_enum, 1, 2, "x");
  bad_enum.host_spans.category[0] = static_cast<HostSpanCategory>(200);
  EXPECT_NE(bad_enum.Validate().message().find("out of range"), std::string::npos);
}

TEST(WorkerTraceTest, CountsAndTimeRange) {
  WorkerTrace w;
  EXPECT_EQ(w.TimeRange(), (std::pair<TimeNs, TimeNs>{0, 0}));
  AddSpan(w, 100, 400, "a");
  AddSpan(w, 50, 60, "b");
  EXPECT_EQ(w.Counts().host_spans, 2u);
  EXPECT_EQ(w.Counts().Total(), 2u);
  EXPECT_EQ(w.TimeRange(), (std::pair<TimeNs, TimeNs>{50, 400}));
}

TEST(WorkerTraceTest, DisplayNamePrefersHost) {
  WorkerInfo info;
  info.rank = 3;
  info.pid = 4037;
  info.process_name = "python3";
  EXPECT_EQ(info.DisplayName(), "rank 3 (python3 pid 4037)");
  info.host = "node-7";
  EXPECT_EQ(info.DisplayName(), "rank 3 (node-7)");
}

}  // namespace
}  // namespace podscope::common
