// Against the real daemons: every protected route refuses the unauthenticated and the
// under-privileged (walked from the OpenAPI document, which a unit test holds equal to the
// router), tokens never reach the logs, HTTPS only, and agents over mutual TLS: unknown and
// expired certificates are refused and counted, the agent checks the coordinator's name, and an
// agent is the identity its certificate states.
#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/parse_number.h"
#include "coordinator/auth/token_store.h"
#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/daemon.h"
#include "tests/integration/raw_client.h"
#include "tests/integration/test_security.h"
#include "tests/test_paths.h"

namespace podscope::testing {
namespace {

class SecurityTest : public CoordinatorTest {
 protected:
  int GrpcPort() {
    return static_cast<int>(
        common::ParseInt(daemon_->WaitForLog("agents on grpc://[^:]+:([0-9]+)")).value());
  }

  std::unique_ptr<Daemon> StartAgent(const std::string& id, const std::vector<std::string>& tls,
                                     const std::string& job = "secure",
                                     const std::string& coordinator = "") {
    return std::make_unique<Daemon>(
        AgentBinary(),
        Concat({"--coordinator",
                coordinator.empty() ? "127.0.0.1:" + std::to_string(GrpcPort()) : coordinator,
                "--simulate", "ranks=0-1,world=2,job=" + job + ",profile=light"},
               tls),
        dir_.File("agent-" + id + ".log"));
  }

  static bool IsProblem(const HttpResult& r) {
    return r.headers.count("content-type") > 0 &&
           r.headers.at("content-type") == "application/problem+json";
  }
};

int RoleRank(std::string_view role) {
  return role == "open" ? 0 : role == "read" ? 1 : role == "capture" ? 2 : 3;
}

TEST_F(SecurityTest, EveryProtectedRouteRefusesTheUnauthenticatedAndTheUnderPrivileged) {
  StartDaemon();
  TestSecurity& security = TestSecurity::Get();
  const HttpResult document =
      HttpCallWithToken(port_, security.read_token, "GET", "/v1/openapi.json");
  ASSERT_EQ(document.status, 200);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(document.body).get(doc), simdjson::SUCCESS);
  const std::vector<std::pair<std::string, std::string>> tokens = {
      {"read", security.read_token},
      {"capture", security.capture_token},
      {"admin", security.admin_token}};
  int routes = 0, open = 0;
  for (auto [path_view, item] : doc["paths"].get_object()) {
    std::string path(path_view);
    for (const auto& [param, value] :
         {std::pair{"{id}", "no-such-capture"}, std::pair{"{report}", "summary"},
          std::pair{"{file}", "app.js"}}) {
      for (size_t at = path.find(param); at != std::string::npos; at = path.find(param)) {
        path.replace(at, std::string(param).size(), value);
      }
    }
    for (auto [method_view, operation] : item.get_object()) {
      if (method_view == "parameters") continue;
      std::string method(method_view);
      for (char& c : method) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      std::string_view role;
      ASSERT_EQ(operation["x-podscope-role"].get_string().get(role), simdjson::SUCCESS)
          << method << " " << path;
      ++routes;
      const std::string body = method == "POST" ? "{}" : "";
      const std::string type = method == "POST" ? "application/json" : "";
      const std::string what = method + " " + path + " (" + std::string(role) + ")";
      const HttpResult anonymous = HttpCallWithToken(port_, "", method, path, body, type);
      if (role == "open") {
        ++open;
        EXPECT_EQ(anonymous.status, 200) << what;
        continue;
      }
      EXPECT_EQ(anonymous.status, 401) << what;
      EXPECT_TRUE(IsProblem(anonymous)) << what;
      EXPECT_EQ(anonymous.headers.count("www-authenticate")
                    ? anonymous.headers.at("www-authenticate")
                    : "",
                "Bearer realm=\"podscope\"")
          << what;
      const HttpResult forged =
          HttpCallWithToken(port_, "not-a-token-anybody-holds-0123", method, path, body, type);
      EXPECT_EQ(forged.status, 401) << what;
      for (const auto& [token_role, token] : tokens) {
        const HttpResult r = HttpCallWithToken(port_, token, method, path, body, type);
        if (RoleRank(token_role) < RoleRank(role)) {
          EXPECT_EQ(r.status, 403) << what << " with a " << token_role << " token";
          EXPECT_TRUE(IsProblem(r)) << what;
          EXPECT_NE(r.body.find("needs role " + std::string(role)), std::string::npos) << r.body;
        } else {
          EXPECT_NE(r.status, 401) << what << " with a " << token_role << " token";
          EXPECT_NE(r.status, 403) << what << " with a " << token_role << " token";
        }
      }
    }
  }
  EXPECT_GE(routes, 13);
  EXPECT_EQ(open, 4);  // /healthz, /readyz and the web UI's files (they hold no data)
  // Failures are counted, and no token (right or wrong) is ever logged.
  EXPECT_NE(Metric(port_, R"(podscope_auth_failures_total{reason="missing_token"})"), "0");
  EXPECT_NE(Metric(port_, R"(podscope_auth_failures_total{reason="forbidden"})"), "0");
  daemon_->Terminate();
  const std::string log = daemon_->Log();
  // Refusals are logged (rate-limited: some of them), naming the caller, never the token.
  EXPECT_NE(log.find("auth: 127.0.0.1:"), std::string::npos) << log;
  for (const std::string& token :
       {security.read_token, security.capture_token, security.admin_token,
        std::string("not-a-token-anybody-holds-0123")}) {
    EXPECT_EQ(log.find(token), std::string::npos) << "a token is in the log";
  }
}

TEST_F(SecurityTest, TokensAreReloadedOnSighupAndMetricsCanBeOpened) {
  const std::string tokens = dir_.File("tokens");
  std::filesystem::copy_file(TestSecurity::Get().tokens_file(), tokens);
  std::ofstream(dir_.File("open.json"))
      << R"({"auth": {"tokens_file": ")" << tokens << R"(", "open_metrics": true}})";
  std::vector<std::string> flags = TestSecurity::Get().CoordinatorFlags();
  flags.resize(6);  // the TLS files; the tokens come from the config
  StartDaemon(Concat({"--config", dir_.File("open.json")}, flags));
  EXPECT_EQ(HttpCallWithToken(port_, "", "GET", "/metrics").status, 200);
  EXPECT_EQ(HttpCallWithToken(port_, "", "GET", "/v1/captures").status, 401);
  const std::string fresh = "rotated-token-0123456789abcdef";
  std::ofstream(tokens) << "# rotated\n"
                        << *coordinator::HashTokenLine("ops", http::Access::kRead, fresh) << "\n";
  daemon_->Signal(SIGHUP);
  ASSERT_NE(daemon_->WaitForLog("SIGHUP: 1 bearer tokens"), "") << daemon_->Log();
  EXPECT_NE(daemon_->WaitForLog("SIGHUP: certificate, key and CA re-read"), "");
  EXPECT_EQ(HttpCallWithToken(port_, fresh, "GET", "/v1/captures").status, 200);
  EXPECT_EQ(HttpCallWithToken(port_, TestSecurity::Get().admin_token, "GET", "/v1/captures").status,
            401);
  // A broken file keeps the tokens in force.
  std::ofstream(tokens) << "ops read not-a-hash\n";
  daemon_->Signal(SIGHUP);
  ASSERT_NE(daemon_->WaitForLog("SIGHUP: keeping the old tokens: .*line 1"), "") << daemon_->Log();
  EXPECT_EQ(HttpCallWithToken(port_, fresh, "GET", "/v1/captures").status, 200);
}

TEST_F(SecurityTest, PlaintextIsRefusedUnlessInsecureIsAsked) {
  // Without certificates and tokens the coordinator does not start, and says what to give.
  Daemon bare(CoordinatorBinary(),
              {"--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--data-dir", dir_.File("b")},
              dir_.File("bare.log"));
  EXPECT_EQ(bare.WaitForExit(), 2);
  EXPECT_NE(bare.Log().find("needs --tls-cert, --tls-key and --tls-ca"), std::string::npos)
      << bare.Log();
  Daemon bare_agent(AgentBinary(), {"--simulate", "ranks=0,world=1,job=x"},
                    dir_.File("bare-agent.log"));
  EXPECT_EQ(bare_agent.WaitForExit(), 2);
  EXPECT_NE(bare_agent.Log().find("podscope-agent needs --tls-cert"), std::string::npos)
      << bare_agent.Log();
  std::vector<std::string> tls_only = TestSecurity::Get().CoordinatorFlags();
  tls_only.resize(6);  // without --auth-tokens
  Daemon no_tokens(
      CoordinatorBinary(),
      Concat({"--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--data-dir", dir_.File("c")},
             tls_only),
      dir_.File("no-tokens.log"));
  EXPECT_EQ(no_tokens.WaitForExit(), 2);
  EXPECT_NE(no_tokens.Log().find("needs --auth-tokens FILE"), std::string::npos) << no_tokens.Log();

  // With TLS on, plain HTTP to the REST port gets no answer, and the failed handshake is counted.
  StartDaemon();
  const int tls_port = port_;
  const PortSecurity tls = GetPortSecurity(tls_port);
  SetPortSecurity(tls_port, {});
  EXPECT_EQ(RawExchange(tls_port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").find("HTTP/1.1"),
            std::string::npos);
  SetPortSecurity(tls_port, tls);
  EXPECT_EQ(Metric(tls_port, "podscope_http_tls_handshake_failures_total"), "1");
  // The CLI told http:// (or no scheme) for a TLS port says to use https://.
  const std::string https = "https://127.0.0.1:" + std::to_string(tls_port);
  for (const std::string& url :
       {"http://127.0.0.1:" + std::to_string(tls_port), "127.0.0.1:" + std::to_string(tls_port)}) {
    const std::string err_file = dir_.File("plain-cli.err");
    const int status = std::system(
        (CliBinary() + " --server " + url + " captures >/dev/null 2>" + err_file).c_str());
    EXPECT_EQ(WEXITSTATUS(status), 1) << url;
    std::ifstream in(err_file);
    const std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(err.find("use " + https), std::string::npos) << url << ": " << err;
  }
  // Over HTTPS every answer, streamed or not, holds HSTS: browsers come back over HTTPS only.
  for (const char* target : {"/healthz", "/v1/captures", "/v1/nosuch", "/metrics"}) {
    const HttpResult answer = HttpCall(tls_port, "GET", target);
    ASSERT_EQ(answer.headers.count("strict-transport-security"), 1u) << target;
    EXPECT_EQ(answer.headers.at("strict-transport-security"), "max-age=31536000") << target;
  }
  // A plaintext agent gets no session from a TLS coordinator.
  std::unique_ptr<Daemon> plain = StartAgent("plain", {"--insecure"});
  EXPECT_NE(plain->WaitForLog("wants mutual TLS: give --tls-cert, --tls-key and --tls-ca"), "")
      << plain->Log();

  // --insecure runs plaintext, and says so.
  daemon_.reset();
  StartDaemon({"--insecure"});
  EXPECT_NE(daemon_->Log().find("--insecure: the REST API and the agents' port speak plaintext"),
            std::string::npos);
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures").status, 200);
  EXPECT_EQ(HttpCall(port_, "GET", "/healthz").headers.count("strict-transport-security"), 0u)
      << "plain HTTP says nothing of HTTPS";
}

TEST_F(SecurityTest, AgentsAreRefusedForUnknownOrExpiredCertificatesAndCheckTheCoordinatorsName) {
  StartDaemon();
  TestSecurity& security = TestSecurity::Get();
  // Another CA's certificate, and an expired one of the right CA.
  const std::string rogue = dir_.File("rogue");
  ASSERT_TRUE(TestSecurity::DevCerts(rogue, "--agent stranger"));
  const std::string expired = dir_.File("expired");
  std::filesystem::create_directories(expired);
  std::filesystem::copy_file(security.dir() + "/ca.pem", expired + "/ca.pem");
  std::filesystem::copy_file(security.dir() + "/ca.key", expired + "/ca.key");
  ASSERT_TRUE(TestSecurity::DevCerts(expired, "--expired-agent old"));
  std::unique_ptr<Daemon> stranger =
      StartAgent("stranger", {"--tls-cert", rogue + "/agent-stranger.pem", "--tls-key",
                              rogue + "/agent-stranger.key", "--tls-ca", security.ca()});
  std::unique_ptr<Daemon> old =
      StartAgent("old", {"--tls-cert", expired + "/agent-old.pem", "--tls-key",
                         expired + "/agent-old.key", "--tls-ca", security.ca()});
  EXPECT_NE(
      daemon_->WaitForLog(
          "refused an agent's TLS handshake \\(certificate CN=stranger\\): unable to get local "
          "issuer certificate"),
      "");
  EXPECT_NE(
      daemon_->WaitForLog(
          "refused an agent's TLS handshake \\(certificate CN=old\\): certificate has expired"),
      "");
  // The coordinator's own certificate is for serving (serverAuth only): as an agent's, refused.
  std::unique_ptr<Daemon> itself =
      StartAgent("itself", {"--tls-cert", security.dir() + "/coordinator.pem", "--tls-key",
                            security.dir() + "/coordinator.key", "--tls-ca", security.ca()});
  EXPECT_NE(daemon_->WaitForLog("refused an agent's TLS handshake \\(certificate CN=localhost\\): "
                                "unsuitable certificate purpose"),
            "")
      << daemon_->Log() << itself->Log();
  EXPECT_NE(Metric(port_, R"(podscope_grpc_refused_handshakes_total{reason="unknown_ca"})"), "0");
  EXPECT_NE(Metric(port_, R"(podscope_grpc_refused_handshakes_total{reason="expired"})"), "0");
  EXPECT_NE(stranger->WaitForLog("no TLS session came up"), "") << stranger->Log();

  // The coordinator's certificate names only other.example: an agent dialling 127.0.0.1 refuses
  // it; told that name (--tls-server-name), it connects.
  const std::string named = dir_.File("named");
  std::filesystem::create_directories(named);
  std::filesystem::copy_file(security.dir() + "/ca.pem", named + "/ca.pem");
  std::filesystem::copy_file(security.dir() + "/ca.key", named + "/ca.key");
  ASSERT_TRUE(TestSecurity::DevCerts(named, "--coordinator-name other.example"));
  std::vector<std::string> flags = security.CoordinatorFlags();
  flags[1] = named + "/coordinator.pem";
  flags[3] = named + "/coordinator.key";
  Daemon other(
      CoordinatorBinary(),
      Concat({"--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--data-dir", dir_.File("other")},
             flags),
      dir_.File("other.log"));
  const std::string other_grpc = "127.0.0.1:" + other.WaitForLog("agents on grpc://[^:]+:([0-9]+)");
  std::unique_ptr<Daemon> wary =
      StartAgent("wary", security.AgentFlags("wary"), "secure", other_grpc);
  // (The same certificates, only the name differs: the name is what it refused.)
  EXPECT_NE(wary->WaitForLog("no TLS session came up"), "") << wary->Log();
  std::unique_ptr<Daemon> told = StartAgent(
      "told", Concat(security.AgentFlags("told"), {"--tls-server-name", "other.example"}), "secure",
      other_grpc);
  EXPECT_NE(other.WaitForLog("agent told connected from"), "") << told->Log();
}

TEST_F(SecurityTest, AnAgentIsItsCertificatesIdentityAndJobsCanBeRestricted) {
  std::ofstream(dir_.File("jobs.json")) << R"({"agents": {"jobs": {"secret": ["trusted"]}}})";
  StartDaemon({"--config", dir_.File("jobs.json")});
  TestSecurity& security = TestSecurity::Get();
  // The agent takes its id from its certificate, and refuses to claim another.
  Daemon liar(AgentBinary(),
              Concat({"--coordinator", "127.0.0.1:" + std::to_string(GrpcPort()), "--agent-id",
                      "someone-else", "--simulate", "ranks=0,world=1,job=x"},
                     security.AgentFlags("liar")),
              dir_.File("liar.log"));
  EXPECT_EQ(liar.WaitForExit(), 2);
  EXPECT_NE(
      liar.Log().find("--agent-id someone-else is not the identity of its certificate (CN=liar)"),
      std::string::npos)
      << liar.Log();
  std::unique_ptr<Daemon> trusted = StartAgent("trusted", security.AgentFlags("trusted"), "secret");
  std::unique_ptr<Daemon> other =
      StartAgent("untrusted", security.AgentFlags("untrusted"), "secret");
  EXPECT_NE(daemon_->WaitForLog("agent trusted connected from"), "");
  EXPECT_NE(
      daemon_->WaitForLog(
          "agent untrusted: worker rank 0 pid [0-9]+ ignored: agent untrusted may not serve job "
          "secret \\(agents.jobs\\)"),
      "");
  EXPECT_NE(daemon_->WaitForLog("agent untrusted connected from"), "");
  const HttpResult workers = HttpCall(port_, "GET", "/v1/workers?job=secret");
  EXPECT_NE(workers.body.find("\"agent_id\":\"trusted\""), std::string::npos) << workers.body;
  // Two ranks each, one agent's dropped.
  EXPECT_NE(workers.body.find("\"worker_count\":2}"), std::string::npos) << workers.body;
}

}  // namespace
}  // namespace podscope::testing
