#include "http/http_client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/cancellation.h"

namespace podscope::http {
namespace {

// A listening socket on an ephemeral loopback port (its port in *port).
int ListenOnLoopback(uint16_t* port) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  listen(listener, 1);
  socklen_t len = sizeof(addr);
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return listener;
}

// Reads a request up to the end of its head (the tests' requests carry nothing after it that
// matters).
void ReadRequestHead(int fd) {
  std::string request;
  char buf[4096];
  while (request.find("\r\n\r\n") == std::string::npos) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    request.append(buf, static_cast<size_t>(n));
  }
}

// A one-connection server on loopback: reads a request's head, writes `answer`, then keeps the
// connection open until `hang_up` is notified (or 30 s pass), as chromedriver does.
class OneShotServer {
 public:
  explicit OneShotServer(std::string answer) : answer_(std::move(answer)) {
    listener_ = ListenOnLoopback(&port_);
    thread_ = std::thread([this] {
      const int fd = accept(listener_, nullptr, nullptr);
      ReadRequestHead(fd);
      send(fd, answer_.data(), answer_.size(), MSG_NOSIGNAL);
      hung_up_by_client_in_time_ = hang_up.WaitForNotificationWithTimeout(absl::Seconds(30));
      close(fd);
    });
  }
  ~OneShotServer() { Finish(); }
  uint16_t port() const { return port_; }
  // Lets the server hang up; whether the client had its answer while the connection was open.
  bool Finish() {
    if (!hang_up.HasBeenNotified()) hang_up.Notify();
    if (thread_.joinable()) thread_.join();
    if (listener_ >= 0) close(listener_);
    listener_ = -1;
    return hung_up_by_client_in_time_;
  }
  absl::Notification hang_up;

 private:
  std::string answer_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  bool hung_up_by_client_in_time_ = false;
};

// A response with a Content-Length is complete once that many bytes came: the client does not
// wait for the server to close (chromedriver answers "Connection: close" and then waits for the
// client to go; every WebDriver call took the read timeout before).
// --server, webhooks and shard members are URLs read by one HOST:PORT parser
// (common/host_port.h): the scheme's port when none is given, IPv6 in brackets.
TEST(HttpClientTest, ServerUrlsTakeTheSchemesPortAndIpv6InBrackets) {
  absl::StatusOr<ServerAddress> plain = ParseServerUrl("http://node-0");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->host, "node-0");
  EXPECT_EQ(plain->port, 80);
  EXPECT_FALSE(plain->tls);
  absl::StatusOr<ServerAddress> v6 = ParseServerUrl("https://[::1]:8443/base/");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 8443);
  EXPECT_TRUE(v6->tls);
  EXPECT_EQ(v6->base_path, "/base");
  EXPECT_EQ(ParseServerUrl("https://[::1]")->port, 443);
  EXPECT_EQ(ParseServerUrl("http://host:0").status().message(),
            "--server http://host:0: \"host:0\" has no valid port: the port is a number from 1 "
            "to 65535");
  EXPECT_EQ(ParseServerUrl("https://::1:8443").status().message(),
            "--server https://::1:8443: \"::1:8443\" is an IPv6 address without brackets: write "
            "[ADDRESS]:PORT");
  EXPECT_FALSE(ParseServerUrl("https://").ok());
  EXPECT_FALSE(ParseServerUrl("https://user@host:8443").ok());
}

TEST(HttpClientTest, AResponseEndsAtItsContentLengthWithoutWaitingForTheServerToClose) {
  OneShotServer server("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
  absl::StatusOr<HttpClientResponse> r = HttpRequestTo(
      {.host = "127.0.0.1", .port = server.port(), .timeout_seconds = 120}, "GET", "/");
  server.hang_up.Notify();
  EXPECT_TRUE(server.Finish());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello");
}

// The length is found however the header is written (case, spaces), after an interim 100, and
// a 304 ends with its header even when it announces the length of what it did not send.
TEST(HttpClientTest, TheEndOfAResponseIsFoundInEveryFormOfItsHeader) {
  const std::pair<std::string, std::string> cases[] = {
      {"HTTP/1.1 200 OK\r\nCONTENT-LENGTH:   5  \r\n\r\nhello", "hello"},
      {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi", "hi"},
      {"HTTP/1.1 304 Not Modified\r\nContent-Length: 900\r\nETag: \"x\"\r\n\r\n", ""},
  };
  for (const auto& [answer, body] : cases) {
    OneShotServer server(answer);
    absl::StatusOr<HttpClientResponse> r = HttpRequestTo(
        {.host = "127.0.0.1", .port = server.port(), .timeout_seconds = 120}, "GET", "/");
    server.hang_up.Notify();
    EXPECT_TRUE(server.Finish()) << answer;
    ASSERT_TRUE(r.ok()) << r.status() << " for " << answer;
    EXPECT_NE(r->status, 100) << answer;
    EXPECT_EQ(r->body, body) << answer;
  }
}

// Cut short (the server closes after 5 of 10 bytes): a DataLoss error, never a short 200.
TEST(HttpClientTest, ABodyShorterThanItsContentLengthIsAnError) {
  OneShotServer server("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello");
  server.hang_up.Notify();  // the server closes at once
  absl::StatusOr<HttpClientResponse> r =
      HttpRequestTo({.host = "127.0.0.1", .port = server.port()}, "GET", "/");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
}

// A download handed to a sink as it arrives: de-chunked, up to its Content-Length, or to the end
// of the connection; nothing kept in the response. Other answers keep their body; a body cut
// short and the sink's own error are errors.
TEST(HttpClientTest, ABodySinkGetsA200sBodyAsItArrivesInEveryFraming) {
  struct Case {
    std::string answer;
    bool closes;  // the server hangs up after answering
    std::string expected;
  };
  const Case cases[] = {
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"
       "7;ext=1\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\n",
       false, "hello, world"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA", false, "hello"},
      {"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end", true, "until the end"},
  };
  for (const Case& c : cases) {
    OneShotServer server(c.answer);
    if (c.closes) server.hang_up.Notify();
    std::string got;
    ServerAddress address{.host = "127.0.0.1", .port = server.port()};
    address.body_sink = [&](std::string_view piece) {
      got.append(piece);
      return absl::OkStatus();
    };
    absl::StatusOr<HttpClientResponse> r = HttpRequestTo(address, "GET", "/");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(got, c.expected);
    EXPECT_EQ(r->body, "");
  }
  {
    OneShotServer server(
        "HTTP/1.1 404 Not Found\r\nContent-Length: 17\r\n\r\n{\"detail\":\"gone\"}");
    bool called = false;
    ServerAddress address{.host = "127.0.0.1", .port = server.port()};
    address.body_sink = [&](std::string_view) {
      called = true;
      return absl::OkStatus();
    };
    absl::StatusOr<HttpClientResponse> r = HttpRequestTo(address, "GET", "/");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 404);
    EXPECT_EQ(ProblemDetail(*r), "HTTP 404: gone");
    EXPECT_FALSE(called);
  }
  {
    OneShotServer server("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel");
    server.hang_up.Notify();  // the server fails mid-chunk
    ServerAddress address{.host = "127.0.0.1", .port = server.port()};
    address.body_sink = [](std::string_view) { return absl::OkStatus(); };
    EXPECT_EQ(HttpRequestTo(address, "GET", "/").status().code(), absl::StatusCode::kDataLoss);
  }
  {
    OneShotServer server("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
    ServerAddress address{.host = "127.0.0.1", .port = server.port()};
    address.body_sink = [](std::string_view) { return absl::InternalError("disk full"); };
    EXPECT_EQ(HttpRequestTo(address, "GET", "/").status(), absl::InternalError("disk full"));
  }
}

// A server that reads a request's head, answers a header announcing 1,000 bytes, then sends one
// byte every 50 ms (a sink that answers a byte at a time) until told to stop.
class TricklingServer {
 public:
  TricklingServer() {
    listener_ = ListenOnLoopback(&port_);
    thread_ = std::thread([this] {
      const int fd = accept(listener_, nullptr, nullptr);
      ReadRequestHead(fd);
      const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
      send(fd, head.data(), head.size(), MSG_NOSIGNAL);
      got_request.Notify();
      while (!stop.WaitForNotificationWithTimeout(absl::Milliseconds(50)) && body_bytes_ < 1000 &&
             send(fd, "x", 1, MSG_NOSIGNAL) == 1) {
        ++body_bytes_;
      }
      close(fd);
    });
  }
  ~TricklingServer() {
    if (!stop.HasBeenNotified()) stop.Notify();
    if (thread_.joinable()) thread_.join();
    close(listener_);
  }
  uint16_t port() const { return port_; }
  // Body bytes sent before the client hung up or the server was stopped.
  int body_bytes() {
    if (!stop.HasBeenNotified()) stop.Notify();
    if (thread_.joinable()) thread_.join();
    return body_bytes_;
  }
  absl::Notification got_request, stop;

 private:
  int listener_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  int body_bytes_ = 0;
};

// The deadline bounds the whole exchange: a server that trickles a byte every 50 ms makes
// progress on every read (a per-read timeout never fires: it once held an alert delivery for 17
// minutes) and is cut off at the deadline, long before its 1,000 bytes.
TEST(HttpClientTest, ATricklingServerIsCutOffAtTheExchangesDeadline) {
  TricklingServer server;
  absl::StatusOr<HttpClientResponse> r = HttpRequestTo(
      {.host = "127.0.0.1", .port = server.port(), .timeout_seconds = 5, .deadline_ms = 500},
      "POST", "/", "{}", "application/json");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_NE(r.status().message().find("past its deadline"), std::string::npos) << r.status();
  EXPECT_LT(server.body_bytes(), 1000);
}

// Cancelled from another thread (the coordinator stopping), an exchange ends at once, whatever
// its deadline.
TEST(HttpClientTest, AnExchangeEndsWhenCancelled) {
  TricklingServer server;
  common::Cancellation cancel;
  absl::StatusOr<HttpClientResponse> r;
  std::thread client([&] {
    r = HttpRequestTo({.host = "127.0.0.1",
                       .port = server.port(),
                       .timeout_seconds = 600,
                       .deadline_ms = 600'000,
                       .cancel = &cancel},
                      "GET", "/");
  });
  server.got_request.WaitForNotification();
  cancel.Cancel();
  client.join();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_LT(server.body_bytes(), 1000);
  // Cancelled before it starts: it does not start.
  absl::StatusOr<HttpClientResponse> after =
      HttpRequestTo({.host = "127.0.0.1", .port = server.port(), .cancel = &cancel}, "GET", "/");
  EXPECT_FALSE(after.ok());
}

}  // namespace
}  // namespace podscope::http
