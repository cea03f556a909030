// Certificates, keys and bearer tokens for tests that run the daemons as deployed: made once per
// test binary at first use (scripts/dev-certs.sh, the coordinator's token hashing), in a scratch
// directory removed at exit.
#pragma once

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "tests/test_paths.h"

namespace podscope::testing {

class TestSecurity {
 public:
  // Thread-safe.
  static TestSecurity& Get();

  std::string ca() const { return dir_.File("ca.pem"); }
  std::string tokens_file() const { return dir_.File("tokens"); }
  std::string dir() const { return dir_.path(); }
  // One token per role.
  const std::string read_token = "test-read-token-0123456789abcdef";
  const std::string capture_token = "test-capture-token-0123456789abcdef";
  const std::string admin_token = "test-admin-token-0123456789abcdef";

  // --tls-cert, --tls-key, --tls-ca (the coordinator's, for localhost and 127.0.0.1) and
  // --auth-tokens.
  std::vector<std::string> CoordinatorFlags() const;
  // --tls-cert, --tls-key, --tls-ca of an agent certificate for `agent_id` (made on first use).
  std::vector<std::string> AgentFlags(const std::string& agent_id);
  // Runs scripts/dev-certs.sh into `dir` with `args`; true on success.
  static bool DevCerts(const std::string& dir, const std::string& args);

 private:
  TestSecurity();
  ScratchDir dir_;
  absl::Mutex mu_;
  std::vector<std::string> agents_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podscope::testing
