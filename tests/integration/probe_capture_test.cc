// The real-collector path end to end on a machine without a GPU: podscope-coordinator, a real
// podscope-agent serving probes on a unix socket, and two training processes that load
// libpodscope_probe.so as NCCL does (tests/integration/fake_training.cc). A capture through REST
// must find both ranks, their steps and their collectives, with nothing dropped.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <signal.h>

#include <chrono>
#include <set>
#include <thread>

#include "tests/integration/daemon.h"
#include "tests/integration/test_security.h"
#include "tests/test_paths.h"

namespace podscope::testing {
namespace {

class ProbeCaptureTest : public ::testing::Test {
 protected:
  simdjson::dom::element Json(const std::string& body) {
    documents_.push_back(std::make_unique<simdjson::dom::parser>());
    simdjson::dom::element e;
    EXPECT_EQ(documents_.back()->parse(body).get(e), simdjson::SUCCESS) << body;
    return e;
  }

  ScratchDir dir_;
  std::vector<std::unique_ptr<simdjson::dom::parser>> documents_;
};

TEST_F(ProbeCaptureTest, TwoProbedProcessesCapturedThroughTheRealDaemons) {
  const std::string config = dir_.Write("coordinator.json", R"({"agents": {"heartbeat_interval_ms": 300}})");
  Daemon coordinator(PODSCOPE_COORDINATOR_PATH,
                     Concat({"--config", config, "--data-dir", dir_.File("store"), "--http", "127.0.0.1:0", "--grpc",
                             "127.0.0.1:0"},
                            TestSecurity::Get().CoordinatorFlags()),
                     dir_.File("coordinator.log"));
  const std::string grpc = coordinator.WaitForLog("agents on grpc://[^:]+:([0-9]+)");
  ASSERT_FALSE(grpc.empty()) << coordinator.Log();
  const int http = coordinator.WaitForPort();
  ASSERT_GT(http, 0);

  const std::string socket = dir_.File("run/agent.sock");
  Daemon agent(PODSCOPE_AGENT_PATH,
               Concat({"--coordinator", "127.0.0.1:" + grpc, "--agent-id", "node-a", "--host", "node-a", "--probe-socket",
                       socket},
                      TestSecurity::Get().AgentFlags("node-a")),
               dir_.File("agent.log"));
  ASSERT_FALSE(agent.WaitForLog("(serving) 0 workers").empty()) << agent.Log();

  std::vector<std::unique_ptr<Daemon>> training;
  for (int rank = 0; rank < 2; ++rank) {
    training.push_back(std::make_unique<Daemon>(
        PODSCOPE_FAKE_TRAINING_PATH,
        std::vector<std::string>{PODSCOPE_PROBE_PATH, socket, std::to_string(rank), "2", "fake-job", "30"},
        dir_.File("rank" + std::to_string(rank) + ".log")));
  }
  // Both processes register and the coordinator hears of them.
  bool registered = false;
  for (int i = 0; i < 200 && !registered; ++i) {
    const HttpResult r = HttpCall(http, "GET", "/v1/workers");
    registered = r.status == 200 && r.body.find("\"job\":\"fake-job\"") != std::string::npos &&
                 Json(r.body)["workers"].get_array().size() == 2;
    if (!registered) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(registered) << HttpCall(http, "GET", "/v1/workers").body << agent.Log();

  const HttpResult created = HttpCall(http, "POST", "/v1/captures", R"({"job": "fake-job", "duration_ms": 1000})",
                                      "application/json");
  ASSERT_EQ(created.status, 202) << created.body;
  const std::string id(Json(created.body)["id"].get_string().value());
  std::string state;
  for (int i = 0; i < 600; ++i) {
    state = std::string(Json(HttpCall(http, "GET", "/v1/captures/" + id).body)["state"].get_string().value());
    if (state == "complete" || state == "partial" || state == "failed") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(state, "complete") << HttpCall(http, "GET", "/v1/captures/" + id).body << "\n" << agent.Log();

  simdjson::dom::element capture = Json(HttpCall(http, "GET", "/v1/captures/" + id).body);
  std::set<int64_t> ranks;
  for (simdjson::dom::element w : capture["workers"].get_array()) {
    ranks.insert(w["rank"].get_int64().value());
    // Steps, their spans and two collectives per step, plus host samples.
    EXPECT_GT(w["events"].get_uint64().value(), 50u) << simdjson::to_string(w);
    EXPECT_EQ(w["dropped_events"].get_uint64().value(), 0u) << simdjson::to_string(w);
  }
  EXPECT_EQ(ranks, (std::set<int64_t>{0, 1}));

  // Steps found on both ranks from the probe's markers. (Without a GPU there is no device time,
  // so no per-step breakdown: DESIGN §7 measures steps on the device.)
  const HttpResult steps = HttpCall(http, "GET", "/v1/captures/" + id + "/steps");
  ASSERT_EQ(steps.status, 200) << steps.body;
  for (simdjson::dom::element w : Json(steps.body)["workers"].get_array()) {
    EXPECT_EQ(w["step_source"].get_string().value(), "markers") << simdjson::to_string(w);
  }
  // About 95 steps of ~10.5 ms per rank in the 1 s window (fewer on a loaded machine), each
  // exported as a ProfilerStep span.
  const HttpResult trace = HttpCall(http, "GET", "/v1/captures/" + id + "/trace");
  ASSERT_EQ(trace.status, 200);
  size_t step_spans = 0;
  for (size_t at = trace.body.find("ProfilerStep#"); at != std::string::npos; at = trace.body.find("ProfilerStep#", at + 1)) {
    ++step_spans;
  }
  EXPECT_GE(step_spans, 20u);
  EXPECT_LE(step_spans, 200u) << "no more than 1 s of 10 ms steps on two ranks";
  // The AllReduces were matched across the two ranks by communicator and sequence number.
  const HttpResult comm = HttpCall(http, "GET", "/v1/captures/" + id + "/communication");
  ASSERT_EQ(comm.status, 200) << comm.body;
  EXPECT_NE(comm.body.find("AllReduce"), std::string::npos) << comm.body.substr(0, 2000);

  // SIGTERM stops an agent serving probes cleanly (its collector threads must not take the
  // signal), and the training processes carry on without it.
  EXPECT_EQ(agent.Terminate(), 0) << agent.Log();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (const auto& t : training) EXPECT_EQ(kill(t->pid(), 0), 0) << "a training process died with its agent";
}

}  // namespace
}  // namespace podscope::testing
