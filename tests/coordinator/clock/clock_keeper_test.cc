#include "coordinator/clock/clock_keeper.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "common/time_source.h"

namespace podscope::coordinator {
namespace {

constexpr TimeNs kStart = 1'795'000'000'000'000'000;

class CountingLink : public AgentControlStream {
 public:
  bool Send(const v1::CoordinatorMessage& m) override {
    if (m.has_sync_clock()) ++syncs;
    return true;
  }
  void Close() override {}
  std::atomic<int> syncs{0};
};

class ClockKeeperTest : public ::testing::Test {
 protected:
  ClockKeeperTest() : registry_({}, time_) {}

  std::shared_ptr<CountingLink> Connect(const std::string& id) {
    v1::AgentHello hello;
    hello.set_agent_id(id);
    auto link = std::make_shared<CountingLink>();
    EXPECT_TRUE(registry_.Connected(hello, "test", link).ok());
    return link;
  }
  // One exchange at the current time whose round trip is 2 * half_trip (the agent's clock is
  // the coordinator's), so the model right after it is bounded by about half_trip.
  void Sync(const std::string& id, int64_t half_trip) {
    const TimeNs now = time_.Now();
    const ClockSample s{now - half_trip, now, now, now + half_trip};
    aligner_.AddSamples(id, std::span<const ClockSample>(&s, 1));
  }

  common::SimulatedTimeSource time_{kStart};
  AgentRegistry registry_;
  ClockAligner aligner_;
};

TEST_F(ClockKeeperTest, AsksWideAgentsAgainWithBackoffAndLeavesTightOnesAlone) {
  auto tight = Connect("tight");
  auto wide = Connect("wide");
  auto unsynced = Connect("unsynced");
  Sync("tight", 10'000);
  Sync("wide", 5'000'000);
  // A lone exchange pins no drift: the bound grows at the crystal tolerance, 100 ppm, i.e.
  // 100 us per second after the exchange. The target is 2 ms.
  ClockKeeper keeper(registry_, aligner_,
                     {.target_bound_ns = 2'000'000, .first_retry_ns = 2'000'000'000}, time_);

  EXPECT_EQ(keeper.Tick(), 1u);
  EXPECT_EQ(wide->syncs, 1);
  EXPECT_EQ(tight->syncs, 0);
  EXPECT_EQ(unsynced->syncs, 0);  // it syncs on its own at connect

  // Not again before the retry interval; then at 2 s, then 4 s later. The agent with no
  // exchange at all is asked too, once it had 2 s for its own burst at connect.
  time_.AdvanceBy(1'000'000'000);
  EXPECT_EQ(keeper.Tick(), 0u);
  time_.AdvanceBy(1'000'000'000);
  EXPECT_EQ(keeper.Tick(), 2u);
  EXPECT_EQ(unsynced->syncs, 1);
  Sync("unsynced", 10'000);
  time_.AdvanceBy(3'000'000'000);
  EXPECT_EQ(keeper.Tick(), 0u);
  time_.AdvanceBy(1'000'000'000);
  EXPECT_EQ(keeper.Tick(), 1u);
  EXPECT_EQ(wide->syncs, 3);
  EXPECT_EQ(tight->syncs, 0);  // 10 us + 6 s x 100 ppm = 610 us

  // A good burst makes the wide one tight. 15 s on, it is at 5 us + 1.5 ms, still within the
  // target; the other at 10 us + 2.1 ms is not, and is asked.
  Sync("wide", 5'000);
  EXPECT_EQ(keeper.Tick(), 0u);
  time_.AdvanceBy(15'000'000'000);
  EXPECT_EQ(keeper.Tick(), 1u);
  EXPECT_EQ(tight->syncs, 1);
  EXPECT_EQ(wide->syncs, 3);
}

TEST_F(ClockKeeperTest, AnAgentBehindASlowPathIsAskedAFewTimesThenOnlyWhenItsModelWidens) {
  // Every exchange of this agent takes 600 us: the target of 50 us is out of its reach.
  auto slow = Connect("slow");
  ClockKeeper keeper(registry_, aligner_, {.target_bound_ns = 50'000, .asks_before_relative = 3},
                     time_);
  for (int64_t at : {0, 2, 6}) {
    time_.AdvanceTo(kStart + at * 1'000'000'000);
    Sync("slow", 300'000);
    EXPECT_EQ(keeper.Tick(), 1u) << "at " << at << " s";
  }
  time_.AdvanceTo(kStart + 14'000'000'000);
  Sync("slow", 300'000);
  EXPECT_EQ(keeper.Tick(), 0u);  // as good as it gets
  // The exchanges at 0 and 14 s allow lines 600 us / 14 s = 42.9 ppm apart from the model:
  // 300 + 6 x 42.9 = 557 us at 20 s, within twice its best; 643 us at 22 s, not.
  time_.AdvanceTo(kStart + 20'000'000'000);
  EXPECT_EQ(keeper.Tick(), 0u);
  time_.AdvanceTo(kStart + 22'000'000'000);
  EXPECT_EQ(keeper.Tick(), 1u);
  EXPECT_EQ(slow->syncs, 4);
  // It never reached the target, so the back-off did not start over: the next ask is 16 s on.
  time_.AdvanceTo(kStart + 37'000'000'000);
  EXPECT_EQ(keeper.Tick(), 0u);
  time_.AdvanceTo(kStart + 38'000'000'000);
  EXPECT_EQ(keeper.Tick(), 1u);
}

TEST_F(ClockKeeperTest, AsksTheWidestFirstAndAFewPerTick) {
  std::vector<std::shared_ptr<CountingLink>> links;
  for (int i = 0; i < 5; ++i) {
    links.push_back(Connect("a" + std::to_string(i)));
    Sync("a" + std::to_string(i), 100'000 * (i + 1));
  }
  ClockKeeper keeper(registry_, aligner_, {.target_bound_ns = 50'000, .max_requests_per_tick = 2},
                     time_);
  EXPECT_EQ(keeper.Tick(), 2u);
  EXPECT_EQ(links[4]->syncs, 1);
  EXPECT_EQ(links[3]->syncs, 1);
  EXPECT_EQ(links[0]->syncs + links[1]->syncs + links[2]->syncs, 0);
  EXPECT_EQ(keeper.Tick(), 2u);
  EXPECT_EQ(keeper.Tick(), 1u);
  EXPECT_EQ(links[0]->syncs, 1);
  // A disconnected agent is not asked.
  registry_.Disconnected("a0", links[0].get());
  time_.AdvanceBy(10'000'000'000);
  EXPECT_EQ(keeper.Tick(), 2u);
  EXPECT_EQ(links[0]->syncs, 1);
}

}  // namespace
}  // namespace podscope::coordinator
