#include "agent/health/health_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio.hpp>
#include <string>
#include <vector>

namespace podscope::agent {
namespace {

// One request on a fresh connection; the whole answer.
std::string Exchange(uint16_t port, const std::string& request) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  boost::asio::write(socket, boost::asio::buffer(request));
  std::string answer;
  boost::system::error_code ec;
  char buffer[4096];
  while (const size_t n = socket.read_some(boost::asio::buffer(buffer), ec))
    answer.append(buffer, n);
  return answer;
}

// As the kubelet's prober asks: one request, and the connection closed after its answer.
std::string Get(uint16_t port, const std::string& path) {
  return Exchange(port, "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
}

TEST(HealthServerTest, LiveAlwaysReadyOnlyWhenConnectedAndNothingElse) {
  std::atomic<bool> ready{false};
  absl::StatusOr<std::unique_ptr<HealthServer>> server =
      HealthServer::Start("127.0.0.1:0", [&](std::string* why) {
        if (!ready) *why = "not connected";
        return ready.load();
      });
  ASSERT_TRUE(server.ok()) << server.status();
  const uint16_t port = (*server)->port();
  EXPECT_EQ(Get(port, "/healthz").rfind("HTTP/1.1 200", 0), 0u);
  const std::string not_ready = Get(port, "/readyz");
  EXPECT_EQ(not_ready.rfind("HTTP/1.1 503", 0), 0u) << not_ready;
  EXPECT_NE(not_ready.find("not connected"), std::string::npos);
  ready = true;
  EXPECT_EQ(Get(port, "/readyz").rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_EQ(Get(port, "/v1/captures").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(Exchange(port,
                     "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: "
                     "close\r\n\r\n")
                .rfind("HTTP/1.1 405", 0),
            0u);
  // Garbage gets a 400 and headers past 8 KiB a 431, and the connection is closed; the server
  // goes on serving.
  EXPECT_EQ(Exchange(port, "\x16\x03\x01 not http\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
  EXPECT_EQ(Exchange(port, "GET /healthz HTTP/1.1\r\nX: " + std::string(10'000, 'a') + "\r\n\r\n")
                .rfind("HTTP/1.1 431", 0),
            0u);
  EXPECT_EQ(Get(port, "/healthz").rfind("HTTP/1.1 200", 0), 0u);
}

TEST(HealthServerTest, AClientThatSendsNothingDoesNotHoldItUp) {
  absl::StatusOr<std::unique_ptr<HealthServer>> server =
      HealthServer::Start("127.0.0.1:0", [](std::string*) { return true; });
  ASSERT_TRUE(server.ok()) << server.status();
  // Connected, silent, and left open: served one at a time, the server gives it 2 s at most.
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket idle(io);
  idle.connect({boost::asio::ip::make_address("127.0.0.1"), (*server)->port()});
  EXPECT_EQ(Get((*server)->port(), "/healthz").rfind("HTTP/1.1 200", 0), 0u);
}

// A client that keeps its connections alive, or opens more than the server holds and leaves
// them silent, cannot keep a prober out: every answer closes its connection, and a full server
// drops the connection waiting longest for the newcomer.
TEST(HealthServerTest, ConnectionsHeldOpenOrSilentDoNotKeepAProberOut) {
  absl::StatusOr<std::unique_ptr<HealthServer>> server =
      HealthServer::Start("127.0.0.1:0", [](std::string*) { return true; });
  ASSERT_TRUE(server.ok()) << server.status();
  const uint16_t port = (*server)->port();
  // Asked to keep the connection alive, the server closes it anyway (Exchange reads to EOF).
  const std::string kept = Exchange(port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(kept.rfind("HTTP/1.1 200", 0), 0u) << kept;
  EXPECT_NE(kept.find("Connection: close"), std::string::npos) << kept;
  boost::asio::io_context io;
  std::vector<boost::asio::ip::tcp::socket> silent;
  for (int i = 0; i < 100; ++i) {
    silent.emplace_back(io).connect({boost::asio::ip::make_address("127.0.0.1"), port});
  }
  EXPECT_EQ(Get(port, "/healthz").rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_EQ(Get(port, "/readyz").rfind("HTTP/1.1 200", 0), 0u);
}

TEST(HealthServerTest, BadAddressesAreRefused) {
  for (const char* address : {"nonsense", "127.0.0.1:99999", "not-an-ip:80"}) {
    EXPECT_FALSE(HealthServer::Start(address, [](std::string*) { return true; }).ok()) << address;
  }
}

}  // namespace
}  // namespace podscope::agent
