// Real daemons on loopback for the live paths: one podscope-coordinator and podscope-agent
// processes serving simulated ranks, as deployed (HTTPS, mutual TLS, tokens).
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <simdjson.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent_clock.h"
#include "common/parse_number.h"
#include "podscope/v1/agent.grpc.pb.h"
#include "tests/integration/daemon.h"
#include "tests/integration/test_security.h"
#include "tests/test_paths.h"
#include "tests/wait_for.h"

namespace podscope::testing {

inline std::string FileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class LiveClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Uploads of 32 default-profile ranks under the sanitizers, beside other suites on two cores,
    // can take longer than 20 s (a fresh-clone run saw it); a healthy run finishes in seconds.
    // The lead agents have to acknowledge a capture (250 ms as deployed) scales with the tests'
    // waits: under ThreadSanitizer beside clang-tidy, both agents of a capture once missed it
    // and the capture failed before it began.
    config_ = dir_.Write(
        "coordinator.json",
        R"({"capture": {"capture_grace_ms": 4000, "upload_timeout_ms": 120000, "min_lead_ms": )" +
            std::to_string(250 * testing::TimeScale()) + R"(},
            "agents": {"heartbeat_interval_ms": 300}})");
  }

  void StartCoordinator() {
    const std::string log = dir_.File("coordinator-" + std::to_string(++starts_) + ".log");
    coordinator_ =
        std::make_unique<Daemon>(CoordinatorBinary(),
                                 Concat({"--config", config_, "--data-dir", dir_.File("store"),
                                         "--http", "127.0.0.1:" + std::to_string(http_port_),
                                         "--grpc", "127.0.0.1:" + std::to_string(grpc_port_)},
                                        TestSecurity::Get().CoordinatorFlags()),
                                 log);
    const std::string grpc = coordinator_->WaitForLog("agents on grpc://[^:]+:([0-9]+)");
    ASSERT_FALSE(grpc.empty()) << coordinator_->Log();
    grpc_port_ = static_cast<int>(common::ParseInt(grpc).value());
    http_port_ = coordinator_->WaitForPort();
    ASSERT_GT(http_port_, 0) << coordinator_->Log();
  }

  Daemon& StartAgent(const std::string& id, const std::string& simulate,
                     const std::string& host = "") {
    const std::string name = host.empty() ? "host-" + id : host;
    agents_.push_back(
        std::make_unique<Daemon>(AgentBinary(),
                                 Concat({"--coordinator", "127.0.0.1:" + std::to_string(grpc_port_),
                                         "--agent-id", id, "--host", name, "--simulate", simulate},
                                        TestSecurity::Get().AgentFlags(id)),
                                 dir_.File("agent-" + id + "-" + name + ".log")));
    return *agents_.back();
  }

  // A body that is not JSON (a daemon that died, say) fails the test and reads as {}, so that
  // what follows fails on missing keys instead of crashing the test before its daemons' logs
  // are printed.
  simdjson::dom::element Json(const std::string& body) {
    documents_.push_back(std::make_unique<simdjson::dom::parser>());
    simdjson::dom::element e;
    const simdjson::error_code parsed = documents_.back()->parse(body).get(e);
    EXPECT_EQ(parsed, simdjson::SUCCESS) << body;
    if (parsed != simdjson::SUCCESS) {
      documents_.push_back(std::make_unique<simdjson::dom::parser>());
      EXPECT_EQ(documents_.back()->parse(std::string("{}")).get(e), simdjson::SUCCESS);
    }
    return e;
  }

  // Polls `condition` until it holds (true) or `timeout_ms` pass (false).
  static bool WaitUntil(const std::function<bool()>& condition, int timeout_ms) {
    return testing::WaitFor(condition, std::chrono::milliseconds(timeout_ms),
                            std::chrono::milliseconds(50));
  }

  // Until `n` agents are connected and each has a clock model.
  void WaitForAgents(size_t n) {
    const bool connected = WaitUntil(
        [&] {
          const HttpResult r = HttpCall(http_port_, "GET", "/v1/workers");
          if (r.status != 200) return false;
          simdjson::dom::element doc = Json(r.body);
          size_t synced = 0;
          for (simdjson::dom::element a : doc["agents"].get_array()) {
            if (a["health"].get_string().value() != "disconnected" && !a["clock"].is_null())
              ++synced;
          }
          return synced == n;
        },
        60'000);
    if (connected) return;
    FAIL() << "agents never connected: " << HttpCall(http_port_, "GET", "/v1/workers").body;
  }

  std::string StartCapture(const std::string& body) {
    const HttpResult r = HttpCall(http_port_, "POST", "/v1/captures", body, "application/json");
    EXPECT_EQ(r.status, 202) << r.body;
    EXPECT_EQ(r.headers.count("location"), 1u);
    if (r.status != 202) return "";  // the failure is reported; the test goes on with no capture
    return std::string(Json(r.body)["id"].get_string().value());
  }

  std::string State(const std::string& id) {
    const HttpResult r = HttpCall(http_port_, "GET", "/v1/captures/" + id);
    if (r.status != 200) return "";
    return std::string(Json(r.body)["state"].get_string().value());
  }

  std::string WaitForState(const std::string& id, const std::set<std::string>& states,
                           int timeout_ms) {
    std::string state;
    WaitUntil(
        [&] {
          state = State(id);
          return states.count(state) > 0;
        },
        timeout_ms);
    return state;
  }

  simdjson::dom::element Capture(const std::string& id) {
    return Json(HttpCall(http_port_, "GET", "/v1/captures/" + id).body);
  }

  // The exact skew an agent's simulated clock runs with, from its log.
  agent::AgentClock AgentSkew(Daemon& agent) {
    const std::string line = agent.WaitForLog(
        "simulated clock skew: (offset_ns=-?[0-9]+ drift_ppb=-?[0-9]+ reference_ns=[0-9]+)");
    std::smatch m;
    const std::regex numbers("offset_ns=(-?[0-9]+) drift_ppb=(-?[0-9]+) reference_ns=([0-9]+)");
    EXPECT_TRUE(std::regex_search(line, m, numbers)) << line;
    return agent::AgentClock(common::ParseInt(m[1].str()).value(),
                             common::ParseInt(m[2].str()).value() / 1000.0,
                             common::ParseInt(m[3].str()).value());
  }

  // The CLI against this coordinator, as an admin; its output (stdout and stderr) and exit code.
  std::pair<std::string, int> Cli(const std::string& args) {
    FILE* pipe = popen(
        (CliEnv(http_port_) + CliBinary() + " " + args + " " + CliServerFlags(http_port_) + " 2>&1")
            .c_str(),
        "r");
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
    const int status = pclose(pipe);
    return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
  }

  // A control stream to the coordinator opened by hand, to send what no real agent would.
  struct RawAgentSession {
    std::unique_ptr<v1::AgentService::Stub> stub;
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::CoordinatorMessage>> stream;
  };
  // Over mutual TLS with a certificate for `agent_id`, as a real agent would connect.
  std::unique_ptr<RawAgentSession> OpenRawAgentSession(const std::string& agent_id) {
    auto session = std::make_unique<RawAgentSession>();
    const std::vector<std::string> flags =
        TestSecurity::Get().AgentFlags(agent_id);  // cert, key, ca
    grpc::SslCredentialsOptions tls;
    tls.pem_cert_chain = FileText(flags[1]);
    tls.pem_private_key = FileText(flags[3]);
    tls.pem_root_certs = FileText(flags[5]);
    session->stub = v1::AgentService::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port_), grpc::SslCredentials(tls)));
    session->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    session->stream = session->stub->Connect(&session->context);
    return session;
  }

  ScratchDir dir_;
  std::string config_;
  int starts_ = 0;
  int http_port_ = 0, grpc_port_ = 0;
  std::unique_ptr<Daemon> coordinator_;
  std::vector<std::unique_ptr<Daemon>> agents_;
  std::vector<std::unique_ptr<simdjson::dom::parser>> documents_;
};

}  // namespace podscope::testing
