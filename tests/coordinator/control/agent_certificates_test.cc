// AgentCertificates in this process, on certificates made by scripts/dev-certs.sh: which agent
// certificates the agents' port takes, why it refuses the others, and what it counts. Running
// here rather than inside a daemon also puts every OpenSSL object it makes and frees under this
// process's leak check (the daemons' exit-time check leaves out OpenSSL's allocations).
#include "coordinator/control/agent_certificates.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/test_security.h"
#include "tests/test_paths.h"

namespace podscope::coordinator {
namespace {

std::string Read(const std::string& path) { return testing::FileBytes(path); }

class AgentCertificatesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::TestSecurity::DevCerts(
        dir_.path(), "--coordinator-name localhost --agent node-a --expired-agent old-node"));
    ASSERT_TRUE(testing::TestSecurity::DevCerts(other_ca_.path(), "--agent node-a"));
  }

  testing::ScratchDir dir_;
  testing::ScratchDir other_ca_;  // another CA, with its own "node-a"
};

TEST_F(AgentCertificatesTest, AnAgentOfTheCaIsTakenAndEveryOtherIsRefusedWithItsReason) {
  AgentCertificates certificates(dir_.File("ca.pem"));
  ASSERT_TRUE(certificates.Load().ok());
  const std::string agent = Read(dir_.File("agent-node-a.pem"));
  std::string reason;
  EXPECT_TRUE(certificates.Verify(agent, agent, &reason)) << reason;
  // The leaf and the CA in the chain, CA first, as gRPC can hand them over.
  EXPECT_TRUE(certificates.Verify(agent, Read(dir_.File("ca.pem")) + agent, &reason)) << reason;

  struct Refused {
    std::string what, leaf, reason;
  };
  const std::vector<Refused> refused = {
      {"another CA's agent of the same name", Read(other_ca_.File("agent-node-a.pem")),
       "unable to get local issuer certificate"},
      {"an expired agent", Read(dir_.File("agent-old-node.pem")), "certificate has expired"},
      {"the coordinator's own (server only)", Read(dir_.File("coordinator.pem")),
       "unsuitable certificate purpose"},
      {"no certificate", "", "no client certificate"},
      {"not PEM", "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n",
       "no client certificate"},
  };
  for (const Refused& r : refused) {
    reason.clear();
    EXPECT_FALSE(certificates.Verify(r.leaf, r.leaf, &reason)) << r.what;
    EXPECT_EQ(reason, r.reason) << r.what;
  }
  // An untrusted CA in the chain does not make its agents trusted: only the CA file is.
  EXPECT_FALSE(certificates.Verify(Read(other_ca_.File("agent-node-a.pem")),
                                   Read(other_ca_.File("ca.pem")), &reason));
  EXPECT_EQ(reason, "self-signed certificate in certificate chain");

  std::string metrics;
  certificates.AppendMetrics(&metrics);
  for (const char* line : {"podscope_grpc_refused_handshakes_total{reason=\"unknown_ca\"} 2\n",
                           "podscope_grpc_refused_handshakes_total{reason=\"expired\"} 1\n",
                           "podscope_grpc_refused_handshakes_total{reason=\"wrong_purpose\"} 1\n",
                           "podscope_grpc_refused_handshakes_total{reason=\"no_certificate\"} 2\n"})
    EXPECT_NE(metrics.find(line), std::string::npos) << line << " in\n" << metrics;
}

TEST_F(AgentCertificatesTest, ABadCaFileIsNamedAndTheOldCaStays) {
  AgentCertificates certificates(dir_.File("ca.pem"));
  ASSERT_TRUE(certificates.Load().ok());
  const std::string agent = Read(dir_.File("agent-node-a.pem"));

  AgentCertificates missing(dir_.File("absent.pem"));
  const absl::Status no_file = missing.Load();
  EXPECT_FALSE(no_file.ok());
  EXPECT_NE(no_file.message().find("absent.pem"), std::string::npos) << no_file;

  // The CA file replaced by something that is not a certificate: Load says so, and the CA read
  // before still decides.
  std::ofstream(dir_.File("ca.pem"), std::ios::trunc) << "not a certificate\n";
  const absl::Status bad = certificates.Load();
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("ca.pem"), std::string::npos) << bad;
  std::string reason;
  EXPECT_TRUE(certificates.Verify(agent, agent, &reason)) << reason;
}

}  // namespace
}  // namespace podscope::coordinator
