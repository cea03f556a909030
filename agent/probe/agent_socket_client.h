// The probe's end of the unix socket to the node agent (docs/life-of-a-capture.md). One thread of
// its own connects, registers, reads the agent's commands and writes what the probe queued; nothing
// on a training thread ever touches the socket.
//
// Without an agent the thread tries again every reconnect interval and otherwise sleeps: the
// training process pays one connect() per interval. Lost connections are retried at once, then
// at the interval. The queue of outgoing frames survives reconnects (a frame cut off mid-write
// is sent again whole; the agent drops the partial one with the old connection) and is bounded
// in bytes: a chunk that does not fit is dropped and counted, and status messages have their own
// small allowance so the agent always hears how a window ended.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/unix_socket.h"
#include "podscope/v1/probe.pb.h"

namespace podscope::agent::probe {

inline constexpr size_t kMaxProbeFrameBytes = 64u << 20;  // probe -> agent (chunks)
inline constexpr size_t kMaxAgentFrameBytes = 1u << 20;   // agent -> probe (commands)

class AgentSocketClient {
 public:
  // Called on the link's thread; must return quickly.
  class Handler {
   public:
    virtual ~Handler() = default;
    // Sent first on every connection. Taken once connected() is true, so that a change that
    // finds the link not connected is in it, and one that finds it connected can be sent.
    virtual v1::ProbeRegister Registration() = 0;
    virtual void OnWelcome(const v1::ProbeWelcome& welcome) {}
    virtual void OnArm(const v1::ProbeArm& arm) = 0;
    virtual void OnCancel(const v1::ProbeCancel& cancel) = 0;
    // The agent refused this probe (e.g. another protocol major); the probe stays quiet.
    virtual void OnRefused(const std::string& reason) {}
    // The connection broke (or was refused); the link tries again by itself.
    virtual void OnDisconnected() {}
  };

  AgentSocketClient(std::string socket_path, int64_t reconnect_interval_ns, size_t max_queue_bytes,
                    Handler* handler);
  ~AgentSocketClient();

  void Start();
  void Stop();

  // Queues a message; false when it does not fit (and it is counted as dropped). `control`
  // messages (status) use their own allowance. Never blocks on the socket.
  bool Send(const v1::ProbeMessage& message, bool control = false);

  bool connected() const { return connected_.load(); }
  uint64_t connections() const { return connections_.load(); }
  uint64_t dropped_messages() const { return dropped_.load(); }
  size_t queued_bytes() const;

 private:
  void Loop();
  // One connection's life: returns when it breaks or on Stop.
  void Serve(common::UniqueFd fd);
  void Wake();

  const std::string socket_path_;
  const int64_t reconnect_interval_ns_;
  const size_t max_queue_bytes_;
  Handler* handler_;

  int wake_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> connected_{false};
  std::atomic<uint64_t> connections_{0};
  std::atomic<uint64_t> dropped_{0};

  mutable absl::Mutex mu_;
  struct Frame {
    std::string bytes;
    bool control = false;
  };
  std::deque<Frame> queue_ ABSL_GUARDED_BY(mu_);  // whole frames; front() may be partly written
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t control_frames_ ABSL_GUARDED_BY(mu_) = 0;
  size_t front_written_ ABSL_GUARDED_BY(mu_) = 0;
  bool refused_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace podscope::agent::probe
