// The shared HTTP/1.1 server (Boost.Beast) of the coordinator's REST API and web UI and of the
// agent's health endpoint: one io_context on a small thread pool for sockets, a separate pool
// for heavy handlers (analyses) so a long analysis never stalls the API. Every body has a
// bound; uploads stream to disk.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "http/http_types.h"

namespace podscope::http {

// Thread names (pthread_setname_np) of the server's two pools, as `top -H` and tests see them.
inline constexpr char kIoThreadName[] = "podscope-http";
inline constexpr char kHeavyThreadName[] = "podscope-heavy";
inline constexpr char kStreamThreadName[] = "podscope-stream";
inline constexpr char kForwardThreadName[] = "podscope-forward";

struct HttpLimits {
  uint64_t max_body_bytes = 1 << 20;         // JSON request bodies
  uint64_t max_upload_bytes = 512ull << 20;  // streamed uploads
  uint32_t max_header_bytes = 16 << 10;
  uint32_t max_connections = 512;
  uint32_t max_connections_per_client = 64;  // per client IP address
  // Of those, connections with no authorized request yet (handshake under way, no token, a
  // refused one): the oldest is dropped when a new one needs room (connection_limits.h).
  uint32_t max_unauthenticated_connections = 128;
  uint32_t max_unauthenticated_per_client = 32;
  // A connection is not dropped for a newcomer before this age (or this long idle), unless
  // the newcomer's address is proven: one of its connections authenticated within
  // proven_client_seconds.
  uint32_t min_eviction_age_ms = 1000;
  uint32_t proven_client_seconds = 600;
  // Authenticated connections of one token at once: for its next, its own connection waiting
  // longest for a request gives way (after min_eviction_age_ms), else the next gets a 503.
  uint32_t max_connections_per_token = 128;
  uint32_t tls_handshake_timeout_seconds = 5;
  uint32_t idle_timeout_seconds = 60;    // keep-alive: waiting for a request's first byte
  uint32_t header_timeout_seconds = 10;  // the whole header, from its first byte
  // Bodies and responses must move at least min_progress_bytes every progress_interval_seconds.
  uint32_t progress_interval_seconds = 10;
  uint32_t min_progress_bytes = 16 << 10;
  int io_threads = 2;
  int heavy_threads = 2;
  int stream_threads = 2;  // streamed bodies (exports) being produced at once; more wait their turn
  int forward_threads =
      8;  // calls waiting on other shards at once (blocked on the network, not a core)
  std::string upload_dir = "/tmp";  // where streamed uploads land (removed after the handler)
  // false: one request per connection, closed after its answer ("Connection: close"), so that
  // a client keeping connections alive cannot hold the slots a newcomer needs.
  bool keep_alive = true;
};

// The server's certificate chain and key, PEM files.
struct HttpTlsFiles {
  std::string cert_file;
  std::string key_file;
};

struct HttpCounters {
  std::atomic<uint64_t> requests{0}, responses_2xx{0}, responses_4xx{0}, responses_5xx{0};
  std::atomic<uint64_t> latency_ns_total{0};
  std::atomic<uint64_t> open_connections{0};
  // Connections refused: the server is full, the client holds its share, no descriptor left,
  // the token holds its share.
  std::atomic<uint64_t> rejected_server_full{0}, rejected_client_full{0},
      rejected_no_descriptors{0}, rejected_token_full{0};
  // Connections dropped for not moving: the header, a body, a response the client did not read.
  std::atomic<uint64_t> timeouts_header{0}, timeouts_body{0}, timeouts_response{0};
  std::atomic<uint64_t> malformed_requests{0};
  std::atomic<uint64_t> tls_handshake_failures{0};
  // Connections with no authorized request yet, and those dropped to make room for newer ones:
  // unauthenticated, or authenticated and idle between requests.
  std::atomic<uint64_t> unauthenticated_connections{0}, evicted_unauthenticated{0}, evicted_idle{0};
};

// Owned by the daemon's main; Start/Stop from one thread, handlers on the pools.
class HttpServer {
 public:
  HttpServer(const Router& router, HttpLimits limits);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Checks every request against its route's access (before the body is read). Without one,
  // every route is open (--insecure without --auth-tokens). Set before Start; not owned.
  void set_authorizer(Authorizer* authorizer);
  // Serves HTTPS with this certificate and key, read now (errors name the file and OpenSSL's
  // reason). Called again (SIGHUP), it replaces them for new connections; on an error the old
  // ones stay. Without it the server speaks plain HTTP.
  absl::Status EnableTls(const HttpTlsFiles& files);
  // Binds and starts serving; port 0 picks a free port. Returns the bound port.
  absl::StatusOr<uint16_t> Start(const std::string& host, uint16_t port);
  // Stops accepting, lets in-flight requests finish (up to `grace_seconds`), joins threads.
  void Stop(int grace_seconds = 10);
  const HttpCounters& counters() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace podscope::http
