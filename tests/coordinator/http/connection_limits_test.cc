#include "coordinator/http/connection_limits.h"

#include <gtest/gtest.h>

#include "coordinator/http/progress_deadline.h"

namespace podscope::coordinator {
namespace {

using Verdict = ConnectionLimits::Verdict;

TEST(ConnectionLimitsTest, BoundsAllConnectionsAndEachClient) {
  ConnectionLimits limits(/*max_total=*/3, /*max_per_client=*/2);
  EXPECT_EQ(limits.TryAdmit("10.0.0.1"), Verdict::kAdmitted);
  EXPECT_EQ(limits.TryAdmit("10.0.0.1"), Verdict::kAdmitted);
  EXPECT_EQ(limits.TryAdmit("10.0.0.1"), Verdict::kClientFull);
  EXPECT_EQ(limits.TryAdmit("10.0.0.2"), Verdict::kAdmitted);
  EXPECT_EQ(limits.TryAdmit("10.0.0.3"), Verdict::kServerFull);
  EXPECT_EQ(limits.open(), 3u);
  limits.Release("10.0.0.1");
  EXPECT_EQ(limits.open_for("10.0.0.1"), 1u);
  EXPECT_EQ(limits.TryAdmit("10.0.0.3"), Verdict::kAdmitted);
  // A client without a slot holds no entry, and releasing it changes nothing.
  limits.Release("10.0.0.9");
  EXPECT_EQ(limits.open(), 3u);
  EXPECT_EQ(limits.open_for("10.0.0.9"), 0u);
}

TEST(ProgressDeadlineTest, EachIntervalMustBringTheMinimum) {
  using std::chrono::seconds;
  const ProgressDeadline::Clock::time_point t0{};
  ProgressDeadline progress(t0, seconds(10), /*min_bytes=*/1000);
  EXPECT_EQ(progress.deadline(), t0 + seconds(10));
  progress.Add(600, t0 + seconds(3));  // not enough yet: the deadline stands
  EXPECT_EQ(progress.deadline(), t0 + seconds(10));
  progress.Add(400, t0 + seconds(9));  // the minimum, at 9 s: a new interval from there
  EXPECT_EQ(progress.deadline(), t0 + seconds(19));
  progress.Add(1, t0 + seconds(18));  // a trickle does not move it
  EXPECT_EQ(progress.deadline(), t0 + seconds(19));
  progress.Add(5000, t0 + seconds(20));
  EXPECT_EQ(progress.deadline(), t0 + seconds(30));
}

}  // namespace
}  // namespace podscope::coordinator
