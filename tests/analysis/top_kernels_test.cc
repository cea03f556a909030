#include "analysis/top_kernels.h"

#include <gtest/gtest.h>

#include "tests/analysis/hand_trace.h"

namespace podscope::analysis {
namespace {

using podscope::testing::HandTrace;

TEST(TopKernelsTest, PerWorkerAndPodWide) {
  common::Capture capture;
  capture.workers.push_back(
      HandTrace(0).Kernel(0, 10, "a").Kernel(10, 40, "a").Kernel(50, 60, "b").Build());
  capture.workers.push_back(HandTrace(1).Kernel(0, 100, "b").Build());
  const KernelReport r = ComputeTopKernels(common::CaptureView(capture));
  ASSERT_EQ(r.workers.size(), 2u);
  const KernelStats& a = r.workers[0].top[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.count, 2u);
  EXPECT_EQ(a.total_ns, 40);
  EXPECT_EQ(a.mean_ns(), 20);
  EXPECT_EQ(a.min_ns, 10);
  EXPECT_EQ(a.max_ns, 30);
  EXPECT_DOUBLE_EQ(a.share, 0.8);
  ASSERT_EQ(r.pod.size(), 2u);
  EXPECT_EQ(r.pod[0].name, "b");
  EXPECT_EQ(r.pod[0].total_ns, 110);
  EXPECT_EQ(r.pod[0].count, 2u);
  EXPECT_EQ(r.pod[0].min_ns, 10);
  EXPECT_DOUBLE_EQ(r.pod[0].share, 110.0 / 150.0);
  EXPECT_EQ(ComputeTopKernels(common::CaptureView(capture), 1).pod.size(), 1u);
}

}  // namespace
}  // namespace podscope::analysis
