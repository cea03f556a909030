// A blocking TCP connection to a server, over TLS when asked (OpenSSL), for the CLI, the
// coordinator's outgoing calls (alert sinks, shard forwarding) and tests: one request per
// connection, so no event loop is worth its weight here. Blocking to its caller, it waits with
// poll underneath, so that three bounds hold on every step (connect, handshake, each read and
// write): a time without progress, a deadline for the whole exchange however slowly the peer
// trickles, and a cancellation raised by another thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace podscope::common {

struct ClientTls {
  bool enabled = false;
  std::string ca_file;  // the CA the server's certificate must chain to; empty: the system's CAs
  // The name the server's certificate must hold; empty: the host connected to.
  std::string server_name;
  // A client certificate and key (mutual TLS), PEM files; empty: none.
  std::string cert_file;
  std::string key_file;
  std::string alpn;  // a protocol to offer ("h2" for gRPC); empty: none
};

class Cancellation;

// The bounds of one exchange besides the time without progress.
struct ExchangeBounds {
  // Every step fails once this has passed.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // Every step fails once this is raised; it must outlive the connection.
  const Cancellation* cancel = nullptr;
};

// Move-only. Not thread-safe.
class ClientConnection {
 public:
  // Connects (each address of `host` in turn) and, with TLS, handshakes and verifies the
  // server's certificate and name. Each step fails after `timeout_seconds` without progress, and
  // at the bounds. Errors say what failed: "cannot connect to h:p: Connection refused", "TLS with
  // h:p: certificate verify failed (unable to get local issuer certificate)".
  static absl::StatusOr<ClientConnection> Connect(const std::string& host, uint16_t port,
                                                  const ClientTls& tls, int timeout_seconds = 60,
                                                  ExchangeBounds bounds = {});
  // Takes over a connected socket (a test's, bound to a chosen source address) and starts TLS
  // on it when asked. The socket is closed with the connection, also on an error.
  static absl::StatusOr<ClientConnection> Adopt(int fd, const std::string& host, uint16_t port,
                                                const ClientTls& tls, int timeout_seconds = 30);
  ClientConnection(ClientConnection&& other) noexcept;
  ClientConnection& operator=(ClientConnection&& other) noexcept;
  ClientConnection(const ClientConnection&) = delete;
  ClientConnection& operator=(const ClientConnection&) = delete;
  ~ClientConnection();

  // Writes all of `bytes`; false once the peer is gone (it may have answered early: read on).
  bool Send(std::string_view bytes);
  // Up to `size` bytes; 0 at the end of the stream or on an error (a timeout, a reset).
  size_t Receive(char* buffer, size_t size);
  // No more to send: TCP half-close, or TLS close_notify. Reading goes on.
  void FinishSending();
  int fd() const { return fd_; }
  // Everything until the peer closes, or the first `max_bytes` of it.
  std::string ReceiveAll(size_t max_bytes = SIZE_MAX);
  // Why the last Send or Receive stopped short of the peer's end: a deadline, a cancellation, a
  // time without progress; OK when the peer closed or answered in full.
  const absl::Status& stopped() const { return stopped_; }

 private:
  ClientConnection() = default;
  bool SendUnblocked(std::string_view bytes);
  absl::Status StartTls(const std::string& host, uint16_t port, const ClientTls& tls);
  // Until the socket is ready for `events`; false (and stopped_ set) at a bound.
  bool Wait(short events);
  void Close();
  int fd_ = -1;
  SSL_CTX* context_ = nullptr;
  SSL* ssl_ = nullptr;
  int timeout_ms_ = 60'000;
  ExchangeBounds bounds_;
  absl::Status stopped_;
};

}  // namespace podscope::common
