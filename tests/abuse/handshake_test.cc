// Connections that never finish their TLS handshake, on both of the coordinator's ports, from
// many loopback addresses, kept up by an attacker that reconnects as soon as one is dropped.
// Neither port may be taken from the clients and agents that do authenticate: stalled
// connections only get the unauthenticated share of the slots (the oldest makes room for a new
// one), and the handshake deadline frees them. Each test prints its figures as an "[ abuse ]"
// line.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "common/parse_number.h"
#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/daemon.h"
#include "tests/integration/raw_client.h"
#include "tests/integration/test_security.h"
#include "tests/wait_for.h"

namespace podscope::testing {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

int64_t MetricValue(int port, const std::string& sample) {
  return common::ParseInt(Metric(port, sample)).value_or(-1);
}

// Connections that connect and then send nothing (a TLS handshake that never starts), from
// `addresses` × `per_address` sources, each reopened as soon as the server drops it, until Stop.
class StalledConnections {
 public:
  StalledConnections(int port, int addresses, int per_address, int first_octet) : port_(port) {
    for (int a = 0; a < addresses; ++a) {
      const std::string source = "127." + std::to_string(first_octet) + "." +
                                 std::to_string(a / 250) + "." + std::to_string(a % 250 + 1);
      for (int i = 0; i < per_address; ++i) held_.push_back({source, -1});
    }
  }
  ~StalledConnections() {
    Stop();
    for (Held& h : held_)
      if (h.fd >= 0) close(h.fd);
  }

  void Start() {
    thread_ = std::thread([this] { Run(); });
  }
  // Stops reconnecting; the connections open now stay open (until the server drops them).
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  uint64_t connects() const { return connects_; }
  // How many of the connections still open the server has closed (EOF or reset).
  size_t ClosedByServer() {
    size_t closed = 0;
    for (const Held& h : held_) closed += h.fd < 0 || ClosedNow(h.fd);
    return closed;
  }
  size_t size() const { return held_.size(); }

 private:
  // Whether the server has closed `fd` (EOF or reset); what it sent before is read and dropped.
  static bool ClosedNow(int fd) {
    char buf[4096];
    while (true) {
      const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) continue;
      return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
    }
  }

  struct Held {
    std::string source;
    int fd;
  };

  void Run() {
    std::vector<pollfd> polls(held_.size());
    while (!stop_) {
      for (size_t i = 0; i < held_.size() && !stop_; ++i) {
        if (held_[i].fd >= 0) continue;
        held_[i].fd = ConnectFrom(held_[i].source.c_str(), port_);
        connects_ += held_[i].fd >= 0;
      }
      for (size_t i = 0; i < held_.size(); ++i) polls[i] = {held_[i].fd, POLLIN | POLLRDHUP, 0};
      if (poll(polls.data(), polls.size(), 20) <= 0) continue;
      for (size_t i = 0; i < held_.size(); ++i) {
        // Whatever the server sends (a 503, an alert) or a close: the attacker drops it and
        // comes back at once.
        if (held_[i].fd >= 0 && polls[i].revents != 0) {
          close(held_[i].fd);
          held_[i].fd = -1;
        }
      }
    }
  }

  const int port_;
  std::vector<Held> held_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> connects_{0};
};

class HandshakeAbuseTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    // Thousands of sockets in this process.
    rlimit files{};
    getrlimit(RLIMIT_NOFILE, &files);
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
};

// 9 addresses × 60 stalled connections: more than the REST port's 512 slots, each address
// under its 64. Every authenticated request must still be served.
TEST_F(HandshakeAbuseTest, StalledHandshakesLeaveTheRestPortToClients) {
  StartDaemon();
  StalledConnections attack(port_, /*addresses=*/9, /*per_address=*/60, /*first_octet=*/1);
  attack.Start();
  ASSERT_TRUE(WaitFor([&] {
    return MetricValue(port_, "podscope_http_unauthenticated_connections") >= 100;
  })) << "the attack never got going";

  constexpr int kRequests = 109;
  int served = 0;
  std::vector<double> ms;
  for (int i = 0; i < kRequests; ++i) {
    const auto start = Clock::now();
    served += HttpCall(port_, "GET", "/v1/captures").status == 200;
    ms.push_back(MsSince(start));
  }
  const int64_t unauthenticated = MetricValue(port_, "podscope_http_unauthenticated_connections");
  attack.Stop();
  std::sort(ms.begin(), ms.end());
  const int64_t evicted = MetricValue(port_, "podscope_http_evicted_connections_total");
  std::printf(
      "[ abuse ] stalled TLS handshakes, REST port: %zu from 9 addresses (%llu connects)  "
      "authenticated requests served %d/%d  p50 %.1f ms  max %.1f ms  evicted %lld  "
      "unauthenticated open %lld\n",
      attack.size(), static_cast<unsigned long long>(attack.connects()), served, kRequests,
      ms[ms.size() / 2], ms.back(), static_cast<long long>(evicted),
      static_cast<long long>(unauthenticated));
  std::fflush(stdout);
  EXPECT_EQ(served, kRequests);
  EXPECT_GT(evicted, 0);
  EXPECT_LE(unauthenticated, 128) << "the unauthenticated share";
  // What the attacker holds now is dropped within the handshake deadline (5 s).
  EXPECT_TRUE(WaitFor([&] { return attack.ClosedByServer() == attack.size(); }))
      << attack.ClosedByServer() << " of " << attack.size();
}

// 128 addresses × 16 stalled connections to the agents' port (2,048, twice its unauthenticated
// share): a real agent still connects, the coordinator's memory stays bounded, and the stalled
// connections are freed by the handshake deadline once the attacker stops reconnecting.
TEST_F(HandshakeAbuseTest, StalledHandshakesLeaveTheAgentsPortToAgents) {
  StartDaemon();
  const std::string grpc = daemon_->WaitForLog("agents on grpc://[^:]+:([0-9]+)");
  ASSERT_FALSE(grpc.empty());
  const int grpc_port = static_cast<int>(common::ParseInt(grpc).value());
  const uint64_t rss_before = RssBytes(daemon_->pid());

  StalledConnections attack(grpc_port, /*addresses=*/128, /*per_address=*/16,
                            /*first_octet=*/2);
  attack.Start();
  ASSERT_TRUE(WaitFor([&] {
    return MetricValue(port_, "podscope_grpc_unauthenticated_connections") >= 1000;
  })) << "the attack never got going";

  const auto start = Clock::now();
  Daemon agent(AgentBinary(),
               Concat({"--coordinator", "127.0.0.1:" + grpc, "--agent-id", "node-1", "--host",
                       "node-1", "--simulate", "ranks=0-3,world=4,job=stalled,profile=light"},
                      TestSecurity::Get().AgentFlags("node-1")),
               dir_.File("agent.log"));
  const bool connected = !daemon_->WaitForLog("agent node-1 connected from").empty();
  const double connect_ms = MsSince(start);
  const uint64_t rss_attacked = RssBytes(daemon_->pid());
  const int64_t unauthenticated = MetricValue(port_, "podscope_grpc_unauthenticated_connections");
  attack.Stop();
  const int64_t evicted = MetricValue(port_, "podscope_grpc_evicted_connections_total");
  // The agent's workers are served while the attack ran.
  EXPECT_TRUE(connected) << agent.Log();
  EXPECT_NE(HttpCall(port_, "GET", "/v1/workers").body.find("\"job\":\"stalled\""),
            std::string::npos);

  // No more reconnects: the handshake deadline closes every stalled connection.
  const auto stopped = Clock::now();
  const bool freed =
      WaitFor([&] { return attack.ClosedByServer() == attack.size(); }, std::chrono::seconds(60));
  const double freed_ms = MsSince(stopped);
  EXPECT_TRUE(freed) << attack.ClosedByServer() << " of " << attack.size();
  EXPECT_TRUE(WaitFor(
      [&] { return MetricValue(port_, "podscope_grpc_unauthenticated_connections") == 0; }));
  const uint64_t rss_after = RssBytes(daemon_->pid());
  std::printf(
      "[ abuse ] stalled TLS handshakes, agents' port: %zu from 128 addresses (%llu connects)  "
      "agent connected after %.0f ms  evicted %lld  unauthenticated open %lld  all closed by "
      "the coordinator %.1f s after the last reconnect  RSS %.1f -> %.1f -> %.1f MB\n",
      attack.size(), static_cast<unsigned long long>(attack.connects()), connect_ms,
      static_cast<long long>(evicted), static_cast<long long>(unauthenticated), freed_ms / 1e3,
      rss_before / 1e6, rss_attacked / 1e6, rss_after / 1e6);
  std::fflush(stdout);
  EXPECT_GT(evicted, 0);
  EXPECT_LE(unauthenticated, 1024) << "the unauthenticated share";
}

}  // namespace
}  // namespace podscope::testing
