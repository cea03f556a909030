#include "coordinator/clock/collective_refinement.h"

#include <gtest/gtest.h>

namespace podscope::coordinator {
namespace {

using common::TimeNs;

// A worker whose `collectives` AllReduces all truly end at 1 s + k ms, seen through a network
// model that is `error` ns off (its aligned ends are late by `error`).
common::WorkerTrace Worker(int32_t rank, int64_t error, int64_t bound, int collectives = 20) {
  common::WorkerTrace w;
  w.info.rank = rank;
  w.clock = common::ClockModel{1'000'000, 0, 0, bound, common::ClockSource::kNetwork};
  const common::NameId comm = w.strings.Intern("pg0");
  const common::NameId none = w.strings.Intern("");
  common::CollectiveTable& c = w.collectives;
  for (int k = 0; k < collectives; ++k) {
    const TimeNs end =
        1'000'000'000 + k * 1'000'000 - 1'000'000 + error;  // local: aligned - offset
    c.communicator.push_back(comm);
    c.rank.push_back(rank);
    c.nranks.push_back(6);
    c.op.push_back(common::CollectiveOp::kAllReduce);
    c.sequence.push_back(k);
    c.count.push_back(1);
    c.dtype.push_back(none);
    c.bytes.push_back(4);
    c.algorithm.push_back(none);
    c.protocol.push_back(none);
    c.channels.push_back(1);
    c.enqueue.push_back(end - 500'000);
    c.kernel_start.push_back(end - 400'000);
    c.kernel_end.push_back(end);
    c.correlation.push_back(k);
  }
  return w;
}

TEST(CollectiveRefinementTest, DomainsMoveTogetherAroundTheirMean) {
  // Agents a, b, c with network errors 0, +40 us, -10 us; two workers each.
  std::vector<common::WorkerTrace> workers = {
      Worker(0, 0, 50'000),      Worker(1, 0, 50'000),       Worker(2, 40'000, 50'000),
      Worker(3, 40'000, 50'000), Worker(4, -10'000, 50'000), Worker(5, -10'000, 50'000)};
  std::vector<const common::WorkerTrace*> pointers;
  for (const auto& w : workers) pointers.push_back(&w);
  const std::vector<std::string> domains = {"a", "a", "b", "b", "c", "c"};
  std::vector<DomainCorrection> c = RefineWithCollectives(common::CaptureView(pointers), domains);
  ASSERT_EQ(c.size(), 3u);
  // Residuals against each collective's median end: 0, +40, -10 us; their mean, +10 us, stays.
  EXPECT_EQ(c[0].domain, "a");
  EXPECT_TRUE(c[0].applied);
  EXPECT_EQ(c[0].correction_ns, 10'000);
  EXPECT_EQ(c[1].correction_ns, -30'000);
  EXPECT_EQ(c[2].correction_ns, 20'000);
  EXPECT_EQ(c[1].matches, 20u);
  EXPECT_EQ(c[1].spread_ns, 0);
}

TEST(CollectiveRefinementTest, ADomainNoCommonOffsetReconcilesKeepsItsNetworkModel) {
  // b's collectives end 40 us after a's and c's, but its network model and theirs allow at most
  // 20 + 10 us between them: b is dropped and a and c meet halfway.
  std::vector<common::WorkerTrace> workers = {Worker(0, 0, 10'000), Worker(1, 40'000, 20'000),
                                              Worker(2, -10'000, 10'000)};
  std::vector<const common::WorkerTrace*> pointers;
  for (const auto& w : workers) pointers.push_back(&w);
  std::vector<DomainCorrection> c =
      RefineWithCollectives(common::CaptureView(pointers), {"a", "b", "c"});
  EXPECT_TRUE(c[0].applied);
  EXPECT_FALSE(c[1].applied);
  EXPECT_TRUE(c[2].applied);
  EXPECT_EQ(c[0].correction_ns, -5'000);
  EXPECT_EQ(c[2].correction_ns, 5'000);
}

TEST(CollectiveRefinementTest, ALooseBoundMovesAloneWhereTheMeanWouldPushTightOnesPastTheirs) {
  // a and b have tight network bounds (20 us) and c a loose one (250 us), late by 240 us. The
  // mean would move a and b by 80 us, beyond what their network models allow; the pod instead
  // moves the least that keeps them within 20 us, and c takes the rest.
  std::vector<common::WorkerTrace> workers = {Worker(0, 0, 20'000), Worker(1, 0, 20'000),
                                              Worker(2, 240'000, 250'000)};
  std::vector<const common::WorkerTrace*> pointers;
  for (const auto& w : workers) pointers.push_back(&w);
  std::vector<DomainCorrection> c =
      RefineWithCollectives(common::CaptureView(pointers), {"a", "b", "c"});
  for (const DomainCorrection& d : c) EXPECT_TRUE(d.applied) << d.domain;
  EXPECT_EQ(c[0].correction_ns, 20'000);
  EXPECT_EQ(c[1].correction_ns, 20'000);
  EXPECT_EQ(c[2].correction_ns, -220'000);
  // After correction every domain's collectives end together.
  EXPECT_EQ(0 + c[0].correction_ns, 240'000 + c[2].correction_ns);
}

TEST(CollectiveRefinementTest, TooFewSharedCollectivesOrOneDomainChangeNothing) {
  std::vector<common::WorkerTrace> few = {Worker(0, 0, 50'000, 5), Worker(1, 40'000, 50'000, 5)};
  std::vector<const common::WorkerTrace*> pointers = {&few[0], &few[1]};
  for (const DomainCorrection& c : RefineWithCollectives(common::CaptureView(pointers), {"a", "b"}))
    EXPECT_FALSE(c.applied);
  for (const DomainCorrection& c : RefineWithCollectives(common::CaptureView(pointers), {"a", "a"}))
    EXPECT_FALSE(c.applied);
}

}  // namespace
}  // namespace podscope::coordinator
