// One agent link (agent/agent.cc) against the coordinator's real agent service in process, over
// gRPC on loopback: it connects and is welcomed, synchronises its clock, takes part in a capture
// end to end and stops cleanly; another process under a live agent's id is kept out.
#include "agent/agent.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "agent/collectors/simulated_ranks.h"
#include "coordinator/control/agent_service.h"
#include "storage/rocksdb_trace_store.h"
#include "tests/test_paths.h"
#include "tests/wait_for.h"

namespace podscope::agent {
namespace {

using podscope::testing::WaitFor;

class AgentTest : public ::testing::Test {
 protected:
  AgentTest() {
    auto store = storage::RocksDbTraceStore::Open({.path = dir_.File("db")});
    EXPECT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    scheduler_ = std::make_unique<coordinator::CaptureScheduler>(*store_, registry_, aligner_,
                                                                 coordinator::SchedulerOptions{});
    service_ = std::make_unique<coordinator::AgentService>(
        registry_, aligner_, *scheduler_, coordinator::AgentServiceOptions{}, common::RealTime());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    scheduler_->Start();
  }
  ~AgentTest() override {
    for (auto& a : agents_) a->Stop();
    scheduler_->Stop();
    server_->Shutdown();
  }

  Agent& StartAgent(const std::string& id) {
    AgentOptions options;
    options.coordinator = "127.0.0.1:" + std::to_string(port_);
    options.agent_id = id;
    options.host = "host-" + id;
    options.watch = false;
    options.reconnect_initial_ns = 50'000'000;
    absl::StatusOr<SimulationSpec> spec =
        ParseSimulationSpec("ranks=0-1,world=2,job=j,profile=light");
    EXPECT_TRUE(spec.ok()) << spec.status();
    std::vector<std::unique_ptr<Collector>> collectors;
    collectors.push_back(std::make_unique<SimulatedRanksCollector>(*spec, options.host, clock_));
    agents_.push_back(std::make_unique<Agent>(options, clock_, std::move(collectors)));
    agents_.back()->Start();
    return *agents_.back();
  }

  podscope::testing::ScratchDir dir_;
  std::unique_ptr<storage::RocksDbTraceStore> store_;
  coordinator::AgentRegistry registry_{{}, common::RealTime()};
  coordinator::ClockAligner aligner_;
  std::unique_ptr<coordinator::CaptureScheduler> scheduler_;
  std::unique_ptr<coordinator::AgentService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  AgentClock clock_;
  std::vector<std::unique_ptr<Agent>> agents_;
};

TEST_F(AgentTest, ConnectsSynchronisesItsClockAndCapturesEndToEnd) {
  Agent& agent = StartAgent("a");
  ASSERT_TRUE(agent.WaitConnected(30'000'000'000));
  EXPECT_TRUE(agent.refusal().empty());
  ASSERT_TRUE(WaitFor([&] { return registry_.IsConnected("a"); }));
  // The burst at connect gives the coordinator a model of this agent's clock.
  ASSERT_TRUE(WaitFor([&] { return aligner_.Fit("a").ok(); }));
  absl::StatusOr<storage::CaptureRecord> started =
      scheduler_->StartCapture({.job = "j", .duration_ns = 200'000'000});
  ASSERT_TRUE(started.ok()) << started.status();
  storage::CaptureRecord done;
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<storage::CaptureRecord> r = store_->GetCapture(started->id);
    if (r.ok()) done = *r;
    return r.ok() && (r->state == storage::CaptureState::kComplete ||
                      r->state == storage::CaptureState::kPartial ||
                      r->state == storage::CaptureState::kFailed);
  })) << "state: "
      << storage::CaptureStateName(done.state);
  EXPECT_EQ(done.state, storage::CaptureState::kComplete) << done.error;
  ASSERT_EQ(done.workers.size(), 2u);
  for (const storage::WorkerRecord& w : done.workers) {
    EXPECT_EQ(w.state, "complete");
    EXPECT_GT(w.events, 0u);
    EXPECT_EQ(w.clock.source, common::ClockSource::kNetwork);
  }
  ASSERT_TRUE(WaitFor([&] { return !agent.busy(); }));
  // Stopping closes the stream: the coordinator sees it go.
  agent.Stop();
  EXPECT_FALSE(agent.connected());
  ASSERT_TRUE(WaitFor([&] { return !registry_.IsConnected("a"); }));
}

TEST_F(AgentTest, AnotherProcessUnderALiveIdNeverConnectsUntilTheFirstHasGone) {
  Agent& first = StartAgent("dup");
  ASSERT_TRUE(first.WaitConnected(30'000'000'000));
  Agent& second = StartAgent("dup");  // another process (instance) under a live id
  // Refused at every attempt while the first lives: no wait could see it connected.
  EXPECT_FALSE(second.WaitConnected(1'000'000'000));
  EXPECT_TRUE(first.connected()) << "the first keeps its session";
  first.Stop();
  ASSERT_TRUE(second.WaitConnected(30'000'000'000)) << "the id is free once the first is gone";
  EXPECT_TRUE(second.refusal().empty());
}

}  // namespace
}  // namespace podscope::agent
