// A blocking TCP connection to a server, over TLS when asked (OpenSSL), for the CLI and tests:
// one request per connection, so no event loop is worth its weight here.
#pragma once

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

// Move-only. Not thread-safe.
class ClientConnection {
 public:
  // Connects (each address of `host` in turn) and, with TLS, handshakes and verifies the
  // server's certificate and name. Reads and writes time out after `timeout_seconds` without
  // progress. Errors say what failed: "cannot connect to h:p: Connection refused", "TLS with h:p:
  // certificate verify failed (unable to get local issuer certificate)".
  static absl::StatusOr<ClientConnection> Connect(const std::string& host, uint16_t port,
                                                  const ClientTls& tls, int timeout_seconds = 60);
  // Takes over a connected socket (a test's, bound to a chosen source address) and starts TLS
  // on it when asked. The socket is closed with the connection, also on an error.
  static absl::StatusOr<ClientConnection> Adopt(int fd, const std::string& host, uint16_t port,
                                                const ClientTls& tls);
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

 private:
  ClientConnection() = default;
  bool SendUnblocked(std::string_view bytes);
  absl::Status StartTls(const std::string& host, uint16_t port, const ClientTls& tls);
  void Close();
  int fd_ = -1;
  SSL_CTX* context_ = nullptr;
  SSL* ssl_ = nullptr;
};

}  // namespace podscope::common
