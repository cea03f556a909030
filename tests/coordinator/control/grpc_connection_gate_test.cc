#include "coordinator/control/grpc_connection_gate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "tests/wait_for.h"

namespace podscope::coordinator {
namespace {

// Stands where gRPC's server would: takes each handed descriptor, records how it came, and
// closes it when told.
class RecordingAcceptor : public grpc::experimental::ExternalConnectionAcceptor {
 public:
  struct Handed {
    int fd = -1;
    bool non_blocking = false;
    bool no_delay = false;
    int listener_fd = -1;
  };
  void HandleNewConnection(NewConnectionParameters* p) override {
    int no_delay = 0;
    socklen_t length = sizeof(no_delay);
    getsockopt(p->fd, IPPROTO_TCP, TCP_NODELAY, &no_delay, &length);
    absl::MutexLock lock(&mu_);
    handed_.push_back(
        {p->fd, (fcntl(p->fd, F_GETFL) & O_NONBLOCK) != 0, no_delay != 0, p->listener_fd});
  }
  ~RecordingAcceptor() override {
    for (const Handed& h : handed_) {
      if (h.fd >= 0) close(h.fd);
    }
  }
  // The connections handed over so far, once there are `count` (or after a generous deadline).
  std::vector<Handed> WaitFor(size_t count) {
    absl::MutexLock lock(&mu_);
    want_ = count;
    mu_.AwaitWithTimeout(absl::Condition(this, &RecordingAcceptor::Enough), absl::Seconds(10));
    return handed_;
  }
  size_t count() {
    absl::MutexLock lock(&mu_);
    return handed_.size();
  }
  // Ends the i-th connection and, on another thread, opens a file that takes its descriptor
  // number, as gRPC's own threads do while the gate is looking. Returns that descriptor.
  int EndAndReuse(size_t i) {
    int reused = -1;
    {
      absl::MutexLock lock(&mu_);
      const int fd = handed_.at(i).fd;
      close(fd);
      handed_.at(i).fd = -1;
      std::thread([&reused] { reused = ::open("/dev/null", O_RDONLY | O_CLOEXEC); }).join();
      EXPECT_EQ(reused, fd) << "the lowest free descriptor was not the one closed";
    }
    return reused;
  }
  // Ends the i-th connection, as gRPC does when a connection is over.
  void End(size_t i) {
    absl::MutexLock lock(&mu_);
    close(handed_.at(i).fd);
    handed_.at(i).fd = -1;
  }

 private:
  bool Enough() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return handed_.size() >= want_; }

  absl::Mutex mu_;
  std::vector<Handed> handed_ ABSL_GUARDED_BY(mu_);
  size_t want_ ABSL_GUARDED_BY(mu_) = 0;
};

int ConnectFrom(const std::string& source, uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  inet_pton(AF_INET, source.c_str(), &local.sin_addr);
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &remote.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof(remote)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// How gRPC names the peer of the connection whose client end is `client_fd`.
std::string GrpcPeerOf(int client_fd) {
  sockaddr_in local{};
  socklen_t length = sizeof(local);
  getsockname(client_fd, reinterpret_cast<sockaddr*>(&local), &length);
  char address[INET_ADDRSTRLEN] = "";
  inet_ntop(AF_INET, &local.sin_addr, address, sizeof(address));
  return std::string("ipv4:") + address + ":" + std::to_string(ntohs(local.sin_port));
}

// True once the gate has closed the connection (end of stream), false if the deadline passes.
bool ClosedWithin(int fd, std::chrono::milliseconds deadline) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(deadline.count())) <= 0) return false;
  char byte;
  return recv(fd, &byte, 1, MSG_DONTWAIT) == 0;
}

class GrpcConnectionGateTest : public ::testing::Test {
 protected:
  void Start(GrpcGateOptions options) {
    auto acceptor = std::make_unique<RecordingAcceptor>();
    acceptor_ = acceptor.get();
    gate_ = std::make_unique<GrpcConnectionGate>(options, std::move(acceptor));
    absl::StatusOr<uint16_t> port = gate_->Listen("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    gate_->Start();
  }
  void TearDown() override {
    if (gate_) gate_->Stop();
    for (int fd : clients_) close(fd);
  }
  int Connect(const std::string& source) {
    const int fd = ConnectFrom(source, port_);
    EXPECT_GE(fd, 0);
    clients_.push_back(fd);
    return fd;
  }

  std::unique_ptr<GrpcConnectionGate> gate_;
  RecordingAcceptor* acceptor_ = nullptr;
  uint16_t port_ = 0;
  std::vector<int> clients_;
};

// gRPC's external-connection handler takes a descriptor as it is: a blocking one stalls its
// poller (agents saw replies never arrive after a coordinator restart), so the gate hands over
// what gRPC's own listener would have made: non-blocking, without Nagle.
TEST_F(GrpcConnectionGateTest, HandsOverNonBlockingNoDelayConnections) {
  Start({});
  Connect("127.0.0.1");
  Connect("127.0.0.1");
  const std::vector<RecordingAcceptor::Handed> handed = acceptor_->WaitFor(2);
  ASSERT_EQ(handed.size(), 2u);
  for (const auto& h : handed) {
    EXPECT_TRUE(h.non_blocking);
    EXPECT_TRUE(h.no_delay);
    EXPECT_GE(h.listener_fd, 0);
  }
  EXPECT_EQ(gate_->open_connections(), 2u);
}

TEST_F(GrpcConnectionGateTest, BoundsConnectionsPerClientAddress) {
  Start({.max_connections = 100, .max_connections_per_client = 2});
  Connect("127.0.0.2");
  Connect("127.0.0.2");
  ASSERT_EQ(acceptor_->WaitFor(2).size(), 2u);
  const int third = Connect("127.0.0.2");
  EXPECT_TRUE(ClosedWithin(third, std::chrono::seconds(10)));
  EXPECT_EQ(gate_->refused(), 1u);
  // Another address still has its share.
  Connect("127.0.0.3");
  EXPECT_EQ(acceptor_->WaitFor(3).size(), 3u);
  std::string metrics;
  gate_->AppendMetrics(&metrics);
  EXPECT_NE(metrics.find("podscope_grpc_open_connections 3\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("podscope_grpc_rejected_connections_total{reason=\"client_full\"} 1\n"),
            std::string::npos)
      << metrics;
}

TEST_F(GrpcConnectionGateTest, BoundsAllConnections) {
  Start({.max_connections = 2, .max_connections_per_client = 100});
  const int a = Connect("127.0.0.2"), b = Connect("127.0.0.3");
  ASSERT_EQ(acceptor_->WaitFor(2).size(), 2u);
  // Both have made a call: neither can be made to give way.
  gate_->Authenticated(GrpcPeerOf(a));
  gate_->Authenticated(GrpcPeerOf(b));
  EXPECT_TRUE(ClosedWithin(Connect("127.0.0.4"), std::chrono::seconds(10)));
  std::string metrics;
  gate_->AppendMetrics(&metrics);
  EXPECT_NE(metrics.find("podscope_grpc_rejected_connections_total{reason=\"server_full\"} 1\n"),
            std::string::npos)
      << metrics;
}

// Connections no call has come over yet (a TLS handshake that stalls) only get their share:
// the oldest is shut down when a new one needs room (here with no minimum age), one that has
// made a call never is, and an address at its own share gives up its own oldest.
TEST_F(GrpcConnectionGateTest, StalledConnectionsAreShutDownOldestFirstToMakeRoom) {
  Start({.max_connections = 100,
         .max_connections_per_client = 100,
         .max_unauthenticated_connections = 2,
         .max_unauthenticated_per_client = 2,
         .min_eviction_age_ms = 0});
  const int agent = Connect("127.0.0.2");
  ASSERT_EQ(acceptor_->WaitFor(1).size(), 1u);
  gate_->Authenticated(GrpcPeerOf(agent));
  const int stalled_1 = Connect("127.0.0.3");
  const int stalled_2 = Connect("127.0.0.4");
  ASSERT_EQ(acceptor_->WaitFor(3).size(), 3u);
  const int own_1 = Connect("127.0.0.5");
  ASSERT_EQ(acceptor_->WaitFor(4).size(), 4u);
  EXPECT_TRUE(ClosedWithin(stalled_1, std::chrono::seconds(10)));
  Connect("127.0.0.5");
  ASSERT_EQ(acceptor_->WaitFor(5).size(), 5u);
  EXPECT_TRUE(ClosedWithin(stalled_2, std::chrono::seconds(10)));
  // 127.0.0.5 holds its 2 unauthenticated: a third takes the place of its own oldest.
  Connect("127.0.0.5");
  ASSERT_EQ(acceptor_->WaitFor(6).size(), 6u);
  EXPECT_TRUE(ClosedWithin(own_1, std::chrono::seconds(10)));
  pollfd p{agent, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0) << "the authenticated connection was left alone";
  std::string metrics;
  gate_->AppendMetrics(&metrics);
  for (const char* line : {"podscope_grpc_evicted_connections_total 3\n",
                           "podscope_grpc_unauthenticated_connections 2\n",
                           "podscope_grpc_rejected_connections_total{reason=\"client_full\"} 0\n"})
    EXPECT_NE(metrics.find(line), std::string::npos) << line << metrics;
}

// A connection gRPC has closed gives its slot back: the next connection from that address is
// handed over (a refusal makes the gate look again, at most every 100 ms).
TEST_F(GrpcConnectionGateTest, AClosedConnectionGivesItsSlotBack) {
  Start({.max_connections = 100, .max_connections_per_client = 1});
  Connect("127.0.0.2");
  ASSERT_EQ(acceptor_->WaitFor(1).size(), 1u);
  acceptor_->End(0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (acceptor_->count() < 2 && std::chrono::steady_clock::now() < deadline) {
    const int fd = Connect("127.0.0.2");
    pollfd p{fd, POLLIN, 0};
    poll(&p, 1, 200);  // refused ones are closed at once; a handed one stays open
  }
  EXPECT_EQ(acceptor_->count(), 2u);
  EXPECT_EQ(gate_->open_connections(), 1u);
}

// gRPC closes a connection and its threads open another file on the same descriptor number at
// any time: the gate sees a file that is not that socket and gives the slot back. Its look at a
// descriptor another thread owns is no data race of the gate's (the ThreadSanitizer suite would
// stop here).
TEST_F(GrpcConnectionGateTest, ADescriptorReusedForAnotherFileGivesItsSlotBack) {
  Start({.max_connections = 100, .max_connections_per_client = 1});
  Connect("127.0.0.2");
  ASSERT_EQ(acceptor_->WaitFor(1).size(), 1u);
  ASSERT_EQ(gate_->open_connections(), 1u);
  const int reused = acceptor_->EndAndReuse(0);
  EXPECT_TRUE(testing::WaitFor([&] { return gate_->open_connections() == 0; }))
      << gate_->open_connections() << " open";
  if (reused >= 0) close(reused);
}

}  // namespace
}  // namespace podscope::coordinator
