// The HTTP server on a real socket: heavy handlers run on the heavy pool, and light requests are
// answered while every heavy thread is busy; a body over its bound is refused as it is read.
#include "http/http_server.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tests/integration/daemon.h"

namespace podscope::http {
namespace {

std::string ThreadName() {
  char name[32] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

// Heavy handlers that block until the test releases them, recording where they ran.
class BlockingHandlers {
 public:
  HttpResponse Heavy() {
    absl::MutexLock lock(&mu_);
    thread_names_.push_back(ThreadName());
    mu_.Await(absl::Condition(&released_));
    return HttpResponse::Json(200, "{}");
  }
  // Waits (generously) until `n` heavy handlers are inside Heavy().
  bool WaitForRunning(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return thread_names_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(60));
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }
  std::vector<std::string> thread_names() {
    absl::MutexLock lock(&mu_);
    return thread_names_;
  }

 private:
  absl::Mutex mu_;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> thread_names_ ABSL_GUARDED_BY(mu_);
};

TEST(HttpServerTest, HeavyHandlersRunOnTheHeavyPoolAndLightOnesAreAnsweredMeanwhile) {
  BlockingHandlers handlers;
  Router router;
  router.Add({"GET", "/healthz", [](HttpRequest&) {
                HttpResponse r = HttpResponse::Json(200, "{\"status\":\"ok\"}");
                r.body = ThreadName();
                return r;
              }});
  router.Add({.method = "GET",
              .pattern = "/heavy",
              .handler = [&handlers](HttpRequest&) { return handlers.Heavy(); },
              .heavy = true});
  HttpServer server(router, {.io_threads = 2, .heavy_threads = 2});
  absl::StatusOr<uint16_t> port = server.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();

  // Both heavy threads are taken, and stay taken until Release().
  std::vector<std::future<testing::HttpResult>> heavy;
  for (int i = 0; i < 2; ++i) {
    heavy.push_back(
        std::async(std::launch::async, [&] { return testing::HttpCall(*port, "GET", "/heavy"); }));
  }
  ASSERT_TRUE(handlers.WaitForRunning(2));
  for (const std::string& name : handlers.thread_names()) EXPECT_EQ(name, kHeavyThreadName);

  // Light requests are answered, on the I/O threads, while no heavy handler can finish; the
  // quickest of five within 100 ms (the least a loaded test machine will give).
  auto fastest = std::chrono::steady_clock::duration::max();
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const testing::HttpResult health = testing::HttpCall(*port, "GET", "/healthz");
    fastest = std::min(fastest, std::chrono::steady_clock::now() - start);
    EXPECT_EQ(health.status, 200);
    EXPECT_EQ(health.body, kIoThreadName);
  }
  EXPECT_LT(fastest, std::chrono::milliseconds(100));
  handlers.Release();
  for (auto& f : heavy) EXPECT_EQ(f.get().status, 200);
  server.Stop(5);
}

// A body with no declared length (chunked) is cut off at the bound while it is read, and the
// answer names the bound as admission's 413 does.
TEST(HttpServerTest, AChunkedBodyOverTheBoundIsRefusedWhileItIsRead) {
  Router router;
  router.Add({"PUT", "/echo", [](HttpRequest& request) {
                return HttpResponse::Json(200, std::to_string(request.body.size()));
              }});
  HttpServer server(router, {.max_body_bytes = 100});
  absl::StatusOr<uint16_t> port = server.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string head =
      "PUT /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
  const std::string within =
      testing::RawExchange(*port, head + "64\r\n" + std::string(100, 'a') + "\r\n0\r\n\r\n");
  EXPECT_NE(within.find("HTTP/1.1 200"), std::string::npos) << within;
  EXPECT_NE(within.find("\r\n\r\n100"), std::string::npos) << within;
  const std::string over =
      testing::RawExchange(*port, head + "65\r\n" + std::string(101, 'a') + "\r\n0\r\n\r\n");
  EXPECT_NE(over.find("HTTP/1.1 413"), std::string::npos) << over;
  EXPECT_NE(over.find("request bodies are limited to 100 bytes"), std::string::npos) << over;
  server.Stop(5);
}

}  // namespace
}  // namespace podscope::http
