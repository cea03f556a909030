// Raw clients for tests that attack the real daemons: connections from chosen loopback
// addresses (127.0.0.2 is another client than 127.0.0.1 for per-client limits), byte-level
// sends and reads, and readings of a process's memory and CPU from /proc.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"
#include "common/client_connection.h"
#include "common/parse_number.h"
#include "tests/integration/daemon.h"
#include "tests/integration/test_security.h"

namespace podscope::testing {

// A TCP connection to 127.0.0.1:port from `source` (another loopback address, 127.0.0.2, is
// another client as far as per-client limits go). -1 on failure.
inline int ConnectFrom(const char* source, int port, int receive_buffer = 0) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (receive_buffer > 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
  sockaddr_in local{};
  local.sin_family = AF_INET;
  inet_pton(AF_INET, source, &local.sin_addr);
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_port = htons(static_cast<uint16_t>(port));
  remote.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof(remote)) != 0) {
    close(fd);
    return -1;
  }
  timeval timeout{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  return fd;
}

// An HTTP connection to 127.0.0.1:port from `source`, over TLS when the port is (see
// PortSecurity): the handshake is done, the bytes sent are the attacker's. Null on failure.
using RawHttp = std::shared_ptr<common::ClientConnection>;
inline RawHttp HttpConnectFrom(const char* source, int port, int receive_buffer = 0) {
  const int fd = ConnectFrom(source, port, receive_buffer);
  if (fd < 0) return nullptr;
  const PortSecurity security = GetPortSecurity(port);
  absl::StatusOr<common::ClientConnection> c =
      common::ClientConnection::Adopt(fd, "127.0.0.1", static_cast<uint16_t>(port),
                                      {.enabled = security.tls, .ca_file = security.ca_file});
  // Adopt closes the socket on failure. A second close would close whatever socket another
  // thread opened meanwhile under the same number (the abuse suite's normal client), and this
  // connection's later bytes would go into that client's stream.
  if (!c.ok()) return nullptr;
  return std::make_shared<common::ClientConnection>(*std::move(c));
}
// Whether the server sent something or closed within `timeout_ms` (without reading it). An SSL
// connection is not for two threads at once: a test that trickles bytes asks this between them.
inline bool PeerSpoke(const RawHttp& c, int timeout_ms) {
  pollfd p{c->fd(), POLLIN, 0};
  return poll(&p, 1, timeout_ms) > 0;
}
// A connection to the agents' port as an agent's TLS stack would open it (mutual TLS with the
// certificate of TestSecurity's `agent_id`, ALPN h2), from `source`; null when the coordinator
// refuses or closes it during the handshake.
inline RawHttp AgentTlsConnectFrom(const char* source, int grpc_port, const std::string& agent_id) {
  const int fd = ConnectFrom(source, grpc_port);
  if (fd < 0) return nullptr;
  const std::vector<std::string> flags = TestSecurity::Get().AgentFlags(agent_id);  // cert, key, ca
  absl::StatusOr<common::ClientConnection> c =
      common::ClientConnection::Adopt(fd, "127.0.0.1", static_cast<uint16_t>(grpc_port),
                                      {.enabled = true,
                                       .ca_file = flags[5],
                                       .cert_file = flags[1],
                                       .key_file = flags[3],
                                       .alpn = "h2"});
  if (!c.ok()) return nullptr;
  return std::make_shared<common::ClientConnection>(*std::move(c));
}
inline bool SendAll(const RawHttp& c, std::string_view bytes) {
  return c != nullptr && c->Send(bytes);
}
inline std::string ReadUntilClosed(const RawHttp& c) { return c == nullptr ? "" : c->ReceiveAll(); }
// "Authorization: Bearer TOKEN\r\n" with the port's token, or "" (for hand-written requests).
inline std::string AuthHeader(int port) {
  const std::string token = GetPortSecurity(port).token;
  return token.empty() ? "" : "Authorization: Bearer " + token + "\r\n";
}

inline bool SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads until the peer closes (or 30 s pass); returns what came.
inline std::string ReadUntilClosed(int fd) {
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

// Whether the peer closes `fd` (EOF or reset) within `timeout_ms`; whatever it sends meanwhile
// (a GOAWAY, say) is read and dropped.
inline bool ClosedByPeer(int fd, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return true;
  }
  return false;
}

// What a peer does first on a connection: sends bytes, closes it, or (by the deadline) neither.
enum class PeerReply { kData, kClosed, kNothing };
inline PeerReply FirstReply(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) <= 0) return PeerReply::kNothing;
  char byte;
  const ssize_t n = recv(fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK);
  return n > 0 ? PeerReply::kData : PeerReply::kClosed;
}

// CPU seconds a process has used (utime + stime).
inline double CpuSeconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = static_cast<uint64_t>(common::ParseInt(field).value());
    if (i == 15) stime = static_cast<uint64_t>(common::ParseInt(field).value());
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The value of one sample line of /metrics ("name{labels} value").
inline std::string Metric(int port, const std::string& sample) {
  const std::string body = HttpCall(port, "GET", "/metrics").body;
  const size_t at = body.find("\n" + sample + " ");
  if (at == std::string::npos) return "";
  const size_t start = at + sample.size() + 2;
  return body.substr(start, body.find('\n', start) - start);
}

// One memory figure of a process from /proc/<pid>/status ("VmHWM:", "VmRSS:"), in bytes; 0 when
// unreadable.
inline uint64_t StatusBytes(pid_t pid, const std::string& field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) == 0)
      return static_cast<uint64_t>(
                 common::ParseInt(std::string(absl::StripAsciiWhitespace(
                                      line.substr(field.size(), line.find(" kB") - field.size()))))
                     .value()) *
             1024;
  }
  return 0;
}
inline uint64_t PeakRssBytes(pid_t pid) { return StatusBytes(pid, "VmHWM:"); }
inline uint64_t RssBytes(pid_t pid) { return StatusBytes(pid, "VmRSS:"); }

}  // namespace podscope::testing
