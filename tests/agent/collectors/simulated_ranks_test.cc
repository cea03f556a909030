#include "agent/collectors/simulated_ranks.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <thread>

namespace podscope::agent {
namespace {

constexpr TimeNs kSegment = SimulatedRanksCollector::kSegmentNs;

TEST(SimulationSpecTest, ParsesEveryKey) {
  absl::StatusOr<SimulationSpec> spec = ParseSimulationSpec(
      "ranks=8-15, world=32,job=llm,seed=9,straggler=13:1.3,straggler=2:4:input,clock-offset-ms=-12.5,drift-ppm=40,profile=light");
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
  auto message = [](std::string_view text) { return std::string(ParseSimulationSpec(text).status().message()); };
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
    for (int64_t n : piece.steps.number) EXPECT_TRUE(steps.insert(n).second) << "step " << n << " twice";
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
  const AgentClock clock(5'000'000, 0, 0);
  SimulatedRanksCollector c(Spec(0, 1), "n", clock);
  EXPECT_EQ(c.Workers().size(), 2u);
  EXPECT_EQ(c.Workers()[1].rank, 1);
  EXPECT_FALSE(c.Arm({"x", {5}, 0, 1, 0}).ok());  // not served here
  ASSERT_TRUE(c.Arm({"cap", {0, 1}, 0, 0, /*max_events_per_worker=*/10}).ok());
  EXPECT_EQ(c.Arm({"cap", {0}, 0, 0, 0}).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(c.Drain("cap", 0).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(c.Start("cap").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
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

}  // namespace
}  // namespace podscope::agent

namespace podscope::agent {
namespace {

TEST(SimulatedRanksTest, SimWorldServesManyRanksFromASmallerJob) {
  absl::StatusOr<SimulationSpec> spec = ParseSimulationSpec("ranks=40-41,world=64,sim-world=32,profile=light,seed=3");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->sim_world, 32);
  EXPECT_FALSE(ParseSimulationSpec("world=64,sim-world=8,straggler=9:2").ok());  // beyond the simulated job
  const AgentClock clock;
  SimulatedRanksCollector big(*spec, "n", clock);
  SimulationSpec small_spec = *spec;
  small_spec.world = 32;
  small_spec.sim_world = 0;
  small_spec.first_rank = small_spec.last_rank = 8;
  SimulatedRanksCollector small(small_spec, "n", clock);
  const TimeNs begin = 448'750'000LL * SimulatedRanksCollector::kSegmentNs + 500'000'000, end = begin + 500'000'000;
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
