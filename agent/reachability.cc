#include "agent/reachability.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/host_port.h"
#include "common/str_util.h"

namespace podscope::agent {

std::string WhyUnreachable(const std::string& target, int timeout_ms, bool tls) {
  const absl::StatusOr<common::HostPort> parsed = common::ParseHostPort(target);
  if (!parsed.ok()) return std::string(parsed.status().message());
  const std::string& host = parsed->host;
  const std::string port = std::to_string(parsed->port);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return common::StrCat("cannot resolve ", host, ": ", gai_strerror(rc));
  }
  std::string why = "no address";
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int error = 0;
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      error = errno;
      if (error == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        if (poll(&p, 1, timeout_ms) <= 0) {
          error = ETIMEDOUT;
        } else {
          socklen_t length = sizeof(error);
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
        }
      }
    }
    close(fd);
    if (error == 0) {
      freeaddrinfo(found);
      return tls ? "TCP connects, but no TLS session came up: the coordinator's certificate does "
                   "not chain to --tls-ca or "
                   "lacks the name dialled (see --tls-server-name), or the coordinator refused "
                   "this agent's certificate "
                   "(another CA, expired; its log says which), or the port speaks plaintext "
                   "(--insecure)"
                 : "TCP connects, but no gRPC session came up (not a podscope-coordinator's agent "
                   "port, or one that "
                   "wants mutual TLS: give --tls-cert, --tls-key and --tls-ca)";
    }
    why = std::strerror(error);
  }
  freeaddrinfo(found);
  return why;
}

}  // namespace podscope::agent
