#include "tests/integration/test_security.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "coordinator/auth/token_store.h"
#include "tests/test_paths.h"

namespace podscope::testing {

TestSecurity& TestSecurity::Get() {
  static TestSecurity* security = new TestSecurity();  // lives to the end: daemons use its files
  return *security;
}

bool TestSecurity::DevCerts(const std::string& dir, const std::string& args) {
  const std::string command = std::string("bash ") + SourceDir() + "/scripts/dev-certs.sh " + dir +
                              " " + args + " >/dev/null";
  return std::system(command.c_str()) == 0;
}

TestSecurity::TestSecurity() {
  if (!DevCerts(dir_.path(), "--coordinator-name localhost --coordinator-name 127.0.0.1")) {
    ADD_FAILURE() << "scripts/dev-certs.sh failed (is openssl installed?)";
  }
  std::ofstream tokens(tokens_file());
  tokens << "# test tokens, one per role\n";
  for (const auto& [name, role, token] :
       {std::tuple{"reader", http::Access::kRead, read_token},
        std::tuple{"capturer", http::Access::kCapture, capture_token},
        std::tuple{"admin", http::Access::kAdmin, admin_token}}) {
    tokens << coordinator::HashTokenLine(name, role, token).value() << "\n";
  }
}

std::vector<std::string> TestSecurity::CoordinatorFlags() const {
  return {"--tls-cert",    dir_.File("coordinator.pem"),
          "--tls-key",     dir_.File("coordinator.key"),
          "--tls-ca",      ca(),
          "--auth-tokens", tokens_file()};
}

std::vector<std::string> TestSecurity::AgentFlags(const std::string& agent_id) {
  absl::MutexLock lock(&mu_);
  if (std::find(agents_.begin(), agents_.end(), agent_id) == agents_.end()) {
    if (!DevCerts(dir_.path(), "--agent " + agent_id))
      ADD_FAILURE() << "no certificate for agent " << agent_id;
    agents_.push_back(agent_id);
  }
  return {"--tls-cert", dir_.File("agent-" + agent_id + ".pem"),
          "--tls-key",  dir_.File("agent-" + agent_id + ".key"),
          "--tls-ca",   ca()};
}

}  // namespace podscope::testing
