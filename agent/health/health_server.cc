#include "agent/health/health_server.h"

#include <utility>

#include "common/host_port.h"
#include "common/str_util.h"

namespace podscope::agent {
namespace {

// Health checks come from the kubelet or a container runtime on the node: a handful of
// connections, short headers, no bodies, and nothing to wait for.
http::HttpLimits HealthLimits() {
  http::HttpLimits limits;
  limits.max_body_bytes = 0;
  limits.max_upload_bytes = 0;
  limits.max_header_bytes = 8 << 10;
  // One request per connection, and connections yet to send a request (48 at most, of 64)
  // give way to a newcomer at once, the oldest first: connections held open or left silent
  // cannot keep a prober out.
  limits.max_connections = 64;
  limits.max_connections_per_client = 64;
  limits.max_unauthenticated_connections = 48;
  limits.max_unauthenticated_per_client = 48;
  limits.max_connections_per_token = 64;
  limits.keep_alive = false;
  limits.min_eviction_age_ms = 0;
  limits.proven_client_seconds = 0;
  limits.idle_timeout_seconds = 2;
  limits.header_timeout_seconds = 2;
  limits.progress_interval_seconds = 2;
  limits.io_threads = 1;
  limits.heavy_threads = 1;
  limits.stream_threads = 1;
  limits.forward_threads = 1;
  return limits;
}

http::HttpResponse PlainText(int status, std::string body) {
  http::HttpResponse response;
  response.status = status;
  response.content_type = "text/plain";
  response.body = std::move(body);
  return response;
}

}  // namespace

HealthServer::HealthServer(ReadyCheck ready) : ready_(std::move(ready)) {
  router_.Add({.method = "GET",
               .pattern = "/healthz",
               .handler = [](http::HttpRequest&) { return PlainText(200, "ok\n"); },
               .access = http::Access::kOpen});
  router_.Add({.method = "GET",
               .pattern = "/readyz",
               .handler =
                   [this](http::HttpRequest&) {
                     std::string why;
                     if (ready_(&why)) return PlainText(200, "ready\n");
                     return PlainText(503, why + "\n");
                   },
               .access = http::Access::kOpen});
}

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(const std::string& address,
                                                                  ReadyCheck ready) {
  const absl::StatusOr<common::HostPort> parsed =
      common::ParseHostPort(address, {.allow_port_zero = true});
  if (!parsed.ok())
    return absl::InvalidArgumentError(common::StrCat("health: ", parsed.status().message()));
  std::unique_ptr<HealthServer> health(new HealthServer(std::move(ready)));
  health->server_ = std::make_unique<http::HttpServer>(health->router_, HealthLimits());
  const absl::StatusOr<uint16_t> port = health->server_->Start(parsed->host, parsed->port);
  if (!port.ok())
    return absl::Status(port.status().code(), common::StrCat("health: ", port.status().message()));
  health->port_ = *port;
  return health;
}

HealthServer::~HealthServer() {
  if (server_ != nullptr) server_->Stop(/*grace_seconds=*/1);
}

}  // namespace podscope::agent
