#include "agent/collectors/simulated_ranks.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "common/time_source.h"

namespace podscope::agent {
namespace {

constexpr TimeNs kSegment = SimulatedRanksCollector::kSegmentNs;

TEST(SimulationSpecTest, ParsesEveryKey) {
  absl::StatusOr<SimulationSpec> spec = ParseSimulationSpec(
      "ranks=8-15, "
      "world=32,job=llm,seed=9,straggler=13:1.3,straggler=2:4:input,clock-offset-ms=-12.5,drift-"
      "ppm=40,profile=light");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->first_rank, 8);
  EXPECT_EQ(spec->last_rank, 15);
  EXPECT_EQ(spec->world, 32);
  EXPECT_EQ(spec->job, "llm");
  EXPECT_EQ(spec->seed, 9u);
  ASSERT_EQ(spec->stragglers.size(), 2u);
  EXPECT_EQ(spec->stragglers[1].kind, sim::SlowdownKind::kInput);
  EXPECT_DOUBLE_EQ(spec->clock_offset_ms, -12.5);
  EXPECT_DOUBLE_EQ(spec->drift_ppm, 40);
  EXPECT_EQ(spec->profile, "light");
}

TEST(SimulationSpecTest, WorldDefaultsToTheRanksServed) {
  absl::StatusOr<SimulationSpec> spec = ParseSimulationSpec("ranks=3");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->first_rank, 3);
  EXPECT_EQ(spec->last_rank, 3);
  EXPECT_EQ(spec->world, 4);
}

TEST(SimulationSpecTest, BadSpecsNameTheProblem) {
  auto message = [](std::string_view text) {
    return std::string(ParseSimulationSpec(text).status().message());
  };
  EXPECT_NE(message("ranks=0-7,world=4").find("do not fit in world=4"), std::string::npos);
  EXPECT_NE(message("ranks=7-3").find("FIRST <= LAST"), std::string::npos);
  EXPECT_NE(message("color=red").find("unknown key \"color\""), std::string::npos);
  EXPECT_NE(message("straggler=40:2,world=8").find("not below world=8"), std::string::npos);
  EXPECT_NE(message("straggler=x").find("straggler=x"), std::string::npos);
  EXPECT_NE(message("drift-ppm=9000").find("ppm"), std::string::npos);
  EXPECT_NE(message("ranks").find("KEY=VALUE"), std::string::npos);
}

SimulationSpec Spec(int32_t first, int32_t last) {
  SimulationSpec s;
  s.first_rank = first;
  s.last_rank = last;
  s.world = 8;
  s.job = "t";
  s.seed = 5;
  s.profile = "light";
  return s;
}

TEST(SimulatedRanksTest, RanksOnDifferentAgentsShareOneJob) {
  // Two agents, each with its own skewed clock, serve halves of one job.
  const AgentClock clock_a(20'000'000, 30, 1'795'000'000'000'000'000);
  const AgentClock clock_b(-45'000'000, -10, 1'795'000'000'000'000'000);
  SimulatedRanksCollector a(Spec(0, 3), "node-a", clock_a);
  SimulatedRanksCollector b(Spec(4, 7), "node-b", clock_b);
  // A window crossing a segment boundary.
  const TimeNs begin = 448'750'000LL * kSegment - 700'000'000, end = begin + 1'400'000'000;
  ASSERT_NE(begin / kSegment, end / kSegment);
  std::vector<common::WorkerTrace> r0 = a.EventsBetween(0, begin, end);
  std::vector<common::WorkerTrace> r5 = b.EventsBetween(5, begin, end);
  ASSERT_EQ(r0.size(), 2u);  // one piece per segment
  ASSERT_EQ(r5.size(), 2u);
  std::map<int64_t, TimeNs> end_of_r0;  // collective sequence -> kernel end on true time
  std::set<int64_t> steps;
  int64_t previous_piece_last_step = -1;
  for (const common::WorkerTrace& piece : r0) {
    // Step numbers continue from one segment to the next.
    ASSERT_FALSE(piece.steps.number.empty());
    EXPECT_GT(piece.steps.number.front(), previous_piece_last_step);
    previous_piece_last_step = piece.steps.number.back();
    EXPECT_EQ(piece.info.host, "node-a");
    EXPECT_EQ(piece.info.rank, 0);
    for (TimeNs t : piece.kernels.start) {
      EXPECT_GE(clock_a.ToHost(t), begin);
    }
    for (TimeNs t : piece.kernels.end) {
      EXPECT_LE(clock_a.ToHost(t), end);
    }
    for (size_t i = 0; i < piece.collectives.size(); ++i) {
      end_of_r0[piece.collectives.sequence[i]] = clock_a.ToHost(piece.collectives.kernel_end[i]);
    }
    for (int64_t n : piece.steps.number)
      EXPECT_TRUE(steps.insert(n).second) << "step " << n << " twice";
  }
  ASSERT_GT(end_of_r0.size(), 4u);
  ASSERT_GT(steps.size(), 5u);
  // Collectives couple ranks across agents: the same collective ends together on true time.
  size_t matched = 0;
  for (const common::WorkerTrace& piece : r5) {
    for (size_t i = 0; i < piece.collectives.size(); ++i) {
      auto it = end_of_r0.find(piece.collectives.sequence[i]);
      if (it == end_of_r0.end()) continue;
      ++matched;
      EXPECT_NEAR(clock_b.ToHost(piece.collectives.kernel_end[i]), it->second, 1'000);
    }
  }
  EXPECT_GT(matched, end_of_r0.size() / 2);
}

TEST(SimulatedRanksTest, CaptureLifecycleAndLimits) {
  common::SimulatedTimeSource time(common::HostNowNs());
  const AgentClock clock(5'000'000, 0, 0, time);
  SimulatedRanksCollector c(Spec(0, 1), "n", clock);
  EXPECT_EQ(c.Workers().size(), 2u);
  EXPECT_EQ(c.Workers()[1].rank, 1);
  EXPECT_FALSE(c.Arm({"x", {5}, 0, 1, 0}).ok());  // not served here
  ASSERT_TRUE(c.Arm({"cap", {0, 1}, 0, 0, /*max_events_per_worker=*/10}).ok());
  EXPECT_EQ(c.Arm({"cap", {0}, 0, 0, 0}).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(c.Drain("cap", 0).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(c.Start("cap").ok());
  time.AdvanceBy(400'000'000);
  ASSERT_TRUE(c.Stop("cap").ok());
  absl::StatusOr<CollectedWorker> w = c.Drain("cap", 1);
  ASSERT_TRUE(w.ok());
  EXPECT_GT(w->actual_stop_ns - w->actual_start_ns, 399'000'000);
  // 400 ms of a training step holds far more than 10 events: the worker is over its limit.
  EXPECT_FALSE(w->error.empty());
  EXPECT_GT(w->dropped_events, 0u);
  for (const common::WorkerTrace& piece : w->pieces) {
    for (TimeNs t : piece.runtime_calls.start) EXPECT_GE(t, w->actual_start_ns);
    for (TimeNs t : piece.runtime_calls.end) EXPECT_LE(t, w->actual_stop_ns);
  }
  EXPECT_EQ(c.Drain("cap", 3).status().code(), absl::StatusCode::kInvalidArgument);
  c.Forget("cap");
  EXPECT_EQ(c.Drain("cap", 1).status().code(), absl::StatusCode::kNotFound);
}

// Every event of a worker, as comparable rows: (table, start, end).
std::multiset<std::tuple<int, TimeNs, TimeNs>> Rows(
    const std::vector<common::WorkerTrace>& pieces) {
  std::multiset<std::tuple<int, TimeNs, TimeNs>> rows;
  for (const common::WorkerTrace& p : pieces) {
    for (size_t i = 0; i < p.kernels.size(); ++i)
      rows.emplace(0, p.kernels.start[i], p.kernels.end[i]);
    for (size_t i = 0; i < p.runtime_calls.size(); ++i)
      rows.emplace(1, p.runtime_calls.start[i], p.runtime_calls.end[i]);
    for (size_t i = 0; i < p.memcpys.size(); ++i)
      rows.emplace(2, p.memcpys.start[i], p.memcpys.end[i]);
    for (size_t i = 0; i < p.host_spans.size(); ++i)
      rows.emplace(3, p.host_spans.start[i], p.host_spans.end[i]);
    for (size_t i = 0; i < p.collectives.size(); ++i)
      rows.emplace(4, p.collectives.enqueue[i], p.collectives.kernel_end[i]);
    for (size_t i = 0; i < p.steps.size(); ++i) rows.emplace(5, p.steps.start[i], p.steps.end[i]);
  }
  return rows;
}

TEST(SimulatedRanksTest, WhatIsTakenWhileTheWindowRunsAndTheDrainTogetherAreTheWindow) {
  // Two captures of the same window, one taken every 300 ms as it runs (across a segment
  // boundary) and one drained at the end, hand over the same events, each once.
  common::SimulatedTimeSource time(448'750'000LL * kSegment - 700'000'000);
  const AgentClock clock(5'000'000, 20, 0, time);
  SimulatedRanksCollector c(Spec(0, 1), "n", clock);
  ASSERT_TRUE(c.Arm({"streamed", {1}, 0, 0, 0}).ok());
  ASSERT_TRUE(c.Arm({"whole", {1}, 0, 0, 0}).ok());
  EXPECT_TRUE(c.TakeRecorded("streamed", 1)->empty());  // not started: nothing recorded
  ASSERT_TRUE(c.Start("streamed").ok());
  ASSERT_TRUE(c.Start("whole").ok());
  std::vector<common::WorkerTrace> taken;
  size_t takes_with_events = 0;
  for (int i = 0; i < 5; ++i) {
    time.AdvanceBy(300'000'000);
    absl::StatusOr<std::vector<common::WorkerTrace>> more = c.TakeRecorded("streamed", 1);
    ASSERT_TRUE(more.ok()) << more.status();
    takes_with_events += !Rows(*more).empty();
    for (common::WorkerTrace& p : *more) {
      EXPECT_EQ(p.info.rank, 1);
      EXPECT_EQ(p.info.host, "n");
      // Only what has ended by now on the agent's clock.
      for (TimeNs t : p.kernels.end) EXPECT_LE(t, clock.Now());
      taken.push_back(std::move(p));
    }
  }
  time.AdvanceBy(200'000'000);
  ASSERT_TRUE(c.Stop("streamed").ok());
  ASSERT_TRUE(c.Stop("whole").ok());
  EXPECT_TRUE(c.TakeRecorded("streamed", 1)->empty());  // stopped: the rest is Drain's
  absl::StatusOr<CollectedWorker> rest = c.Drain("streamed", 1);
  absl::StatusOr<CollectedWorker> whole = c.Drain("whole", 1);
  ASSERT_TRUE(rest.ok() && whole.ok());
  EXPECT_EQ(takes_with_events, 5u);
  const auto streamed_rows = Rows(taken), rest_rows = Rows(rest->pieces);
  std::multiset<std::tuple<int, TimeNs, TimeNs>> together = streamed_rows;
  together.insert(rest_rows.begin(), rest_rows.end());
  EXPECT_GT(streamed_rows.size(), 4 * rest_rows.size());
  EXPECT_EQ(together, Rows(whole->pieces));
  EXPECT_EQ(c.TakeRecorded("streamed", 7).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.TakeRecorded("none", 1).status().code(), absl::StatusCode::kNotFound);
}

TEST(SimulatedRanksTest, TheEventLimitCountsWhatWasTakenEarly) {
  common::SimulatedTimeSource time(common::HostNowNs());
  const AgentClock clock(time);
  SimulatedRanksCollector c(Spec(0, 0), "n", clock);
  ASSERT_TRUE(c.Arm({"cap", {0}, 0, 0, /*max_events_per_worker=*/10}).ok());
  ASSERT_TRUE(c.Start("cap").ok());
  time.AdvanceBy(400'000'000);
  absl::StatusOr<std::vector<common::WorkerTrace>> taken = c.TakeRecorded("cap", 0);
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(taken.status().message().find("exceed the limit of 10 per worker"), std::string::npos);
}

}  // namespace
}  // namespace podscope::agent

namespace podscope::agent {
namespace {

TEST(SimulatedRanksTest, SimWorldServesManyRanksFromASmallerJob) {
  absl::StatusOr<SimulationSpec> spec =
      ParseSimulationSpec("ranks=40-41,world=64,sim-world=32,profile=light,seed=3");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->sim_world, 32);
  EXPECT_FALSE(
      ParseSimulationSpec("world=64,sim-world=8,straggler=9:2").ok());  // beyond the simulated job
  const AgentClock clock;
  SimulatedRanksCollector big(*spec, "n", clock);
  SimulationSpec small_spec = *spec;
  small_spec.world = 32;
  small_spec.sim_world = 0;
  small_spec.first_rank = small_spec.last_rank = 8;
  SimulatedRanksCollector small(small_spec, "n", clock);
  const TimeNs begin = 448'750'000LL * SimulatedRanksCollector::kSegmentNs + 500'000'000,
               end = begin + 500'000'000;
  std::vector<common::WorkerTrace> served = big.EventsBetween(40, begin, end);
  std::vector<common::WorkerTrace> original = small.EventsBetween(8, begin, end);
  ASSERT_EQ(served.size(), 1u);
  ASSERT_EQ(original.size(), 1u);
  EXPECT_EQ(served[0].info.rank, 40);
  EXPECT_EQ(served[0].info.world_size, 64);
  EXPECT_EQ(served[0].kernels.start, original[0].kernels.start);  // rank 40 runs rank 8's timeline
}

}  // namespace
}  // namespace podscope::agent

namespace podscope::agent {
namespace {

TEST(SimulationSpecTest, StragglerAtAndHangTakeUnixTimes) {
  absl::StatusOr<SimulationSpec> spec = ParseSimulationSpec(
      "world=8,straggler=3:1.05,straggler=5:2:input,straggler-at=1800000000-1800000012.5,hang=2@"
      "1800000100");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->stragglers.size(), 2u);
  for (const sim::Slowdown& s : spec->stragglers) {
    EXPECT_EQ(s.from_ns, 1'800'000'000'000'000'000);
    EXPECT_EQ(s.until_ns, 1'800'000'012'500'000'000);
  }
  EXPECT_EQ(spec->hang.rank, 2);
  EXPECT_EQ(spec->hang.at_ns, 1'800'000'100'000'000'000);
  // Without straggler-at a straggler is slow throughout; without an end, from T0 on.
  absl::StatusOr<SimulationSpec> always = ParseSimulationSpec("world=8,straggler=3:1.05");
  ASSERT_TRUE(always.ok());
  EXPECT_EQ(always->stragglers[0].from_ns, INT64_MIN);
  EXPECT_EQ(always->stragglers[0].until_ns, INT64_MAX);
  absl::StatusOr<SimulationSpec> open =
      ParseSimulationSpec("straggler-at=1800000000,world=8,straggler=3:1.05");
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(open->stragglers[0].from_ns, 1'800'000'000'000'000'000);
  EXPECT_EQ(open->stragglers[0].until_ns, INT64_MAX);

  auto message = [](std::string_view text) {
    return std::string(ParseSimulationSpec(text).status().message());
  };
  EXPECT_NE(message("straggler-at=1800000010-1800000005").find("T1 must be after T0"),
            std::string::npos);
  EXPECT_NE(message("straggler-at=soon").find("Unix seconds"), std::string::npos);
  EXPECT_NE(message("straggler-at=-5").find("Unix seconds"), std::string::npos);
  EXPECT_NE(message("hang=2").find("RANK@T"), std::string::npos);
  EXPECT_NE(message("hang=x@1800000000").find("RANK@T"), std::string::npos);
  EXPECT_NE(message("world=8,hang=9@1800000000").find("hang rank 9 is not below world=8"),
            std::string::npos);
}

// What a WatchSink receives, for tests.
class RecordingSink : public WatchSink {
 public:
  void Step(std::string_view job, const common::StepSummary& step) override {
    absl::MutexLock lock(&mu_);
    EXPECT_EQ(job, "t");
    steps_[step.rank].push_back(step);
  }
  void Progress(std::string_view job, const common::RankProgress& progress) override {
    absl::MutexLock lock(&mu_);
    progress_[progress.rank] = progress;
  }
  // Waits (up to 60 s) until `pred` holds over what was received.
  template <typename Pred>
  bool WaitFor(Pred pred) {
    absl::MutexLock lock(&mu_);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pred(steps_, progress_); };
    return mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(60));
  }
  std::map<int32_t, std::vector<common::StepSummary>> steps() {
    absl::MutexLock lock(&mu_);
    return steps_;
  }
  std::map<int32_t, common::RankProgress> progress() {
    absl::MutexLock lock(&mu_);
    return progress_;
  }

 private:
  absl::Mutex mu_;
  std::map<int32_t, std::vector<common::StepSummary>> steps_ ABSL_GUARDED_BY(mu_);
  std::map<int32_t, common::RankProgress> progress_ ABSL_GUARDED_BY(mu_);
};

// Watch data runs on the same timeline as captures: consecutive step numbers from the
// segment's first, every rank's step summarised once its end has passed on true time, times on
// the agent's skewed clock, one collective sequence shared by every rank.
TEST(SimulatedRanksTest, WatchDataFollowsTheJobsTimelineOnTheAgentsClock) {
  const AgentClock clock(7'000'000, 0, 0);
  SimulationSpec spec = Spec(2, 5);
  SimulatedRanksCollector collector(spec, "node", clock);
  RecordingSink sink;
  const int64_t first_segment = HostNowNs() / kSegment;
  collector.StartWatch(&sink);
  const bool enough = sink.WaitFor([](const auto& steps, const auto&) {
    if (steps.size() < 4) return false;
    for (const auto& [rank, list] : steps) {
      if (list.size() < 12) return false;
    }
    return true;
  });
  const TimeNs stopped_at = clock.Now();
  collector.StopWatch();
  ASSERT_TRUE(enough) << "no watch data within 60 s";
  const auto steps = sink.steps();
  EXPECT_EQ(steps.size(), 4u) << "ranks 2-5 only";
  const uint64_t pg0 = common::CommunicatorHash("pg:0");
  for (const auto& [rank, list] : steps) {
    EXPECT_GE(rank, 2);
    EXPECT_LE(rank, 5);
    // The first step is the watch's first segment's, or a later one's.
    EXPECT_GE(list.front().step, first_segment * collector.steps_per_segment());
    for (size_t i = 0; i < list.size(); ++i) {
      const common::StepSummary& s = list[i];
      if (i > 0) {
        EXPECT_GT(s.step, list[i - 1].step);
        EXPECT_GE(s.start_ns, list[i - 1].end_ns) << "steps run back to back";
      }
      EXPECT_LT(s.start_ns, s.end_ns);
      EXPECT_LE(s.end_ns, stopped_at) << "a step is summarised only after it ended";
      EXPECT_GT(s.comm_kernel_ns, 0);
      ASSERT_EQ(s.collectives.size(), 2u) << "the light profile's two buckets";
      for (const common::CollectiveArrival& c : s.collectives) {
        EXPECT_EQ(c.communicator, pg0);
        EXPECT_EQ(c.nranks, 8);
        EXPECT_EQ(c.sequence / 2, s.step) << "sequences follow step numbers";
        EXPECT_LE(c.enqueue_ns, c.start_ns);
        EXPECT_LT(c.start_ns, c.end_ns);
      }
    }
  }
  // The same collective ends on every rank at once (a ring completes together); the agent's
  // 7 ms offset is in every time: a step's end lies 7 ms after its true end, within a segment.
  const common::StepSummary& a = steps.at(2)[3];
  for (const auto& [rank, list] : steps) {
    for (const common::StepSummary& s : list) {
      if (s.step != a.step) continue;
      EXPECT_EQ(s.collectives.back().end_ns, a.collectives.back().end_ns);
    }
  }
  EXPECT_EQ(clock.ToHost(a.start_ns) / kSegment, clock.ToHost(a.end_ns) / kSegment)
      << "no step crosses a segment";
}

// A hung rank stops the job: no step ends any more, and every served rank's progress is sent
// each second instead. The hung rank never entered the collective the others wait in.
TEST(SimulatedRanksTest, AHangStopsTheStepsAndSendsWhereEachRankStands) {
  const AgentClock clock;
  SimulationSpec spec = Spec(0, 3);
  spec.hang = {.rank = 2, .at_ns = HostNowNs() - 100'000'000};
  SimulatedRanksCollector collector(spec, "node", clock);
  RecordingSink sink;
  collector.StartWatch(&sink);
  const bool reported =
      sink.WaitFor([](const auto&, const auto& progress) { return progress.size() == 4; });
  collector.StopWatch();
  ASSERT_TRUE(reported) << "no progress within 60 s";
  const auto progress = sink.progress();
  const int64_t waiting_in = progress.at(0).entered_sequence;
  EXPECT_GE(waiting_in, 0);
  for (const int32_t r : {0, 1, 3}) {
    EXPECT_EQ(progress.at(r).entered_sequence, waiting_in) << "rank " << r;
    EXPECT_LT(progress.at(r).completed_sequence, waiting_in) << "rank " << r;
    EXPECT_EQ(progress.at(r).nranks, 8);
  }
  EXPECT_LT(progress.at(2).entered_sequence, waiting_in) << "the hung rank never entered it";
  for (const auto& [rank, list] : sink.steps()) {
    for (const common::StepSummary& s : list) {
      EXPECT_LT(s.step * 2, waiting_in) << "no step ends after the hang";
    }
  }
}

}  // namespace
}  // namespace podscope::agent
