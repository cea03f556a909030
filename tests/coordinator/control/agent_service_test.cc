// The coordinator's agent protocol in process: a real gRPC server on loopback with the
// AgentService, its registry, clock aligner and capture scheduler, and a hand-driven client
// stub in place of an agent.
#include "coordinator/control/agent_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/protocol_version.h"
#include "storage/rocksdb_trace_store.h"
#include "tests/test_paths.h"
#include "tests/wait_for.h"

namespace podscope::coordinator {
namespace {

using testing::WaitFor;

class AgentServiceTest : public ::testing::Test {
 protected:
  AgentServiceTest() {
    auto store = storage::RocksDbTraceStore::Open({.path = dir_.File("db")});
    EXPECT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    scheduler_ =
        std::make_unique<CaptureScheduler>(*store_, registry_, aligner_, SchedulerOptions{});
    service_ = std::make_unique<AgentService>(
        registry_, aligner_, *scheduler_,
        AgentServiceOptions{
            .coordinator_id = "c-test", .heartbeat_interval_ms = 1234, .max_workers_per_agent = 2},
        common::RealTime());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    EXPECT_GT(port, 0);
    stub_ = v1::AgentService::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                          grpc::InsecureChannelCredentials()));
  }
  ~AgentServiceTest() override { server_->Shutdown(); }

  static v1::AgentMessage Hello(const std::string& id, int workers = 1,
                                uint32_t major = common::kAgentProtocolMajor) {
    v1::AgentMessage m;
    v1::AgentHello* h = m.mutable_hello();
    h->set_protocol_major(major);
    h->set_protocol_minor(common::kAgentProtocolMinor);
    h->set_agent_id(id);
    h->set_instance_id("instance-" + id);
    h->set_host("host-" + id);
    for (int r = 0; r < workers; ++r) {
      v1::WorkerDescriptor* w = h->add_workers();
      w->set_rank(r);
      w->set_job("j");
    }
    return m;
  }

  podscope::testing::ScratchDir dir_;
  std::unique_ptr<storage::RocksDbTraceStore> store_;
  AgentRegistry registry_{{}, common::RealTime()};
  ClockAligner aligner_;
  std::unique_ptr<CaptureScheduler> scheduler_;
  std::unique_ptr<AgentService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::AgentService::Stub> stub_;
};

TEST_F(AgentServiceTest, AHelloIsWelcomedAndTheAgentIsRegisteredUntilItsStreamEnds) {
  grpc::ClientContext context;
  auto stream = stub_->Connect(&context);
  ASSERT_TRUE(stream->Write(Hello("a")));
  v1::CoordinatorMessage welcome;
  ASSERT_TRUE(stream->Read(&welcome));
  ASSERT_TRUE(welcome.has_welcome());
  EXPECT_EQ(welcome.welcome().coordinator_id(), "c-test");
  EXPECT_EQ(welcome.welcome().heartbeat_interval_ms(), 1234u);
  EXPECT_EQ(welcome.welcome().protocol_major(), common::kAgentProtocolMajor);
  ASSERT_TRUE(WaitFor([&] { return registry_.IsConnected("a"); }));
  absl::StatusOr<TargetSelection> targets = registry_.SelectTargets("j", {});
  ASSERT_TRUE(targets.ok()) << targets.status();
  EXPECT_EQ(targets->targets.at(0).agent_id, "a");
  // What the registry sends reaches the agent's stream.
  v1::CoordinatorMessage sync;
  sync.mutable_sync_clock();
  ASSERT_TRUE(registry_.Send("a", sync));
  v1::CoordinatorMessage got;
  ASSERT_TRUE(stream->Read(&got));
  EXPECT_TRUE(got.has_sync_clock());
  // The agent hangs up: no longer connected.
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  ASSERT_TRUE(WaitFor([&] { return !registry_.IsConnected("a"); }));
}

TEST_F(AgentServiceTest, AnotherProtocolMajorIsRefusedSayingWhy) {
  grpc::ClientContext context;
  auto stream = stub_->Connect(&context);
  ASSERT_TRUE(stream->Write(Hello("old", 1, common::kAgentProtocolMajor + 1)));
  v1::CoordinatorMessage m;
  EXPECT_FALSE(stream->Read(&m));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("is not supported by this coordinator"), std::string::npos)
      << status.error_message();
  EXPECT_FALSE(registry_.IsConnected("old"));
}

TEST_F(AgentServiceTest, TheFirstMessageMustBeAHelloAndWorkersAreBounded) {
  {
    grpc::ClientContext context;
    auto stream = stub_->Connect(&context);
    v1::AgentMessage beat;
    beat.mutable_heartbeat();
    ASSERT_TRUE(stream->Write(beat));
    v1::CoordinatorMessage m;
    EXPECT_FALSE(stream->Read(&m));
    const grpc::Status status = stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("must be a hello"), std::string::npos);
  }
  grpc::ClientContext context;
  auto stream = stub_->Connect(&context);
  ASSERT_TRUE(stream->Write(Hello("big", 3)));  // over max_workers_per_agent (2)
  v1::CoordinatorMessage m;
  EXPECT_FALSE(stream->Read(&m));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("at most 2 workers"), std::string::npos)
      << status.error_message();
  EXPECT_FALSE(registry_.IsConnected("big"));
}

TEST_F(AgentServiceTest, ASecondProcessWithALiveAgentsIdIsRefused) {
  grpc::ClientContext first_context;
  auto first = stub_->Connect(&first_context);
  ASSERT_TRUE(first->Write(Hello("dup")));
  v1::CoordinatorMessage welcome;
  ASSERT_TRUE(first->Read(&welcome));
  ASSERT_TRUE(WaitFor([&] { return registry_.IsConnected("dup"); }));
  grpc::ClientContext second_context;
  auto second = stub_->Connect(&second_context);
  v1::AgentMessage impostor = Hello("dup");
  impostor.mutable_hello()->set_instance_id("another-process");
  ASSERT_TRUE(second->Write(impostor));
  v1::CoordinatorMessage m;
  while (second->Read(&m)) {
  }  // the welcome may come before the refusal
  const grpc::Status status = second->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_NE(status.error_message().find("give every agent its own --agent-id"), std::string::npos);
  EXPECT_TRUE(registry_.IsConnected("dup")) << "the first keeps its session";
  first->WritesDone();
  EXPECT_TRUE(first->Finish().ok());
}

TEST_F(AgentServiceTest, ClockExchangesAreAnsweredWithTheCoordinatorsTimes) {
  v1::SyncClockRequest request;
  request.set_agent_id("a");
  request.set_t1_ns(42);
  v1::SyncClockResponse response;
  grpc::ClientContext context;
  const TimeNs before = common::HostNowNs();
  const grpc::Status status = stub_->SyncClock(&context, request, &response);
  const TimeNs after = common::HostNowNs();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_GE(response.t2_ns(), before);
  EXPECT_LE(response.t3_ns(), after);
  EXPECT_LE(response.t2_ns(), response.t3_ns());
}

}  // namespace
}  // namespace podscope::coordinator
