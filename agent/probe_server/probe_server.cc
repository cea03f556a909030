#include "agent/probe_server/probe_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/protocol_version.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "spdlog/spdlog.h"

namespace podscope::agent {

absl::StatusOr<std::unique_ptr<ProbeServer>> ProbeServer::Listen(ProbeServerOptions options,
                                                                 Listener* listener) {
  ASSIGN_OR_RETURN(common::UniqueFd fd,
                   common::ListenUnix(options.socket_path, options.socket_mode));
  fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
  return std::unique_ptr<ProbeServer>(new ProbeServer(std::move(options), std::move(fd), listener));
}

void ProbeServer::Run() {
  thread_ = std::thread([this] { Loop(); });
}

ProbeServer::ProbeServer(ProbeServerOptions options, common::UniqueFd listen_fd, Listener* listener)
    : options_(std::move(options)), listen_fd_(std::move(listen_fd)), listener_(listener) {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

ProbeServer::~ProbeServer() {
  Stop();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void ProbeServer::Stop() {
  if (stopping_.exchange(true)) return;
  Wake();
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  connections_.clear();
  listen_fd_ = common::UniqueFd();
  // The path goes with the listener, so a probe looking for an agent finds none rather than a
  // dead socket file (and a new agent does not have to clean up after us).
  unlink(options_.socket_path.c_str());
}

void ProbeServer::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = write(wake_fd_, &one, sizeof(one));
}

size_t ProbeServer::connections() const {
  absl::MutexLock lock(&mu_);
  return connections_.size();
}

bool ProbeServer::Send(ProbeConnectionId id, const v1::AgentToProbe& command) {
  std::string frame;
  if (!common::AppendFrame(command.SerializeAsString(), options_.max_frame_bytes, &frame).ok())
    return false;
  {
    absl::MutexLock lock(&mu_);
    auto it = connections_.find(id);
    if (it == connections_.end() || it->second->closing) return false;
    if (it->second->outbound.size() + frame.size() > options_.max_outbound_bytes) return false;
    it->second->outbound += frame;
  }
  Wake();
  return true;
}

bool ProbeServer::PeerAllowed(const common::PeerCredentials& peer) const {
  if (options_.allowed_uids.empty() || peer.uid == 0 || peer.uid == getuid()) return true;
  return std::find(options_.allowed_uids.begin(), options_.allowed_uids.end(), peer.uid) !=
         options_.allowed_uids.end();
}

void ProbeServer::Refuse(Connection& c, const std::string& reason) {
  v1::AgentToProbe refused;
  refused.mutable_refused()->set_reason(reason);
  std::string frame;
  (void)common::AppendFrame(refused.SerializeAsString(), options_.max_frame_bytes, &frame);
  absl::MutexLock lock(&mu_);
  c.outbound += frame;
  c.closing = true;
}

void ProbeServer::Accept() {
  while (true) {
    const int raw = accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (raw < 0) return;  // EAGAIN: no more waiting
    common::UniqueFd fd(raw);
    absl::StatusOr<common::PeerCredentials> peer =
        options_.peer_credentials_for_testing != nullptr
            ? options_.peer_credentials_for_testing(fd.get())
            : common::PeerCredentialsOf(fd.get());
    if (!peer.ok()) continue;
    auto c = std::make_unique<Connection>(
        Connection{std::move(fd), *peer, common::FrameReader(options_.max_frame_bytes)});
    absl::MutexLock lock(&mu_);
    if (connections_.size() >= options_.max_probes) {
      spdlog::warn("probe from pid {} refused: {} probes connected already (the limit)", peer->pid,
                   connections_.size());
      continue;  // closing the socket is the answer; the probe retries later
    }
    connections_.emplace(next_id_++, std::move(c));
  }
}

bool ProbeServer::HandleFrame(ProbeConnectionId id, Connection& c, const std::string& payload) {
  v1::ProbeMessage m;
  if (!m.ParseFromString(payload)) {
    spdlog::warn("probe pid {}: a frame of {} bytes is not a probe message; disconnecting",
                 c.peer.pid, payload.size());
    return false;
  }
  if (m.has_register_()) {
    const v1::ProbeRegister& r = m.register_();
    if (r.protocol_major() != common::kProbeProtocolMajor) {
      Refuse(c, common::StrCat("probe protocol ", r.protocol_major(), ".", r.protocol_minor(),
                               " is not served by this agent (protocol ",
                               common::kProbeProtocolMajor, ".", common::kProbeProtocolMinor,
                               "); use the probe that came with the agent"));
      return true;
    }
    if (!PeerAllowed(c.peer)) {
      Refuse(c, common::StrCat("user ", c.peer.uid,
                               " may not register with this agent (allowed: its own user, root",
                               options_.allowed_uids.empty() ? "" : ", probe.allowed_uids", ")"));
      return true;
    }
    c.registered = true;
    listener_->OnRegister(id, c.peer, r);
    return true;
  }
  if (!c.registered) return true;  // nothing counts before a registration
  if (m.has_chunk()) {
    listener_->OnChunk(id, std::move(*m.mutable_chunk()));
  } else if (m.has_status()) {
    listener_->OnStatus(id, m.status());
  } else if (m.has_watch()) {
    listener_->OnWatch(id, m.watch());
  }
  return true;
}

bool ProbeServer::ReadFrom(ProbeConnectionId id, Connection& c) {
  char buffer[64 * 1024];
  while (true) {
    const ssize_t n = read(c.fd.get(), buffer, sizeof(buffer));
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    c.reader.Append(std::string_view(buffer, static_cast<size_t>(n)));
    while (true) {
      absl::StatusOr<std::optional<std::string>> frame = c.reader.Next();
      if (!frame.ok()) {
        spdlog::warn("probe pid {}: {}; disconnecting", c.peer.pid,
                     std::string(frame.status().message()));
        return false;
      }
      if (!frame->has_value()) break;
      if (!HandleFrame(id, c, **frame)) return false;
    }
    if (static_cast<size_t>(n) < sizeof(buffer)) return true;
  }
}

void ProbeServer::Loop() {
  std::vector<pollfd> fds;
  std::vector<ProbeConnectionId> ids;
  while (!stopping_) {
    fds.clear();
    ids.clear();
    fds.push_back({listen_fd_.get(), POLLIN, 0});
    fds.push_back({wake_fd_, POLLIN, 0});
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [id, c] : connections_) {
        fds.push_back(
            {c->fd.get(),
             static_cast<short>((c->closing ? 0 : POLLIN) | (c->outbound.empty() ? 0 : POLLOUT)),
             0});
        ids.push_back(id);
      }
    }
    if (poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) break;
    if (fds[1].revents & POLLIN) {
      uint64_t drained = 0;
      [[maybe_unused]] const ssize_t n = read(wake_fd_, &drained, sizeof(drained));
    }
    if (fds[0].revents & POLLIN) Accept();
    for (size_t i = 0; i < ids.size(); ++i) {
      const short revents = fds[i + 2].revents;
      if (revents == 0) continue;
      Connection* c = nullptr;
      {
        absl::MutexLock lock(&mu_);
        auto it = connections_.find(ids[i]);
        if (it != connections_.end()) c = it->second.get();
      }
      if (c == nullptr) continue;
      bool keep = true;
      if (revents & (POLLIN | POLLHUP | POLLERR))
        keep = c->closing ? (revents & POLLIN) != 0 : ReadFrom(ids[i], *c);
      if (keep && (revents & POLLOUT)) {
        absl::MutexLock lock(&mu_);
        const ssize_t n = send(c->fd.get(), c->outbound.data(), c->outbound.size(), MSG_NOSIGNAL);
        if (n > 0) c->outbound.erase(0, static_cast<size_t>(n));
        if (n < 0 && errno != EAGAIN && errno != EINTR) keep = false;
        if (c->closing && c->outbound.empty()) keep = false;
      }
      if (!keep) {
        const bool was_registered = c->registered;
        {
          absl::MutexLock lock(&mu_);
          connections_.erase(ids[i]);
        }
        if (was_registered) listener_->OnDisconnect(ids[i]);
      }
    }
  }
}

}  // namespace podscope::agent
