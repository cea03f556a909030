// Unix-domain stream sockets for the probe <-> agent link (docs/security.md): the agent listens
// on a path only its group can reach, and checks who is on the other end of every connection.
// Thin, RAII-owned wrappers over the system calls; errors come back as absl::Status with errno's
// words.
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"

namespace podscope::common {

// Where the node agent listens for probes and where probes look for it, unless configured
// otherwise (--probe-socket; PODSCOPE_AGENT_SOCKET in the training process).
inline constexpr char kDefaultProbeSocketPath[] = "/run/podscope/agent.sock";

// Owns one file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd();
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// Listens on `path` (its directory is created if missing). A socket file left by a process that
// is gone is replaced; one that a live listener still answers on is not (AlreadyExists). The
// socket gets `mode` (never world-writable: the bits for others are cleared).
absl::StatusOr<UniqueFd> ListenUnix(const std::string& path, mode_t mode = 0660, int backlog = 64);
// Connects to `path`; Unavailable when nobody listens there.
absl::StatusOr<UniqueFd> ConnectUnix(const std::string& path);
// The kernel's word on who holds the other end (SO_PEERCRED): it cannot be forged by the peer.
absl::StatusOr<PeerCredentials> PeerCredentialsOf(int fd);

}  // namespace podscope::common
