// The agent's probe socket alone, against raw unix-socket clients: registration, the messages
// a registered probe sends, refusals, bounds, and commands back to the probe.
#include "agent/probe_server/probe_server.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/frame_codec.h"
#include "common/protocol_version.h"
#include "tests/test_paths.h"
#include "tests/wait_for.h"

namespace podscope::agent {
namespace {

using testing::WaitFor;

class RecordingListener : public ProbeServer::Listener {
 public:
  void OnRegister(ProbeConnectionId id, const common::PeerCredentials& peer,
                  const v1::ProbeRegister& r) override {
    absl::MutexLock lock(&mu);
    registered.push_back(id);
    pids.push_back(peer.pid);
    ranks.push_back(r.rank());
  }
  void OnChunk(ProbeConnectionId id, v1::TraceChunk&& chunk) override {
    absl::MutexLock lock(&mu);
    chunks.push_back(chunk.capture_id());
  }
  void OnStatus(ProbeConnectionId id, const v1::ProbeCaptureStatus& status) override {
    absl::MutexLock lock(&mu);
    statuses.push_back(status.capture_id());
  }
  void OnDisconnect(ProbeConnectionId id) override {
    absl::MutexLock lock(&mu);
    disconnected.push_back(id);
  }
  // Copies, taken under the lock.
  std::vector<ProbeConnectionId> Registered() {
    absl::MutexLock lock(&mu);
    return registered;
  }
  std::vector<int64_t> Pids() {
    absl::MutexLock lock(&mu);
    return pids;
  }
  std::vector<int32_t> Ranks() {
    absl::MutexLock lock(&mu);
    return ranks;
  }
  std::vector<std::string> Chunks() {
    absl::MutexLock lock(&mu);
    return chunks;
  }
  std::vector<std::string> Statuses() {
    absl::MutexLock lock(&mu);
    return statuses;
  }
  std::vector<ProbeConnectionId> Disconnected() {
    absl::MutexLock lock(&mu);
    return disconnected;
  }

  absl::Mutex mu;
  std::vector<ProbeConnectionId> registered ABSL_GUARDED_BY(mu), disconnected ABSL_GUARDED_BY(mu);
  std::vector<int64_t> pids ABSL_GUARDED_BY(mu);
  std::vector<int32_t> ranks ABSL_GUARDED_BY(mu);
  std::vector<std::string> chunks ABSL_GUARDED_BY(mu), statuses ABSL_GUARDED_BY(mu);
};

// A probe's end, by hand: frames out, frames in.
class RawProbe {
 public:
  explicit RawProbe(const std::string& path) {
    absl::StatusOr<common::UniqueFd> fd = common::ConnectUnix(path);
    EXPECT_TRUE(fd.ok()) << fd.status();
    if (fd.ok()) fd_ = *std::move(fd);
  }
  void Send(const v1::ProbeMessage& m) { SendRaw(Frame(m.SerializeAsString())); }
  void SendRaw(const std::string& bytes) {
    ASSERT_EQ(write(fd_.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  static std::string Frame(const std::string& payload) {
    std::string frame;
    EXPECT_TRUE(common::AppendFrame(payload, 64u << 20, &frame).ok());
    return frame;
  }
  void Register(int32_t rank, uint32_t major = common::kProbeProtocolMajor) {
    v1::ProbeMessage m;
    m.mutable_register_()->set_protocol_major(major);
    m.mutable_register_()->set_rank(rank);
    Send(m);
  }
  // The next command from the agent, or nullopt when the connection closed first.
  std::optional<v1::AgentToProbe> Receive() {
    while (true) {
      absl::StatusOr<std::optional<std::string>> frame = reader_.Next();
      if (!frame.ok()) return std::nullopt;
      if (frame->has_value()) {
        v1::AgentToProbe command;
        if (!command.ParseFromString(**frame)) return std::nullopt;
        return command;
      }
      char buffer[4096];
      const ssize_t n = read(fd_.get(), buffer, sizeof(buffer));  // blocking: the agent answers
      if (n <= 0) return std::nullopt;
      reader_.Append(std::string_view(buffer, static_cast<size_t>(n)));
    }
  }
  // Whether the agent closed the connection (reads until EOF).
  bool ClosedByAgent() {
    char buffer[4096];
    while (true) {
      const ssize_t n = read(fd_.get(), buffer, sizeof(buffer));
      if (n == 0) return true;
      if (n < 0) return false;
    }
  }
  void Close() { fd_ = common::UniqueFd(); }

 private:
  common::UniqueFd fd_;
  common::FrameReader reader_{1u << 20};
};

class ProbeServerTest : public ::testing::Test {
 protected:
  void Start(ProbeServerOptions options = {}) {
    options.socket_path = scratch_.File("run/agent.sock");
    absl::StatusOr<std::unique_ptr<ProbeServer>> server = ProbeServer::Listen(options, &listener_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    server_->Run();
  }

  podscope::testing::ScratchDir scratch_;
  RecordingListener listener_;
  std::unique_ptr<ProbeServer> server_;
};

TEST_F(ProbeServerTest, ARegisteredProbesMessagesReachTheListenerAndCommandsReachIt) {
  Start();
  struct stat st {};
  ASSERT_EQ(stat(server_->socket_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0007, 0u) << "never world-writable";
  RawProbe probe(server_->socket_path());
  // Nothing counts before a registration.
  v1::ProbeMessage early;
  early.mutable_status()->set_capture_id("too-early");
  probe.Send(early);
  probe.Register(3);
  ASSERT_TRUE(WaitFor([&] { return listener_.Registered().size() == 1; }));
  EXPECT_EQ(listener_.Pids().at(0), getpid()) << "the kernel's word";
  EXPECT_EQ(listener_.Ranks().at(0), 3);
  v1::ProbeMessage chunk;
  chunk.mutable_chunk()->set_capture_id("cap");
  probe.Send(chunk);
  v1::ProbeMessage status;
  status.mutable_status()->set_capture_id("cap");
  probe.Send(status);
  ASSERT_TRUE(WaitFor([&] { return listener_.Statuses().size() == 1; }));
  EXPECT_EQ(listener_.Chunks(), std::vector<std::string>{"cap"});
  EXPECT_EQ(listener_.Statuses(), std::vector<std::string>{"cap"});
  // A command back to the probe.
  v1::AgentToProbe arm;
  arm.mutable_arm()->set_capture_id("next");
  const ProbeConnectionId id = listener_.Registered().at(0);
  ASSERT_TRUE(server_->Send(id, arm));
  std::optional<v1::AgentToProbe> got = probe.Receive();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->arm().capture_id(), "next");
  // Leaving is noticed.
  probe.Close();
  ASSERT_TRUE(WaitFor([&] { return listener_.Disconnected().size() == 1; }));
  EXPECT_FALSE(server_->Send(id, arm)) << "a probe that is gone takes no commands";
}

TEST_F(ProbeServerTest, AProbeOfAnotherProtocolMajorIsToldWhyAndDisconnected) {
  Start();
  RawProbe probe(server_->socket_path());
  probe.Register(0, common::kProbeProtocolMajor + 1);
  std::optional<v1::AgentToProbe> refused = probe.Receive();
  ASSERT_TRUE(refused.has_value());
  EXPECT_NE(refused->refused().reason().find("is not served by this agent"), std::string::npos)
      << refused->refused().reason();
  EXPECT_TRUE(probe.ClosedByAgent());
  EXPECT_EQ(listener_.Registered().size(), 0u);
}

TEST_F(ProbeServerTest, GarbageAndOversizedFramesCloseTheConnectionAndNothingElse) {
  Start({.max_frame_bytes = 1024});
  RawProbe garbage(server_->socket_path());
  garbage.SendRaw(RawProbe::Frame("\xff\xff\xff not a protobuf"));
  EXPECT_TRUE(garbage.ClosedByAgent());
  RawProbe big(server_->socket_path());
  big.SendRaw(RawProbe::Frame(std::string(4096, 'x')));
  EXPECT_TRUE(big.ClosedByAgent());
  // The server still serves others.
  RawProbe good(server_->socket_path());
  good.Register(1);
  ASSERT_TRUE(WaitFor([&] { return listener_.Registered().size() == 1; }));
}

TEST_F(ProbeServerTest, ConnectionsPastTheLimitAreClosedAtOnce) {
  Start({.max_probes = 2});
  RawProbe a(server_->socket_path()), b(server_->socket_path());
  a.Register(0);
  b.Register(1);
  ASSERT_TRUE(WaitFor([&] { return listener_.Registered().size() == 2; }));
  RawProbe third(server_->socket_path());
  EXPECT_TRUE(third.ClosedByAgent()) << "the answer is the closed socket; the probe retries later";
  EXPECT_EQ(server_->connections(), 2u);
}

}  // namespace
}  // namespace podscope::agent
