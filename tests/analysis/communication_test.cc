#include "analysis/communication.h"

#include <gtest/gtest.h>

#include "tests/analysis/hand_trace.h"

namespace podscope::analysis {
namespace {

using podscope::testing::HandTrace;

// Three ranks run AllReduce #5; kernels start at 100, 150, 400 and all end at 600.
common::Capture ThreeRanks() {
  common::Capture capture;
  const TimeNs starts[] = {100, 150, 400};
  for (int r = 0; r < 3; ++r) {
    capture.workers.push_back(
        HandTrace(r, 3)
            .Kernel(starts[r], 600, "ncclKernel_AllReduce", starts[r] - 50, 20)
            .Collective("pg:0", common::CollectiveOp::kAllReduce, 5, 1 << 20, 3, starts[r] - 50)
            .Build());
  }
  return capture;
}

TEST(CommunicationTest, AlignedArrivalsGiveWaitAndTransfer) {
  const common::Capture capture = ThreeRanks();
  const CommunicationReport r =
      ComputeCommunication(common::CaptureView(capture), {.clocks = ClockTrust::kAligned});
  EXPECT_TRUE(r.aligned);
  ASSERT_EQ(r.collectives.size(), 1u);
  const MatchedCollective& m = r.collectives[0];
  EXPECT_EQ(m.sequence, 5);
  ASSERT_EQ(m.participants.size(), 3u);
  EXPECT_EQ(m.participants[0].wait, 300);
  EXPECT_EQ(m.participants[1].wait, 250);
  EXPECT_EQ(m.participants[2].wait, 0);
  for (const Participant& p : m.participants) EXPECT_EQ(p.transfer, 200);
  EXPECT_EQ(r.wait[0][0], 300);
  EXPECT_EQ(r.workers[1].wait_ns, 250);
}

TEST(CommunicationTest, ClockOffsetsAreAppliedBeforeComparingArrivals) {
  common::Capture capture = ThreeRanks();
  // Rank 2's clock runs 200 ns behind: on the aligned clock it arrived at 600 - 200 ... its
  // kernel start 400 maps to 400 + 100 = 500.
  capture.workers[2].clock =
      common::ClockModel{.offset_ns = 100, .source = common::ClockSource::kNetwork};
  const CommunicationReport r =
      ComputeCommunication(common::CaptureView(capture), {.clocks = ClockTrust::kAligned});
  const MatchedCollective& m = r.collectives.at(0);
  EXPECT_EQ(m.participants[0].wait, 400);  // last arrival 500 - 100
  EXPECT_EQ(m.participants[1].wait, 350);
  EXPECT_EQ(m.participants[2].wait, 0);
}

// The clock error bound is stated only where it is known: fitted models give their largest
// bound, one host's clock 0; clocks declared aligned, or not compared, leave it unknown.
TEST(CommunicationTest, TheClockBasisSaysWhetherTheErrorBoundIsKnown) {
  common::Capture capture = ThreeRanks();
  for (int r = 0; r < 3; ++r) capture.workers[r].info.host = "node-" + std::to_string(r);
  CommunicationReport auto_mode = ComputeCommunication(common::CaptureView(capture), {});
  EXPECT_EQ(auto_mode.clock_basis, ClockBasis::kNotCompared);
  EXPECT_FALSE(auto_mode.clock_bound_known());
  CommunicationReport asserted =
      ComputeCommunication(common::CaptureView(capture), {.clocks = ClockTrust::kAligned});
  EXPECT_EQ(asserted.clock_basis, ClockBasis::kAsserted);
  EXPECT_FALSE(asserted.clock_bound_known());
  for (int r = 0; r < 3; ++r) {
    capture.workers[r].clock = common::ClockModel{.error_bound_ns = 1'000 * (r + 1),
                                                  .source = common::ClockSource::kNetwork};
  }
  CommunicationReport fitted = ComputeCommunication(common::CaptureView(capture), {});
  EXPECT_EQ(fitted.clock_basis, ClockBasis::kFittedModels);
  EXPECT_TRUE(fitted.clock_bound_known());
  EXPECT_EQ(fitted.clock_error_bound_ns, 3'000);
  common::Capture one_host = ThreeRanks();
  for (auto& w : one_host.workers) w.info.host = "node-0";
  EXPECT_EQ(ComputeCommunication(common::CaptureView(one_host), {}).clock_basis,
            ClockBasis::kOneHost);
  EXPECT_EQ(ComputeCommunication(common::CaptureView(one_host), {.clocks = ClockTrust::kUnaligned})
                .clock_basis,
            ClockBasis::kNotCompared);
}

TEST(CommunicationTest, FallbackUsesTheShortestDuration) {
  common::Capture capture = ThreeRanks();
  capture.workers[2].clock = common::ClockModel{.offset_ns = 100'000};  // untrusted
  const CommunicationReport r = ComputeCommunication(common::CaptureView(capture), {});
  EXPECT_FALSE(r.aligned);
  const MatchedCollective& m = r.collectives.at(0);
  EXPECT_EQ(m.participants[0].wait, 500 - 200);
  EXPECT_EQ(m.participants[1].wait, 450 - 200);
  EXPECT_EQ(m.participants[2].wait, 0);
  for (const Participant& p : m.participants) EXPECT_EQ(p.transfer, 200);
}

TEST(CommunicationTest, WithoutSequenceNumbersCollectivesMatchByOrder) {
  common::Capture capture;
  for (int r = 0; r < 2; ++r) {
    HandTrace t(r, 2);
    for (int i = 0; i < 3; ++i) {
      const TimeNs s = 1000 * i + 10 * r;
      t.Kernel(s, s + 500, "ncclKernel_AllReduce", s - 5, 20)
          .Collective("stream:0:20", common::CollectiveOp::kAllReduce, common::kUnknownSequence, 64,
                      2, s - 5);
    }
    capture.workers.push_back(t.Build());
  }
  const CommunicationReport r =
      ComputeCommunication(common::CaptureView(capture), {.clocks = ClockTrust::kAligned});
  ASSERT_EQ(r.collectives.size(), 3u);
  for (const MatchedCollective& m : r.collectives) {
    ASSERT_EQ(m.participants.size(), 2u);
    EXPECT_EQ(m.participants[0].wait, 10);
    EXPECT_EQ(m.participants[1].wait, 0);
  }
}

}  // namespace
}  // namespace podscope::analysis
