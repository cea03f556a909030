// The agent's health endpoint for Kubernetes probes and container HEALTHCHECKs: plain HTTP on
// an address of its own, no data, nothing to authenticate.
//   GET /healthz  200 while the agent runs
//   GET /readyz   200 once it is connected to every coordinator it needs, else 503 and why
// It is the shared HTTP server (http/http_server.h) with two open routes and small bounds: at
// most 64 connections, one request each, 8 KiB of headers, a request within 2 s of connecting
// and no bodies; when full, the connection waiting longest gives way to a newcomer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "http/http_server.h"
#include "http/http_types.h"

namespace podscope::agent {

class HealthServer {
 public:
  // `ready` says whether the agent is ready, and if not, why (called on the server's threads).
  using ReadyCheck = std::function<bool(std::string* why)>;
  // Listens on HOST:PORT (port 0: any free port).
  static absl::StatusOr<std::unique_ptr<HealthServer>> Start(const std::string& address,
                                                             ReadyCheck ready);
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;
  uint16_t port() const { return port_; }

 private:
  explicit HealthServer(ReadyCheck ready);

  ReadyCheck ready_;
  http::Router router_;  // outlives server_, which holds it by reference
  std::unique_ptr<http::HttpServer> server_;
  uint16_t port_ = 0;
};

}  // namespace podscope::agent
