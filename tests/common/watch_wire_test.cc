#include "common/watch_wire.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace podscope::common {
namespace {

using ::testing::HasSubstr;

StepSummary EightBuckets(int32_t rank, int64_t step) {
  StepSummary s;
  s.rank = rank;
  s.step = step;
  s.start_ns = 1'700'000'000'000'000'000 + step * 100'000'000;
  s.end_ns = s.start_ns + 97'654'321;
  s.comm_kernel_ns = 30'000'000;
  for (int b = 0; b < 8; ++b) {
    CollectiveArrival a;
    a.communicator = 0x9e3779b97f4a7c15ull;
    a.sequence = step * 8 + b;
    a.op = CollectiveOp::kAllReduce;
    a.nranks = 1024;
    a.bytes = 250'000'000;
    a.enqueue_ns = s.start_ns + 30'000'000 + b * 7'000'000;
    a.start_ns = a.enqueue_ns + 1'234'567;
    a.end_ns = a.start_ns + 4'400'000;
    s.collectives.push_back(a);
  }
  return s;
}

bool Same(const StepSummary& a, const StepSummary& b) {
  if (a.rank != b.rank || a.step != b.step || a.start_ns != b.start_ns || a.end_ns != b.end_ns ||
      a.comm_kernel_ns != b.comm_kernel_ns || a.collectives.size() != b.collectives.size()) {
    return false;
  }
  for (size_t i = 0; i < a.collectives.size(); ++i) {
    const CollectiveArrival &x = a.collectives[i], &y = b.collectives[i];
    if (x.communicator != y.communicator || x.sequence != y.sequence || x.op != y.op ||
        x.nranks != y.nranks || x.bytes != y.bytes || x.enqueue_ns != y.enqueue_ns ||
        x.start_ns != y.start_ns || x.end_ns != y.end_ns) {
      return false;
    }
  }
  return true;
}

TEST(WatchWireTest, RoundTripsStepsAndProgressOfSeveralJobs) {
  WatchBatchBuilder builder;
  builder.Add("llama", EightBuckets(3, 41));
  builder.Add("bert", EightBuckets(0, 7));
  RankProgress p;
  p.rank = 3;
  p.communicator = 0x9e3779b97f4a7c15ull;
  p.nranks = 1024;
  p.entered_sequence = 42 * 8;
  p.entered_ns = 5;
  p.entered_op = CollectiveOp::kAllGather;
  p.entered_bytes = 77;
  p.completed_sequence = 42 * 8 - 1;
  p.completed_ns = 4;
  builder.Add("llama", p);
  v1::WatchBatch batch = builder.Take();
  EXPECT_TRUE(builder.empty()) << "Take starts over";
  EXPECT_EQ(batch.jobs_size(), 2);
  EXPECT_EQ(batch.communicators_size(), 1) << "one table entry however often it is named";
  std::string wire;
  ASSERT_TRUE(batch.SerializeToString(&wire));
  v1::WatchBatch parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  absl::StatusOr<DecodedWatch> d = DecodeWatchBatch(parsed);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->steps.size(), 2u);
  EXPECT_EQ(d->steps[0].first, "llama");
  EXPECT_TRUE(Same(d->steps[0].second, EightBuckets(3, 41)));
  EXPECT_EQ(d->steps[1].first, "bert");
  EXPECT_TRUE(Same(d->steps[1].second, EightBuckets(0, 7)));
  ASSERT_EQ(d->progress.size(), 1u);
  EXPECT_EQ(d->progress[0].first, "llama");
  EXPECT_EQ(d->progress[0].second.entered_op, CollectiveOp::kAllGather);
  EXPECT_EQ(d->progress[0].second.completed_sequence, 42 * 8 - 1);
}

// Watch data is small by design (docs/watch.md): a step of 8 AllReduce buckets, in a batch of a
// node's 8 ranks, costs under 300 bytes per rank.
TEST(WatchWireTest, AStepOfEightBucketsIsUnder300Bytes) {
  WatchBatchBuilder builder;
  for (int32_t r = 0; r < 8; ++r) builder.Add("llama-70b-pretrain", EightBuckets(r, 123'456));
  const size_t bytes = builder.Take().ByteSizeLong();
  EXPECT_LT(bytes / 8, 300u) << bytes << " bytes for 8 ranks";
}

TEST(WatchWireTest, RefusesIndexesOutsideItsTablesAndBrokenBounds) {
  WatchBatchBuilder builder;
  builder.Add("job", EightBuckets(0, 1));
  const v1::WatchBatch good = builder.Take();

  v1::WatchBatch b = good;
  b.mutable_steps(0)->set_job(5);
  EXPECT_THAT(std::string(DecodeWatchBatch(b).status().message()), HasSubstr("names job #5 of 1"));
  b = good;
  b.mutable_steps(0)->mutable_collectives(2)->set_communicator(9);
  EXPECT_THAT(std::string(DecodeWatchBatch(b).status().message()),
              HasSubstr("names communicator #9 of 1"));
  b = good;
  b.mutable_steps(0)->mutable_collectives(0)->set_op(200);
  EXPECT_THAT(std::string(DecodeWatchBatch(b).status().message()), HasSubstr("has op 200"));
  b = good;
  b.mutable_steps(0)->set_duration_ns(-1);
  EXPECT_THAT(std::string(DecodeWatchBatch(b).status().message()),
              HasSubstr("less than 0 or more than a day"));
  // Times an attacker picks to overflow the arithmetic of decoding or of clock conversion.
  b = good;
  b.mutable_steps(0)->set_start_ns(INT64_MAX);
  EXPECT_THAT(std::string(DecodeWatchBatch(b).status().message()),
              HasSubstr("starts outside [0, 2^62) ns"));
  b = good;
  b.mutable_steps(0)->set_start_ns(-1);
  EXPECT_THAT(std::string(DecodeWatchBatch(b).status().message()), HasSubstr("starts outside"));
  b = good;
  b.mutable_steps(0)->set_duration_ns(INT64_MAX);
  EXPECT_THAT(std::string(DecodeWatchBatch(b).status().message()), HasSubstr("more than a day"));
  b = good;
  b.mutable_steps(0)->mutable_collectives(1)->set_end_delta_ns(INT64_MIN);
  EXPECT_THAT(std::string(DecodeWatchBatch(b).status().message()),
              HasSubstr("more than a day from its step"));
  {
    WatchBatchBuilder with_progress;
    RankProgress p;
    p.entered_sequence = 3;
    p.entered_ns = INT64_MIN;
    with_progress.Add("job", p);
    EXPECT_THAT(std::string(DecodeWatchBatch(with_progress.Take()).status().message()),
                HasSubstr("time outside [0, 2^62) ns"));
  }
  b = good;
  b.set_jobs(0, std::string(200, 'j'));
  EXPECT_THAT(std::string(DecodeWatchBatch(b).status().message()),
              HasSubstr("longer than 128 bytes"));
  WatchWireLimits tight;
  tight.max_collectives_per_step = 4;
  EXPECT_THAT(std::string(DecodeWatchBatch(good, tight).status().message()),
              HasSubstr("more than 4 collectives"));
  tight = {};
  tight.max_steps = 0;
  EXPECT_THAT(std::string(DecodeWatchBatch(good, tight).status().message()),
              HasSubstr("more than 0 steps"));
}

// Every time moves by the agent's model (offset 1 ms, no drift here); a progress record's times
// that mean "none yet" stay as they are.
TEST(WatchWireTest, AlignWatchMovesEveryTimeOntoTheCoordinatorsClock) {
  WatchBatchBuilder builder;
  builder.Add("job", EightBuckets(2, 9));
  RankProgress entered_only;
  entered_only.entered_sequence = 80;
  entered_only.entered_ns = 1'000;
  builder.Add("job", entered_only);
  absl::StatusOr<DecodedWatch> d = DecodeWatchBatch(builder.Take());
  ASSERT_TRUE(d.ok()) << d.status();
  ClockModel model;
  model.offset_ns = 1'000'000;
  AlignWatch(model, &*d);
  const StepSummary want = EightBuckets(2, 9);
  const StepSummary& got = d->steps[0].second;
  EXPECT_EQ(got.start_ns, want.start_ns + 1'000'000);
  EXPECT_EQ(got.end_ns, want.end_ns + 1'000'000);
  EXPECT_EQ(got.comm_kernel_ns, want.comm_kernel_ns) << "a duration does not move";
  for (size_t i = 0; i < want.collectives.size(); ++i) {
    EXPECT_EQ(got.collectives[i].enqueue_ns, want.collectives[i].enqueue_ns + 1'000'000);
    EXPECT_EQ(got.collectives[i].start_ns, want.collectives[i].start_ns + 1'000'000);
    EXPECT_EQ(got.collectives[i].end_ns, want.collectives[i].end_ns + 1'000'000);
  }
  EXPECT_EQ(d->progress[0].second.entered_ns, 1'001'000);
  EXPECT_EQ(d->progress[0].second.completed_ns, 0) << "nothing completed: no time to move";
}

// [0,10] and [5,15] overlap for 5; [20,25] stands alone: 15 + 5 covered, in any order.
TEST(WatchSummaryTest, CommunicationKernelTimeIsTheUnionOfTheKernels) {
  std::vector<CollectiveArrival> c(3);
  c[0].start_ns = 20, c[0].end_ns = 25;
  c[1].start_ns = 0, c[1].end_ns = 10;
  c[2].start_ns = 5, c[2].end_ns = 15;
  EXPECT_EQ(CommunicationKernelTime(c), 20);
  EXPECT_EQ(CommunicationKernelTime({}), 0);
}

}  // namespace
}  // namespace podscope::common
