// The agent registry alone, on simulated time: sessions, replacement and refusal, health over
// time, forgetting, a full registry, and which agent serves which rank (conflicts included).
// (capture_scheduler_test.cc holds two older registry tests, AgentRegistryTest.*.)
#include "coordinator/agents/agent_registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>

#include "common/time_source.h"

namespace podscope::coordinator {
namespace {

constexpr TimeNs kClockStart = 1'800'000'000'000'000'000;
constexpr TimeNs kSecond = 1'000'000'000;

class CountingStream : public AgentControlStream {
 public:
  bool Send(const v1::CoordinatorMessage&) override {
    ++sent;
    return open;
  }
  void Close() override {
    ++closed;
    open = false;
  }
  std::atomic<int> sent{0}, closed{0};
  std::atomic<bool> open{true};
};

v1::AgentHello Hello(const std::string& id, const std::string& instance, std::vector<int32_t> ranks,
                     const std::string& job = "j") {
  v1::AgentHello hello;
  hello.set_agent_id(id);
  hello.set_instance_id(instance);
  hello.set_host("host-" + id);
  for (int32_t r : ranks) {
    v1::WorkerDescriptor* w = hello.add_workers();
    w->set_rank(r);
    w->set_job(job);
  }
  return hello;
}

class AgentRegistrySessionTest : public ::testing::Test {
 protected:
  common::SimulatedTimeSource time_{kClockStart};
  AgentRegistry registry_{{.heartbeat_interval_ns = kSecond,
                           .stale_after_heartbeats = 3,
                           .forget_after_ns = 60 * kSecond,
                           .max_agents = 3},
                          time_};
};

TEST_F(AgentRegistrySessionTest, AReconnectOfTheSameProcessReplacesItsOldSession) {
  auto first = std::make_shared<CountingStream>();
  absl::StatusOr<bool> fresh = registry_.Connected(Hello("a", "i1", {0}), "peer-1", first);
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(*fresh) << "a process never seen is a new instance";
  auto second = std::make_shared<CountingStream>();
  absl::StatusOr<bool> again = registry_.Connected(Hello("a", "i1", {0}), "peer-2", second);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again) << "same instance: its clock samples carry on";
  EXPECT_EQ(first->closed, 1) << "the replaced session is closed";
  EXPECT_FALSE(registry_.IsCurrent("a", first.get()));
  EXPECT_TRUE(registry_.IsCurrent("a", second.get()));
  // The old session ending changes nothing; messages go to the new one.
  registry_.Disconnected("a", first.get());
  EXPECT_TRUE(registry_.IsConnected("a"));
  EXPECT_TRUE(registry_.Send("a", v1::CoordinatorMessage()));
  EXPECT_EQ(second->sent, 1);
  EXPECT_EQ(first->sent, 0);
}

TEST_F(AgentRegistrySessionTest, AnotherProcessWithALiveAgentsIdIsRefusedNamingBoth) {
  auto live = std::make_shared<CountingStream>();
  ASSERT_TRUE(registry_.Connected(Hello("a", "i1", {0}), "peer-1", live).ok());
  absl::StatusOr<bool> impostor =
      registry_.Connected(Hello("a", "i2", {0}), "peer-2", std::make_shared<CountingStream>());
  ASSERT_EQ(impostor.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(impostor.status().message().find("peer-1"), std::string::npos) << impostor.status();
  EXPECT_NE(impostor.status().message().find("peer-2"), std::string::npos) << impostor.status();
  EXPECT_EQ(live->closed, 0);
  EXPECT_TRUE(registry_.IsCurrent("a", live.get()));
  // Once the first is gone, a new process may take the id, and is a new instance.
  registry_.Disconnected("a", live.get());
  absl::StatusOr<bool> next =
      registry_.Connected(Hello("a", "i2", {0}), "peer-2", std::make_shared<CountingStream>());
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(*next);
}

TEST_F(AgentRegistrySessionTest, HealthGoesStaleThenDisconnectedAgentsAreForgotten) {
  auto stream = std::make_shared<CountingStream>();
  ASSERT_TRUE(registry_.Connected(Hello("a", "i1", {0}), "p", stream).ok());
  auto health = [&] { return registry_.Snapshot().at(0).health; };
  EXPECT_EQ(health(), AgentHealth::kHealthy);
  time_.AdvanceBy(3 * kSecond);
  EXPECT_EQ(health(), AgentHealth::kHealthy) << "three heartbeat intervals are allowed";
  time_.AdvanceBy(1);
  EXPECT_EQ(health(), AgentHealth::kStale);
  registry_.Seen("a");
  EXPECT_EQ(health(), AgentHealth::kHealthy);
  registry_.Disconnected("a", stream.get());
  EXPECT_EQ(health(), AgentHealth::kDisconnected);
  EXPECT_FALSE(registry_.Send("a", v1::CoordinatorMessage()));
  // Forgotten (at the next connect) once past forget_after, not before.
  time_.AdvanceBy(60 * kSecond);
  ASSERT_TRUE(
      registry_.Connected(Hello("b", "ib", {1}), "p", std::make_shared<CountingStream>()).ok());
  EXPECT_EQ(registry_.Snapshot().size(), 2u);
  time_.AdvanceBy(1);
  ASSERT_TRUE(
      registry_.Connected(Hello("c", "ic", {2}), "p", std::make_shared<CountingStream>()).ok());
  EXPECT_EQ(registry_.Snapshot().size(), 2u) << "a is gone";
  EXPECT_EQ(registry_.ConnectedCount(), 2u);
}

TEST_F(AgentRegistrySessionTest, AFullRegistryRefusesNewAgentsButNotKnownOnes) {
  for (const char* id : {"a", "b", "c"}) {
    ASSERT_TRUE(
        registry_.Connected(Hello(id, id, {0}, id), "p", std::make_shared<CountingStream>()).ok());
  }
  absl::StatusOr<bool> full =
      registry_.Connected(Hello("d", "d", {0}), "p", std::make_shared<CountingStream>());
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted) << full.status();
  EXPECT_TRUE(
      registry_.Connected(Hello("a", "a", {0}, "a"), "p", std::make_shared<CountingStream>()).ok());
}

TEST_F(AgentRegistrySessionTest, TargetsAreTheAgentsServingTheRanksAndContestedRanksAreConflicts) {
  ASSERT_TRUE(
      registry_.Connected(Hello("a", "ia", {0, 1}), "pa", std::make_shared<CountingStream>()).ok());
  ASSERT_TRUE(
      registry_.Connected(Hello("b", "ib", {1, 2}), "pb", std::make_shared<CountingStream>()).ok());
  absl::StatusOr<TargetSelection> all = registry_.SelectTargets("j", {});
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->targets.size(), 2u);
  EXPECT_EQ(all->targets[0].agent_id, "a");
  ASSERT_EQ(all->targets[0].workers.size(), 1u);
  EXPECT_EQ(all->targets[0].workers[0].rank(), 0);
  EXPECT_EQ(all->targets[1].workers[0].rank(), 2);
  ASSERT_EQ(all->conflicts.size(), 1u);
  EXPECT_EQ(all->conflicts[0].rank, 1);
  EXPECT_EQ(all->conflicts[0].claimants,
            (std::vector<std::string>{"a (host-a, pa)", "b (host-b, pb)"}));
  EXPECT_NE(all->conflicts[0].Reason("j").find("claimed by 2 agents"), std::string::npos);
  // Requested ranks only; an unserved one is named; another job is not found.
  absl::StatusOr<TargetSelection> some = registry_.SelectTargets("j", {2});
  ASSERT_TRUE(some.ok());
  ASSERT_EQ(some->targets.size(), 1u);
  EXPECT_EQ(some->targets[0].agent_id, "b");
  absl::StatusOr<TargetSelection> missing = registry_.SelectTargets("j", {2, 7});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("ranks 7 of job"), std::string::npos)
      << missing.status();
  EXPECT_EQ(registry_.SelectTargets("other", {}).status().code(), absl::StatusCode::kNotFound);
  // A disconnected agent serves nothing.
  const std::map<std::pair<std::string, int32_t>, std::string> served = registry_.ServedRanks("b");
  EXPECT_EQ(served.size(), 2u);
  EXPECT_EQ(served.at({"j", 2}), "host-b");
}

TEST_F(AgentRegistrySessionTest, WorkerChangesReplaceTheAgentsWorkers) {
  ASSERT_TRUE(
      registry_.Connected(Hello("a", "ia", {0}), "p", std::make_shared<CountingStream>()).ok());
  v1::WorkersChanged changed;
  v1::WorkerDescriptor* w = changed.add_workers();
  w->set_rank(5);
  w->set_job("j");
  w->set_host("elsewhere");
  registry_.WorkersChanged("a", changed);
  absl::StatusOr<TargetSelection> s = registry_.SelectTargets("j", {});
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->targets.at(0).workers.size(), 1u);
  EXPECT_EQ(s->targets[0].workers[0].rank(), 5);
  EXPECT_EQ(registry_.ServedRanks("a").at({"j", 5}), "elsewhere");
}

}  // namespace
}  // namespace podscope::coordinator
