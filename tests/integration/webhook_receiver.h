// A local HTTP endpoint that receives podscope's webhook notifications, for tests: it answers
// 200, or 500, or never answers (holding the connection open until it is destroyed), or trickles
// (a header announcing a megabyte, then one byte of it every 200 ms, on each connection it holds).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/parse_number.h"

namespace podscope::testing {

class WebhookReceiver {
 public:
  enum class Mode { kOk, kFail, kNeverAnswer, kTrickle };

  explicit WebhookReceiver(Mode mode) : mode_(mode) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(listen_fd_, 16);
    socklen_t len = sizeof(addr);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }
  ~WebhookReceiver() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    thread_.join();
    for (const int fd : held_) close(fd);
    close(listen_fd_);
  }

  int port() const { return port_; }
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/hooks/podscope";
  }

  // The request bodies received so far (with kNeverAnswer: the requests, never answered).
  std::vector<std::string> bodies() const {
    absl::MutexLock lock(&mu_);
    return bodies_;
  }
  // Waits (up to `timeout`) until at least `n` requests arrived.
  bool WaitForRequests(size_t n, absl::Duration timeout) const {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return bodies_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
  }

 private:
  void Loop() {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return;
      }
      if (mode_ == Mode::kTrickle && absl::Now() >= next_trickle_) {
        next_trickle_ = absl::Now() + absl::Milliseconds(200);
        for (const int held : held_) {
          [[maybe_unused]] const ssize_t n = send(held, "x", 1, MSG_NOSIGNAL);
        }
      }
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, mode_ == Mode::kTrickle ? 20 : 100) <= 0) continue;
      const int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      const std::string body = ReadRequest(fd);
      {
        absl::MutexLock lock(&mu_);
        bodies_.push_back(body);
      }
      if (mode_ == Mode::kNeverAnswer) {
        held_.push_back(fd);
        continue;
      }
      if (mode_ == Mode::kTrickle) {
        const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n";
        [[maybe_unused]] const ssize_t n = send(fd, head.data(), head.size(), MSG_NOSIGNAL);
        held_.push_back(fd);
        continue;
      }
      const std::string answer =
          mode_ == Mode::kOk ? "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                             : "HTTP/1.1 500 Internal Server Error\r\nContent-Length: "
                               "4\r\nConnection: close\r\n\r\noops";
      [[maybe_unused]] const ssize_t n = send(fd, answer.data(), answer.size(), MSG_NOSIGNAL);
      close(fd);
    }
  }

  // The body of one request (Content-Length framed), reading for at most 5 s.
  static std::string ReadRequest(int fd) {
    std::string in;
    char buffer[4096];
    const auto deadline = absl::Now() + absl::Seconds(5);
    size_t want = std::string::npos;
    while (absl::Now() < deadline) {
      const size_t head_end = in.find("\r\n\r\n");
      if (head_end != std::string::npos && want == std::string::npos) {
        const size_t at = in.find("Content-Length: ");
        int64_t length = 0;
        if (at != std::string::npos) {
          const absl::StatusOr<int64_t> n =
              common::ParseInt(in.substr(at + 16, in.find('\r', at) - at - 16));
          length = n.ok() ? *n : 0;
        }
        want = head_end + 4 + static_cast<size_t>(length);
      }
      if (want != std::string::npos && in.size() >= want) return in.substr(in.find("\r\n\r\n") + 4);
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      in.append(buffer, static_cast<size_t>(n));
    }
    return in;
  }

  const Mode mode_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::vector<int> held_;                           // the receiver thread's only
  absl::Time next_trickle_ = absl::InfinitePast();  // the receiver thread's only
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> bodies_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace podscope::testing
