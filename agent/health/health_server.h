// The agent's health endpoint for Kubernetes probes and container HEALTHCHECKs: plain HTTP on
// an address of its own, no data, nothing to authenticate.
//   GET /healthz  200 while the agent runs
//   GET /readyz   200 once it is connected to every coordinator it needs, else 503 and why
// One request per connection, on the server's own thread, at most 16 connections at once; a
// client gets 2 s to send at most 8 KiB of headers and 2 s to take the answer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace podscope::agent {

class HealthServer {
 public:
  // `ready` says whether the agent is ready, and if not, why (called on the server's thread).
  using ReadyCheck = std::function<bool(std::string* why)>;
  // Listens on HOST:PORT (port 0: any free port).
  static absl::StatusOr<std::unique_ptr<HealthServer>> Start(const std::string& address,
                                                             ReadyCheck ready);
  ~HealthServer();
  uint16_t port() const;

  struct State;  // public for the server's coroutines; defined in the .cc

 private:
  explicit HealthServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace podscope::agent
