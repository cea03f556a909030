// A real podscope-coordinator on port 0 with a temporary store, for integration tests that
// talk to it over HTTP.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/daemon.h"
#include "tests/integration/test_security.h"
#include "tests/test_paths.h"

namespace podscope::testing {

inline std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class CoordinatorTest : public ::testing::Test {
 protected:
  void StartDaemon(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"--http",      "127.0.0.1:0", "--grpc",
                                     "127.0.0.1:0", "--data-dir",  dir_.File("store")};
    args.insert(args.end(), extra.begin(), extra.end());
    // As deployed: HTTPS, mutual TLS for agents, bearer tokens (unless the test gives its own, or
    // asks for --insecure).
    if (std::find(extra.begin(), extra.end(), "--insecure") == extra.end() &&
        std::find(extra.begin(), extra.end(), "--tls-cert") == extra.end()) {
      args = Concat(args, TestSecurity::Get().CoordinatorFlags());
    }
    // A fresh log per start: the port is read from it.
    const std::string log = dir_.File("coordinator-" + std::to_string(++starts_) + ".log");
    daemon_ = std::make_unique<Daemon>(CoordinatorBinary(), args, log);
    port_ = daemon_->WaitForPort();
    ASSERT_GT(port_, 0) << FileBytes(log);
    // The CLI run by tests talks to it as an admin would.
    const PortSecurity security = GetPortSecurity(port_);
    setenv("PODSCOPE_TOKEN", security.token.c_str(), 1);
    setenv("PODSCOPE_CA_CERT", security.ca_file.c_str(), 1);
  }
  HttpResult Import(const std::string& capture, int rank) {
    const std::string file = "sampled_rank-" + std::to_string(rank) + ".json.gz";
    return HttpCall(port_, "POST",
                    "/v1/captures:import?job=tf&capture=" + capture + "&name=" + file,
                    FileBytes(KinetoFixture("trace_filter/" + file)), "application/gzip");
  }
  size_t CaptureCount() {
    const HttpResult r = HttpCall(port_, "GET", "/v1/captures?limit=1000");
    size_t n = 0;
    for (size_t at = r.body.find("\"id\":"); at != std::string::npos;
         at = r.body.find("\"id\":", at + 1))
      ++n;
    return n;
  }

  ScratchDir dir_;
  std::unique_ptr<Daemon> daemon_;
  int port_ = -1;
  int starts_ = 0;
};

}  // namespace podscope::testing
