// The agents' gRPC port, accepted by podscope rather than by gRPC, so that connections are
// bounded: all of them, and per client address (gRPC 1.51 has no such bound; 2,000 idle HTTP/2
// connections were accepted). An admitted connection is handed to the gRPC server through its
// external-connection acceptor, with the server's credentials, and counted until gRPC closes
// it; a refused one is closed at once (agents retry with backoff). Out of descriptors, the gate
// sheds the pending connection with a reserve descriptor and backs off instead of spinning.
//
// Until its first call reaches the agent service (Authenticated), a connection is in the
// unauthenticated share (connection_limits.h): stalled TLS handshakes cannot take the slots of
// agents, because the oldest is shut down when a new connection needs room. For that the gate
// keeps its own duplicate of each such descriptor: shutting down the socket through it cannot
// hit another file that reuses gRPC's number.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "http/connection_limits.h"
#include "http/rate_limited_log.h"

namespace grpc::experimental {
class ExternalConnectionAcceptor;
}

namespace podscope::coordinator {

struct GrpcGateOptions {
  uint32_t max_connections = 16384;
  uint32_t max_connections_per_client = 64;
  uint32_t max_unauthenticated_connections = 1024;
  uint32_t max_unauthenticated_per_client = 16;
  // Agents are near (the cluster network) and retry on their own: a short minimum age, so that
  // a new agent is refused rarely under a flood, and still has time to make its first call.
  uint32_t min_eviction_age_ms = 100;  // connection_limits.h
  uint32_t proven_client_seconds = 600;
};

// Owned by the daemon's main; Listen and Start/Stop from one thread, its own thread accepts.
class GrpcConnectionGate {
 public:
  GrpcConnectionGate(GrpcGateOptions options,
                     std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor);
  ~GrpcConnectionGate();

  // Binds and listens; port 0 picks a free one. Returns the bound port.
  absl::StatusOr<uint16_t> Listen(const std::string& host, uint16_t port);
  void Start();
  void Stop();

  uint32_t open_connections() const { return limits_.open(); }
  // A call from `grpc_peer` ("ipv4:10.0.0.1:41234", "ipv6:[::1]:41234") reached the service:
  // its connection leaves the unauthenticated share. Any thread.
  void Authenticated(const std::string& grpc_peer);
  uint64_t refused() const {
    return refused_server_full_ + refused_client_full_ + refused_no_descriptors_;
  }
  // Prometheus text: the open connections and those refused, by reason.
  void AppendMetrics(std::string* out) const;

 private:
  struct Handed {
    std::string client;
    std::string peer;  // as gRPC names it, without the "ipv4:" / "ipv6:"
    ino_t inode = 0;
    uint64_t id = 0;    // in limits_
    int watch_fd = -1;  // the gate's duplicate, while unauthenticated
  };
  void AcceptLoop();
  // Forgets the connections gRPC has closed (their descriptor is closed or now another file).
  void Reap() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Release(int fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Shuts down the connection gRPC holds as `fd` (evicted to make room) through the duplicate.
  void Evict(int fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void CloseWatch(Handed& handed);

  const GrpcGateOptions options_;
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor_;
  http::ConnectionLimits limits_;
  int listen_fd_ = -1;
  int reserve_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> refused_server_full_{0}, refused_client_full_{0},
      refused_no_descriptors_{0}, evicted_{0};
  http::RateLimitedLog log_{"grpc"};
  std::thread thread_;
  absl::Mutex mu_;
  absl::flat_hash_map<int, Handed> handed_ ABSL_GUARDED_BY(mu_);        // by descriptor
  absl::flat_hash_map<std::string, int> by_peer_ ABSL_GUARDED_BY(mu_);  // Handed::peer -> fd
};

}  // namespace podscope::coordinator
