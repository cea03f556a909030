// Alert sinks against the real coordinator: a sink that answers one byte at a time is cut off
// at each attempt's deadline, counted, and neither holds up the re-sends nor a shutdown.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "common/parse_number.h"
#include "tests/integration/live_cluster_fixture.h"
#include "tests/integration/webhook_receiver.h"
#include "tests/wait_for.h"

namespace podscope::testing {
namespace {

using Clock = std::chrono::steady_clock;

class SinkAbuseTest : public LiveClusterTest {
 protected:
  // podscope_notifications_total of a destination and outcome; -1 when absent.
  int64_t Counter(const std::string& url, const std::string& outcome) {
    const std::string body = HttpCall(http_port_, "GET", "/metrics").body;
    const std::string key =
        "podscope_notifications_total{destination=\"" + url + "\",outcome=\"" + outcome + "\"} ";
    const size_t at = body.find(key);
    if (at == std::string::npos) return -1;
    const absl::StatusOr<int64_t> n =
        common::ParseInt(body.substr(at + key.size(), body.find('\n', at) - at - key.size()));
    return n.ok() ? *n : -1;
  }
};

// A webhook that answers a byte every 200 ms once held one delivery for 17 minutes (the
// timeout applied to each read, and every read made progress), and a SIGTERM'd coordinator ran
// on until the sink closed.
TEST_F(SinkAbuseTest, ATricklingSinkIsCutOffAtEachAttemptsDeadlineAndHoldsUpNoShutdown) {
  WebhookReceiver trickle(WebhookReceiver::Mode::kTrickle);
  WebhookReceiver ok(WebhookReceiver::Mode::kOk);
  config_ = dir_.Write("coordinator.json",
                       R"({"capture": {"capture_grace_ms": 4000, "upload_timeout_ms": 20000},
        "agents": {"heartbeat_interval_ms": 300},
        "notify": {"webhooks": [")" +
                           trickle.url() + R"(", ")" + ok.url() + R"("],
                   "timeout_ms": 1000, "max_attempts": 100}})");
  StartCoordinator();
  StartAgent("n0", "ranks=0-3,world=8,job=sink,seed=3,straggler=5:1.3,profile=light");
  StartAgent("n1", "ranks=4-7,world=8,job=sink,seed=3,straggler=5:1.3,profile=light");
  ASSERT_TRUE(ok.WaitForRequests(1, absl::Seconds(60)))
      << HttpCall(http_port_, "GET", "/v1/alerts").body;
  // Each attempt at the trickling sink ends at its 1 s deadline, and is tried again.
  ASSERT_TRUE(trickle.WaitForRequests(3, absl::Seconds(60)));
  EXPECT_TRUE(WaitFor([&] { return Counter(trickle.url(), "timed_out") >= 2; }))
      << HttpCall(http_port_, "GET", "/metrics").body;
  EXPECT_EQ(Counter(trickle.url(), "delivered"), 0);
  // SIGTERM while a delivery is being trickled: the coordinator stops at once all the same.
  const size_t before = trickle.bodies().size();
  ASSERT_TRUE(trickle.WaitForRequests(before + 1, absl::Seconds(30)));
  const auto start = Clock::now();
  const int code = coordinator_->Terminate();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf(
      "[ sink ] SIGTERM during a trickled delivery: exited %d in %.2f s; %lld attempts "
      "timed out\n",
      code, seconds, static_cast<long long>(trickle.bodies().size()));
  EXPECT_EQ(code, 0) << coordinator_->Log();
}

}  // namespace
}  // namespace podscope::testing
