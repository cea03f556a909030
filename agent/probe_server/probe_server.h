// The agent's end of the probe socket: listens on a unix socket that is never
// world-writable, checks who connects (SO_PEERCRED: the kernel's word, not the probe's), reads
// length-prefixed probe messages and writes the agent's commands. One thread polls every
// connection, so a node with dozens of training processes costs one thread.
//
// Bounds: probes (connections), the frame size (a chunk), and what waits to be written to one
// probe. A probe of another protocol major, or of a user the agent does not serve, is told why
// (ProbeRefused) and disconnected.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/frame_codec.h"
#include "common/unix_socket.h"
#include "podscope/v1/probe.pb.h"

namespace podscope::agent {

struct ProbeServerOptions {
  std::string socket_path = common::kDefaultProbeSocketPath;
  mode_t socket_mode = 0660;
  // Users whose processes may register, besides the agent's own user and root. Empty: anyone who
  // can open the socket (its mode and group already decide who that is).
  std::vector<uid_t> allowed_uids;
  size_t max_probes = 1024;
  size_t max_frame_bytes = 64u << 20;
  size_t max_outbound_bytes = 1u << 20;
  // Stands in for the kernel's SO_PEERCRED answer in tests, which cannot put a peer in a PID
  // namespace the agent does not see (the kernel then says pid 0). Null: the kernel's answer.
  std::function<absl::StatusOr<common::PeerCredentials>(int fd)> peer_credentials_for_testing;
};

using ProbeConnectionId = uint64_t;

class ProbeServer {
 public:
  // Called on the server's thread, one message at a time.
  class Listener {
   public:
    virtual ~Listener() = default;
    // A (re-)registration that passed the checks.
    virtual void OnRegister(ProbeConnectionId id, const common::PeerCredentials& peer,
                            const v1::ProbeRegister& r) = 0;
    virtual void OnChunk(ProbeConnectionId id, v1::TraceChunk&& chunk) = 0;
    virtual void OnStatus(ProbeConnectionId id, const v1::ProbeCaptureStatus& status) = 0;
    virtual void OnWatch(ProbeConnectionId id, const v1::ProbeWatch& watch) {}
    virtual void OnDisconnect(ProbeConnectionId id) = 0;
  };

  // Listens (the socket's directory is created if missing); serves nobody until Run. Two steps,
  // so that the listener can hold the server before any callback can use it.
  static absl::StatusOr<std::unique_ptr<ProbeServer>> Listen(ProbeServerOptions options,
                                                             Listener* listener);
  // Starts the thread that accepts probes and calls the listener. Once.
  void Run();
  ~ProbeServer();
  void Stop();

  // Queues a command for a probe; false when it is gone or its queue is full.
  bool Send(ProbeConnectionId id, const v1::AgentToProbe& command);
  size_t connections() const;
  const std::string& socket_path() const { return options_.socket_path; }

 private:
  struct Connection {
    common::UniqueFd fd;
    common::PeerCredentials peer;
    common::FrameReader reader;
    std::string outbound;
    bool registered = false;
    bool closing = false;  // write what is queued (a refusal), then close
  };

  ProbeServer(ProbeServerOptions options, common::UniqueFd listen_fd, Listener* listener);
  void Loop();
  void Accept();
  // False when the connection must close.
  bool ReadFrom(ProbeConnectionId id, Connection& c);
  bool HandleFrame(ProbeConnectionId id, Connection& c, const std::string& payload);
  void Refuse(Connection& c, const std::string& reason);
  bool PeerAllowed(const common::PeerCredentials& peer) const;
  void Wake();

  const ProbeServerOptions options_;
  common::UniqueFd listen_fd_;
  Listener* listener_;
  int wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread thread_;

  // The loop's thread reads and writes connections; Send appends to a connection's outbound,
  // which (like `closing`) is read and written under mu_ only.
  mutable absl::Mutex mu_;
  std::map<ProbeConnectionId, std::unique_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
  ProbeConnectionId next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace podscope::agent
