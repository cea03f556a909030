#include "agent/watch/watch_queue.h"

#include <gtest/gtest.h>

#include "common/watch_wire.h"

namespace podscope::agent {
namespace {

common::StepSummary Step(int32_t rank, int64_t step) {
  common::StepSummary s;
  s.rank = rank;
  s.step = step;
  s.start_ns = 1'000'000'000 * step;
  s.end_ns = s.start_ns + 500;
  return s;
}

common::RankProgress Progress(int32_t rank, int64_t entered) {
  common::RankProgress p;
  p.rank = rank;
  p.communicator = 77;
  p.nranks = 4;
  p.entered_sequence = entered;
  p.entered_ns = 10 + entered;
  return p;
}

TEST(WatchQueueTest, BatchesInOrderUpToTheirSizeAndKeepTheRest) {
  WatchQueue queue;
  for (int64_t s = 0; s < 5; ++s) queue.Step("j", Step(1, s));
  v1::WatchBatch first = queue.Take("agent-1", 3);
  EXPECT_EQ(first.agent_id(), "agent-1");
  ASSERT_EQ(first.steps_size(), 3);
  EXPECT_EQ(first.steps(0).step(), 0);
  EXPECT_EQ(first.steps(2).step(), 2);
  EXPECT_EQ(queue.queued_steps(), 2u);
  v1::WatchBatch second = queue.Take("agent-1", 3);
  ASSERT_EQ(second.steps_size(), 2);
  EXPECT_EQ(second.steps(0).step(), 3);
  const v1::WatchBatch empty = queue.Take("agent-1", 3);
  EXPECT_EQ(empty.steps_size() + empty.progress_size(), 0);
  EXPECT_TRUE(empty.agent_id().empty()) << "an empty batch is not sent";
  absl::StatusOr<common::DecodedWatch> decoded = common::DecodeWatchBatch(second);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->steps[1].second.step, 4);
  EXPECT_EQ(decoded->steps[1].first, "j");
}

// Full: the oldest go, and the count travels in every batch so the coordinator can say so.
TEST(WatchQueueTest, AFullQueueDropsTheOldestAndCountsThem) {
  WatchQueue queue({.max_steps = 4, .max_progress = 8});
  for (int64_t s = 0; s < 10; ++s) queue.Step("j", Step(0, s));
  EXPECT_EQ(queue.queued_steps(), 4u);
  EXPECT_EQ(queue.counters().pushed_steps, 10u);
  EXPECT_EQ(queue.counters().dropped_steps, 6u);
  v1::WatchBatch batch = queue.Take("a", 100);
  ASSERT_EQ(batch.steps_size(), 4);
  EXPECT_EQ(batch.steps(0).step(), 6) << "the newest four stay";
  EXPECT_EQ(batch.dropped_steps(), 6u);
  // A batch the stream broke under is lost, and counted with the rest.
  queue.Lost(batch);
  EXPECT_EQ(queue.counters().dropped_steps, 10u);
  queue.Step("j", Step(0, 11));
  EXPECT_EQ(queue.Take("a", 100).dropped_steps(), 10u);
}

// Progress supersedes itself: one record per (job, rank, communicator), the newest, within a bound.
TEST(WatchQueueTest, ProgressKeepsTheNewestPerRankWithinItsBound) {
  WatchQueue queue({.max_steps = 4, .max_progress = 2});
  queue.Progress("j", Progress(0, 5));
  queue.Progress("j", Progress(0, 6));
  queue.Progress("j", Progress(1, 6));
  queue.Progress("j", Progress(2, 6));  // a third key: over the bound
  EXPECT_EQ(queue.counters().dropped_progress, 1u);
  v1::WatchBatch batch = queue.Take("a", 10);
  ASSERT_EQ(batch.progress_size(), 2);
  EXPECT_EQ(batch.progress(0).rank(), 0);
  EXPECT_EQ(batch.progress(0).entered_sequence(), 6);
  EXPECT_EQ(queue.Take("a", 10).progress_size(), 0) << "sent once";
}

TEST(WatchQueueTest, ANoRoomQueueDropsEverything) {
  WatchQueue queue({.max_steps = 0, .max_progress = 0});
  queue.Step("j", Step(0, 1));
  queue.Progress("j", Progress(0, 1));
  EXPECT_EQ(queue.counters().dropped_steps, 1u);
  EXPECT_EQ(queue.counters().dropped_progress, 1u);
  EXPECT_EQ(queue.Take("a", 10).steps_size(), 0);
}

}  // namespace
}  // namespace podscope::agent
