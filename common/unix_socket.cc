#include "common/unix_socket.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "common/status_macros.h"
#include "common/str_util.h"

namespace podscope::common {

namespace {

absl::Status Errno(std::string_view what, const std::string& path) {
  return absl::UnavailableError(StrCat(what, " ", path, ": ", std::strerror(errno)));
}

absl::StatusOr<sockaddr_un> AddressOf(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(StrCat("a unix socket path must be 1 to ",
                                             sizeof(address.sun_path) - 1, " bytes: \"", path,
                                             "\""));
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  return address;
}

}  // namespace

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

absl::StatusOr<UniqueFd> ListenUnix(const std::string& path, mode_t mode, int backlog) {
  ASSIGN_OR_RETURN(sockaddr_un address, AddressOf(path));
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) return absl::UnavailableError(StrCat("creating ", parent.string(), ": ", ec.message()));
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return absl::AlreadyExistsError(StrCat(path, " exists and is not a socket"));
    if (ConnectUnix(path).ok())
      return absl::AlreadyExistsError(StrCat("another process listens on ", path));
    ::unlink(path.c_str());  // left by a process that is gone
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Errno("socket for", path);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0)
    return Errno("binding", path);
  if (::chmod(path.c_str(), mode & ~static_cast<mode_t>(S_IRWXO)) != 0) return Errno("chmod", path);
  if (::listen(fd.get(), backlog) != 0) return Errno("listening on", path);
  return fd;
}

absl::StatusOr<UniqueFd> ConnectUnix(const std::string& path) {
  ASSIGN_OR_RETURN(sockaddr_un address, AddressOf(path));
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Errno("socket for", path);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    return Errno("connecting to", path);
  }
  return fd;
}

absl::StatusOr<PeerCredentials> PeerCredentialsOf(int fd) {
  ucred credentials{};
  socklen_t size = sizeof(credentials);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) {
    return absl::UnavailableError(StrCat("SO_PEERCRED: ", std::strerror(errno)));
  }
  return PeerCredentials{credentials.pid, credentials.uid, credentials.gid};
}

}  // namespace podscope::common
