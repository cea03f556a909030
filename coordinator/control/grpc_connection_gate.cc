#include "coordinator/control/grpc_connection_gate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/server_builder.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/base/dynamic_annotations.h"
#include "common/str_util.h"
#include "spdlog/spdlog.h"

namespace podscope::coordinator {

GrpcConnectionGate::GrpcConnectionGate(
    GrpcGateOptions options,
    std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor)
    : options_(options),
      acceptor_(std::move(acceptor)),
      limits_({.max_total = options.max_connections,
               .max_per_client = options.max_connections_per_client,
               .max_unauthenticated = options.max_unauthenticated_connections,
               .max_unauthenticated_per_client = options.max_unauthenticated_per_client,
               .min_eviction_age_ms = options.min_eviction_age_ms,
               .proven_for_seconds = options.proven_client_seconds},
              common::RealTime()) {}

GrpcConnectionGate::~GrpcConnectionGate() {
  Stop();
  if (listen_fd_ >= 0) close(listen_fd_);
  if (reserve_fd_ >= 0) close(reserve_fd_);
}

absl::StatusOr<uint16_t> GrpcConnectionGate::Listen(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    return absl::InvalidArgumentError(common::StrCat("bad gRPC listen address \"", host, "\""));
  }
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  const int one = 1;
  const bool ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
                  bind(fd, found->ai_addr, found->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0;
  freeaddrinfo(found);
  if (!ok) {
    const int error = errno;
    if (fd >= 0) close(fd);
    return absl::UnavailableError(common::StrCat(
        "cannot serve gRPC on ", host, ":", port, ": ",
        error == EADDRINUSE ? "another process listens on that port (--grpc chooses another)"
                            : std::strerror(error)));
  }
  listen_fd_ = fd;
  reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  return ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

void GrpcConnectionGate::Start() {
  thread_ = std::thread([this] { AcceptLoop(); });
}

void GrpcConnectionGate::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void GrpcConnectionGate::AcceptLoop() {
  auto last_reap = std::chrono::steady_clock::now();
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    const int ready = poll(&p, 1, 200);
    const auto now = std::chrono::steady_clock::now();
    if (now - last_reap > std::chrono::seconds(1)) {
      absl::MutexLock lock(&mu_);
      Reap();
      last_reap = now;
    }
    if (ready <= 0) continue;
    sockaddr_storage peer{};
    socklen_t length = sizeof(peer);
    // Non-blocking and without Nagle, as gRPC's own listener makes them: its external-connection
    // handler takes the descriptor as it is, and a blocking one stalls its poller (agents then
    // saw replies never arrive and their uploads time out).
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &length,
                           SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Shed the pending connection with the reserve descriptor, then let descriptors return.
        log_.Warn("grpc: cannot accept ({}): shedding a connection and backing off",
                  std::strerror(errno));
        ++refused_no_descriptors_;
        close(reserve_fd_);
        const int shed = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (shed >= 0) close(shed);
        reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      continue;
    }
    char address[INET6_ADDRSTRLEN] = "?";
    std::string peer_name;
    if (peer.ss_family == AF_INET) {
      const auto* v4 = reinterpret_cast<sockaddr_in*>(&peer);
      inet_ntop(AF_INET, &v4->sin_addr, address, sizeof(address));
      peer_name = common::StrCat(address, ":", ntohs(v4->sin_port));
    } else if (peer.ss_family == AF_INET6) {
      const auto* v6 = reinterpret_cast<sockaddr_in6*>(&peer);
      inet_ntop(AF_INET6, &v6->sin6_addr, address, sizeof(address));
      peer_name = common::StrCat("[", address, "]:", ntohs(v6->sin6_port));
    }
    absl::MutexLock lock(&mu_);
    Release(fd);  // a descriptor number gRPC closed and the kernel gave back
    http::ConnectionLimits::Admission admission =
        limits_.TryAdmit(address, [this, fd]() ABSL_NO_THREAD_SAFETY_ANALYSIS { Evict(fd); });
    const http::ConnectionLimits::Verdict verdict = admission.verdict;
    if (admission.evict) admission.evict();  // under mu_, as Evict needs
    if (verdict != http::ConnectionLimits::Verdict::kAdmitted) {
      // Counted before the close, so that a client that saw its connection closed sees the count.
      const bool server_full = verdict == http::ConnectionLimits::Verdict::kServerFull;
      ++(server_full ? refused_server_full_ : refused_client_full_);
      close(fd);
      log_.Warn(
          "grpc: refused a connection from {}: {}", address,
          !server_full
              ? common::StrCat("that address holds its ", options_.max_connections_per_client,
                               " agent connections (agents.max_connections_per_client), or ",
                               options_.max_unauthenticated_per_client,
                               " that have made no call yet, none old enough to give way "
                               "(agents.max_unauthenticated_per_client)")
          : admission.unauthenticated_full
              ? common::StrCat("the coordinator holds ", options_.max_unauthenticated_connections,
                               " agent connections that have made no call yet, none old "
                               "enough to give way (agents.max_unauthenticated_connections)")
              : common::StrCat("the coordinator holds its ", options_.max_connections,
                               " agent connections (agents.max_connections)"));
      // Perhaps some were closed since the last look: the next one may get in. Not on every
      // refusal: a flood of refused connections would have the gate look at every open one each
      // time, and admit no one else.
      if (now - last_reap > std::chrono::milliseconds(100)) {
        Reap();
        last_reap = now;
      }
      continue;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct stat info {};
    fstat(fd, &info);
    const int watch_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    handed_[fd] = Handed{.client = address,
                         .peer = peer_name,
                         .inode = info.st_ino,
                         .id = admission.id,
                         .watch_fd = watch_fd};
    by_peer_[peer_name] = fd;
    grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters parameters;
    parameters.listener_fd = listen_fd_;
    parameters.fd = fd;
    acceptor_->HandleNewConnection(&parameters);  // gRPC owns the descriptor from here
  }
}

void GrpcConnectionGate::Release(int fd) {
  auto it = handed_.find(fd);
  if (it == handed_.end()) return;
  limits_.Release(it->second.id);
  CloseWatch(it->second);
  auto named = by_peer_.find(it->second.peer);
  if (named != by_peer_.end() && named->second == fd) by_peer_.erase(named);
  handed_.erase(it);
}

void GrpcConnectionGate::Evict(int fd) {
  auto it = handed_.find(fd);
  if (it == handed_.end() || it->second.watch_fd < 0) return;
  ++evicted_;
  log_.Warn("grpc: dropped a connection from {} that had not authenticated, to make room",
            it->second.peer);
  // gRPC sees its handshake fail and closes its descriptor; Reap then forgets it.
  shutdown(it->second.watch_fd, SHUT_RDWR);
  CloseWatch(it->second);
}

void GrpcConnectionGate::CloseWatch(Handed& handed) {
  if (handed.watch_fd >= 0) close(handed.watch_fd);
  handed.watch_fd = -1;
}

void GrpcConnectionGate::Authenticated(const std::string& grpc_peer) {
  const size_t colon = grpc_peer.find(':');
  if (colon == std::string::npos) return;
  const std::string peer = grpc_peer.substr(colon + 1);
  absl::MutexLock lock(&mu_);
  auto named = by_peer_.find(peer);
  if (named == by_peer_.end()) return;
  auto it = handed_.find(named->second);
  if (it == handed_.end() || it->second.watch_fd < 0) return;  // done already, or evicted
  limits_.Authenticated(it->second.id);
  CloseWatch(it->second);
}

void GrpcConnectionGate::Reap() {
  std::vector<int> gone;
  for (const auto& [fd, handed] : handed_) {
    struct stat info {};
    // The descriptor is gRPC's: its threads close it, and others may open a file on the same
    // number, with nothing ordering that before this look. The kernel answers either way (no
    // file, or a file whose inode tells it apart), so ThreadSanitizer is told not to check it:
    // a report built here also crashed its runtime, which cannot describe a descriptor made on
    // a thread it no longer knows.
    ABSL_ANNOTATE_IGNORE_READS_BEGIN();
    const int looked = fstat(fd, &info);
    ABSL_ANNOTATE_IGNORE_READS_END();
    if (looked != 0 || info.st_ino != handed.inode || !S_ISSOCK(info.st_mode)) gone.push_back(fd);
  }
  for (int fd : gone) Release(fd);
}

void GrpcConnectionGate::AppendMetrics(std::string* out) const {
  common::StrAppend(out, "# HELP podscope_grpc_open_connections Agent (gRPC) connections open.\n",
                    "# TYPE podscope_grpc_open_connections gauge\n",
                    "podscope_grpc_open_connections ", open_connections(), "\n",
                    "# HELP podscope_grpc_rejected_connections_total Agent (gRPC) connections "
                    "refused, by reason.\n",
                    "# TYPE podscope_grpc_rejected_connections_total counter\n",
                    "podscope_grpc_rejected_connections_total{reason=\"server_full\"} ",
                    refused_server_full_.load(), "\n",
                    "podscope_grpc_rejected_connections_total{reason=\"client_full\"} ",
                    refused_client_full_.load(), "\n",
                    "podscope_grpc_rejected_connections_total{reason=\"no_descriptors\"} ",
                    refused_no_descriptors_.load(), "\n",
                    "# HELP podscope_grpc_unauthenticated_connections Agent (gRPC) connections "
                    "no call has reached the service on yet.\n",
                    "# TYPE podscope_grpc_unauthenticated_connections gauge\n",
                    "podscope_grpc_unauthenticated_connections ", limits_.unauthenticated(), "\n",
                    "# HELP podscope_grpc_evicted_connections_total Unauthenticated agent (gRPC) "
                    "connections shut down to make room for new ones.\n",
                    "# TYPE podscope_grpc_evicted_connections_total counter\n",
                    "podscope_grpc_evicted_connections_total ", evicted_.load(), "\n");
}

}  // namespace podscope::coordinator
