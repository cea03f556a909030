#include "analysis/pod_view.h"

#include <gtest/gtest.h>

namespace podscope::analysis {
namespace {

WorkerBreakdown Worker(int32_t rank, std::vector<std::pair<int64_t, TimeNs>> steps) {
  WorkerBreakdown w;
  w.rank = rank;
  for (auto [n, span] : steps) {
    StepBreakdown s;
    s.step = n;
    s.span_ns = span;
    s.compute_ns = span;
    w.steps.push_back(s);
  }
  return w;
}

TEST(PodViewTest, RowsDeviationsAndMatrix) {
  const std::vector<WorkerBreakdown> b = {Worker(0, {{1, 100}, {2, 110}}),
                                          Worker(1, {{1, 120}, {2, 100}}), Worker(2, {{1, 100}})};
  const PodView v = ComputePodView(b);
  EXPECT_EQ(v.step_numbers, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(v.ranks, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(v.step_time_ns, (std::vector<std::vector<TimeNs>>{{100, 110}, {120, 100}, {100, -1}}));
  ASSERT_EQ(v.steps.size(), 2u);
  EXPECT_EQ(v.steps[0].median_step_ns, 100);
  EXPECT_EQ(v.steps[0].rows[1].deviation_ns, 20);
  EXPECT_DOUBLE_EQ(v.steps[0].rows[1].deviation_pct, 20.0);
  EXPECT_EQ(v.steps[1].median_step_ns, 105);  // even count: mean of the middle two
  EXPECT_EQ(v.steps[1].rows.size(), 2u);
  const PodView only2 = ComputePodView(b, 2, 2);
  EXPECT_EQ(only2.step_numbers, (std::vector<int64_t>{2}));
}

}  // namespace
}  // namespace podscope::analysis
