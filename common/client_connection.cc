#include "common/client_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "common/cancellation.h"
#include "common/status_macros.h"
#include "common/str_util.h"

namespace podscope::common {
namespace {

std::string OpenSslErrors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(e, text, sizeof(text));
    if (!out.empty()) out += "; ";
    out += text;
  }
  return out.empty() ? "the connection closed during the handshake" : out;
}

bool IsIpAddress(const std::string& host) {
  unsigned char scratch[16];
  return inet_pton(AF_INET, host.c_str(), scratch) == 1 ||
         inet_pton(AF_INET6, host.c_str(), scratch) == 1;
}

// OpenSSL writes with write(2), which raises SIGPIPE once the server has closed (after an early
// 413 or 401, or a refused handshake): SIGPIPE is blocked on this thread while OpenSSL writes,
// and one it raised is dropped.
class NoSigpipe {
 public:
  NoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~NoSigpipe() {
    sigset_t pending;
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE) == 1 && sigismember(&old_, SIGPIPE) == 0) {
      const timespec zero{0, 0};
      sigtimedwait(&pipe_, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_, old_;
};

}  // namespace

absl::StatusOr<ClientConnection> ClientConnection::Connect(const std::string& host, uint16_t port,
                                                           const ClientTls& tls,
                                                           int timeout_seconds,
                                                           ExchangeBounds bounds) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    return absl::UnavailableError(StrCat("cannot resolve ", host));
  }
  ClientConnection c;
  c.timeout_ms_ = std::max(1, timeout_seconds) * 1000;
  c.bounds_ = bounds;
  int error = 0;
  for (addrinfo* a = found; a != nullptr && c.fd_ < 0; a = a->ai_next) {
    c.fd_ = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (c.fd_ < 0) {
      error = errno;
      continue;
    }
    int result = connect(c.fd_, a->ai_addr, a->ai_addrlen);
    if (result != 0 && errno == EINPROGRESS) {
      socklen_t length = sizeof(error);
      result = c.Wait(POLLOUT) && getsockopt(c.fd_, SOL_SOCKET, SO_ERROR, &error, &length) == 0 &&
                       error == 0
                   ? 0
                   : -1;
      if (result != 0 && !c.stopped_.ok()) {
        close(c.fd_);
        c.fd_ = -1;
        freeaddrinfo(found);
        return absl::UnavailableError(
            StrCat("cannot connect to ", host, ":", port, ": ", c.stopped_.message()));
      }
    } else if (result != 0) {
      error = errno;
    }
    if (result != 0) {
      close(c.fd_);
      c.fd_ = -1;
    }
  }
  freeaddrinfo(found);
  if (c.fd_ < 0)
    return absl::UnavailableError(
        StrCat("cannot connect to ", host, ":", port, ": ", std::strerror(error)));
  RETURN_IF_ERROR(c.StartTls(host, port, tls));
  return c;
}

absl::StatusOr<ClientConnection> ClientConnection::Adopt(int fd, const std::string& host,
                                                         uint16_t port, const ClientTls& tls,
                                                         int timeout_seconds) {
  ClientConnection c;
  c.fd_ = fd;
  c.timeout_ms_ = std::max(1, timeout_seconds) * 1000;
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  RETURN_IF_ERROR(c.StartTls(host, port, tls));
  return c;
}

bool ClientConnection::Wait(short events) {
  using Clock = std::chrono::steady_clock;
  for (;;) {
    const Clock::time_point now = Clock::now();
    if (bounds_.cancel != nullptr && bounds_.cancel->cancelled()) {
      stopped_ = absl::CancelledError("cancelled (the coordinator is stopping)");
      return false;
    }
    if (now >= bounds_.deadline) {
      stopped_ = absl::DeadlineExceededError("the exchange ran past its deadline");
      return false;
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(bounds_.deadline - now).count();
    const int wait_ms = static_cast<int>(std::min<int64_t>(timeout_ms_, left));
    pollfd p[2] = {{fd_, events, 0}, {-1, POLLIN, 0}};
    if (bounds_.cancel != nullptr) p[1].fd = bounds_.cancel->fd();
    const int n = poll(p, p[1].fd >= 0 ? 2 : 1, wait_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      stopped_ = absl::UnavailableError(StrCat("poll: ", std::strerror(errno)));
      return false;
    }
    if (n > 0 && p[1].revents != 0) continue;  // cancelled: said above
    if (n > 0) return true;  // ready, or an error or hang-up the next call reports
    if (wait_ms == timeout_ms_ && Clock::now() < bounds_.deadline) {
      stopped_ = absl::DeadlineExceededError(StrCat("no progress for ", timeout_ms_ / 1000, " s"));
      return false;
    }
  }
}

absl::Status ClientConnection::StartTls(const std::string& host, uint16_t port,
                                        const ClientTls& tls) {
  // Requests go out in several writes (a TLS record each); Nagle would hold each one after the
  // first behind the server's delayed ACK.
  const int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (!tls.enabled) return absl::OkStatus();
  const NoSigpipe guard;
  ClientConnection& c = *this;
  ERR_clear_error();
  c.context_ = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_min_proto_version(c.context_, TLS1_2_VERSION);
  SSL_CTX_set_verify(c.context_, SSL_VERIFY_PEER, nullptr);
  const int loaded = tls.ca_file.empty()
                         ? SSL_CTX_set_default_verify_paths(c.context_)
                         : SSL_CTX_load_verify_locations(c.context_, tls.ca_file.c_str(), nullptr);
  if (loaded != 1) {
    return absl::InvalidArgumentError(
        StrCat("--ca-cert ", tls.ca_file, ": cannot load it (", OpenSslErrors(), ")"));
  }
  if (!tls.cert_file.empty() &&
      (SSL_CTX_use_certificate_chain_file(c.context_, tls.cert_file.c_str()) != 1 ||
       SSL_CTX_use_PrivateKey_file(c.context_, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1)) {
    return absl::InvalidArgumentError(
        StrCat("client certificate ", tls.cert_file, ": ", OpenSslErrors()));
  }
  if (!tls.alpn.empty()) {
    std::string wire(1, static_cast<char>(tls.alpn.size()));
    wire += tls.alpn;
    SSL_CTX_set_alpn_protos(c.context_, reinterpret_cast<const unsigned char*>(wire.data()),
                            static_cast<unsigned>(wire.size()));
  }
  c.ssl_ = SSL_new(c.context_);
  SSL_set_fd(c.ssl_, c.fd_);
  const std::string name = tls.server_name.empty() ? host : tls.server_name;
  if (IsIpAddress(name)) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c.ssl_), name.c_str());
  } else {
    SSL_set_tlsext_host_name(c.ssl_, name.c_str());
    SSL_set1_host(c.ssl_, name.c_str());
  }
  int connected = SSL_connect(c.ssl_);
  while (connected != 1) {
    const int error = SSL_get_error(c.ssl_, connected);
    if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) break;
    if (!c.Wait(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT)) {
      return absl::UnavailableError(
          StrCat("TLS with ", host, ":", port, ": ", c.stopped_.message()));
    }
    connected = SSL_connect(c.ssl_);
  }
  if (connected != 1) {
    const long verify = SSL_get_verify_result(c.ssl_);
    std::string why = verify != X509_V_OK ? StrCat("the server's certificate is not trusted: ",
                                                   X509_verify_cert_error_string(verify))
                                          : OpenSslErrors();
    return absl::UnavailableError(StrCat("TLS with ", host, ":", port, ": ", why));
  }
  return absl::OkStatus();
}

ClientConnection::ClientConnection(ClientConnection&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      context_(std::exchange(other.context_, nullptr)),
      ssl_(std::exchange(other.ssl_, nullptr)),
      timeout_ms_(other.timeout_ms_),
      bounds_(other.bounds_),
      stopped_(std::move(other.stopped_)) {}

ClientConnection& ClientConnection::operator=(ClientConnection&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    context_ = std::exchange(other.context_, nullptr);
    ssl_ = std::exchange(other.ssl_, nullptr);
    timeout_ms_ = other.timeout_ms_;
    bounds_ = other.bounds_;
    stopped_ = std::move(other.stopped_);
  }
  return *this;
}

ClientConnection::~ClientConnection() { Close(); }

void ClientConnection::Close() {
  if (ssl_ != nullptr) {
    const NoSigpipe guard;
    SSL_shutdown(ssl_);  // close_notify, if not sent yet; the server need not answer it
    SSL_free(ssl_);
    ssl_ = nullptr;
  }
  if (context_ != nullptr) {
    SSL_CTX_free(context_);
    context_ = nullptr;
  }
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
}

bool ClientConnection::Send(std::string_view bytes) {
  const NoSigpipe guard;
  return SendUnblocked(bytes);
}

bool ClientConnection::SendUnblocked(std::string_view bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    // The same piece again after a wait: OpenSSL asks that a retried write repeat its arguments.
    const size_t piece = std::min<size_t>(bytes.size() - sent, 1 << 20);
    if (ssl_ != nullptr) {
      const int n = SSL_write(ssl_, bytes.data() + sent, static_cast<int>(piece));
      if (n > 0) {
        sent += static_cast<size_t>(n);
        continue;
      }
      const int error = SSL_get_error(ssl_, n);
      if ((error != SSL_ERROR_WANT_WRITE && error != SSL_ERROR_WANT_READ) ||
          !Wait(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT)) {
        return false;
      }
      continue;
    }
    const ssize_t n = send(fd_, bytes.data() + sent, piece, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!Wait(POLLOUT)) return false;
    } else {
      return false;
    }
  }
  return true;
}

size_t ClientConnection::Receive(char* buffer, size_t size) {
  for (;;) {
    if (ssl_ != nullptr) {
      // SSL_read writes too (an alert on a fatal error, a key update's answer): to a server that
      // has closed, that raised SIGPIPE and killed the process.
      const NoSigpipe guard;
      const int n = SSL_read(ssl_, buffer, static_cast<int>(std::min<size_t>(size, 1 << 30)));
      if (n > 0) return static_cast<size_t>(n);
      const int error = SSL_get_error(ssl_, n);
      if ((error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) ||
          !Wait(error == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN)) {
        return 0;
      }
      continue;
    }
    const ssize_t n = recv(fd_, buffer, size, 0);
    if (n > 0) return static_cast<size_t>(n);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && Wait(POLLIN)) continue;
    return 0;
  }
}

void ClientConnection::FinishSending() {
  if (ssl_ != nullptr) {
    const NoSigpipe guard;
    SSL_shutdown(ssl_);
  } else if (fd_ >= 0) {
    shutdown(fd_, SHUT_WR);
  }
}

std::string ClientConnection::ReceiveAll(size_t max_bytes) {
  std::string out;
  char buffer[65536];
  while (out.size() < max_bytes) {
    const size_t n = Receive(buffer, std::min(sizeof(buffer), max_bytes - out.size()));
    if (n == 0) break;
    out.append(buffer, n);
  }
  return out;
}

}  // namespace podscope::common
