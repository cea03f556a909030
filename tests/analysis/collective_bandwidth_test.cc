#include "analysis/collective_bandwidth.h"

#include <gtest/gtest.h>

#include "tests/analysis/hand_trace.h"

namespace podscope::analysis {
namespace {

using podscope::testing::HandTrace;

TEST(CollectiveBandwidthTest, BusBandwidthFactors) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(common::CollectiveOp::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(common::CollectiveOp::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(common::CollectiveOp::kReduceScatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(common::CollectiveOp::kBroadcast, 8), 1.0);
}

TEST(CollectiveBandwidthTest, HandComputedAllReduce) {
  // 2 ranks, one 1 GB AllReduce in step 3. Rank 0 starts at 0, rank 1 at 10 ms; both end at
  // 110 ms, so each transfers for 100 ms: algbw = 1e9 B / 0.1 s = 10 GB/s, busbw = 10 GB/s
  // (factor 2*(2-1)/2 = 1). Link 25 GB/s -> efficiency 0.4.
  common::Capture capture;
  for (int r = 0; r < 2; ++r) {
    const TimeNs start = r * 10'000'000;
    capture.workers.push_back(
        HandTrace(r, 2)
            .Step(3, 0, 200'000'000)
            .Kernel(start, 110'000'000, "ncclKernel_AllReduce", start, 20)
            .Collective("pg:0", common::CollectiveOp::kAllReduce, 0, 1'000'000'000, 2, start)
            .Build());
  }
  const common::CaptureView view(capture);
  const CommunicationReport comm = ComputeCommunication(view, {.clocks = ClockTrust::kAligned});
  const BandwidthReport r =
      ComputeBandwidth(view, FindAllSteps(view), comm,
                       {.link_gbytes_per_s = 25, .params = 250'000'000, .bytes_per_param = 4});
  ASSERT_EQ(r.collectives.size(), 1u);
  const CollectiveBandwidth& c = r.collectives[0];
  EXPECT_EQ(c.step, 3);
  EXPECT_EQ(c.transfer_ns, 100'000'000);
  EXPECT_DOUBLE_EQ(c.algbw_gbytes_per_s, 10.0);
  EXPECT_DOUBLE_EQ(c.busbw_gbytes_per_s, 10.0);
  EXPECT_DOUBLE_EQ(c.efficiency, 0.4);
  ASSERT_EQ(r.steps.size(), 1u);
  EXPECT_EQ(r.steps[0].allreduce_bytes, 1'000'000'000);
  EXPECT_EQ(r.measured_allreduce_ns, 100'000'000);
  // 250M params x 4 B = 1 GB; a 2-rank ring puts 1 GB on the link: 1e9 / 25e9 s = 40 ms.
  ASSERT_TRUE(r.expected_allreduce_ns.has_value());
  EXPECT_EQ(*r.expected_allreduce_ns, 40'000'000);
}

}  // namespace
}  // namespace podscope::analysis
