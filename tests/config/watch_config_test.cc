// The watch's configuration keys in both daemons' config files: every key checked,
// an unknown one named with the closest known one, values out of range refused.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "agent/agent_config.h"
#include "coordinator/coordinator_config.h"

namespace podscope {
namespace {

boost::json::object Parse(std::string_view json) { return boost::json::parse(json).as_object(); }

std::string CoordinatorError(std::string_view json) {
  coordinator::CoordinatorSettings s;
  return std::string(coordinator::ApplyCoordinatorConfig(Parse(json), &s).message());
}

std::string AgentError(std::string_view json) {
  agent::AgentSettings s;
  return std::string(agent::ApplyAgentConfig(Parse(json), &s).message());
}

TEST(WatchConfigTest, CoordinatorNotifyKeysAreReadAndChecked) {
  coordinator::CoordinatorSettings s;
  ASSERT_TRUE(
      coordinator::ApplyCoordinatorConfig(
          Parse(
              R"({"notify": {"alertmanagers": ["http://am:9093"], "webhooks": ["https://h/x", "http://h:81/y"], "slack_webhooks": ["https://hooks.slack.example/T0/B0/x"],
                                       "timeout_ms": 2500, "max_attempts": 7, "max_queued": 10,
                                       "external_url": "https://podscope.example", "ca_file": "/etc/ca.pem"}})"),
          &s)
          .ok());
  EXPECT_EQ(s.notify.alertmanagers, std::vector<std::string>{"http://am:9093"});
  EXPECT_EQ(s.notify.webhooks.size(), 2u);
  EXPECT_EQ(s.notify.slack_webhooks.size(), 1u);
  EXPECT_EQ(s.notify.timeout, absl::Milliseconds(2500));
  EXPECT_EQ(s.notify.max_attempts, 7);
  EXPECT_EQ(s.notify.max_queued, 10u);
  EXPECT_EQ(s.notify.external_url, "https://podscope.example");
  EXPECT_EQ(s.notify.ca_file, "/etc/ca.pem");

  EXPECT_NE(CoordinatorError(R"({"notify": {"webhook": []}})").find("\"webhooks\""),
            std::string::npos)
      << CoordinatorError(R"({"notify": {"webhook": []}})");
  EXPECT_NE(CoordinatorError(R"({"notify": {"webhooks": "http://h"}})").find("not a list"),
            std::string::npos);
  EXPECT_NE(CoordinatorError(R"({"notify": {"webhooks": [5]}})").find("5 is not a URL"),
            std::string::npos);
  EXPECT_NE(CoordinatorError(R"({"notify": {"timeout_ms": 10}})").find("timeout_ms"),
            std::string::npos);
  EXPECT_NE(CoordinatorError(R"({"notify": {"max_attempts": 0}})").find("max_attempts"),
            std::string::npos);
}

TEST(WatchConfigTest, AgentWatchKeysAreReadAndChecked) {
  agent::AgentSettings s;
  ASSERT_TRUE(
      agent::ApplyAgentConfig(
          Parse(R"({"watch": {"enabled": false, "max_queued_steps": 100, "flush_interval_ms": 250,
                                      "max_batch_steps": 64}})"),
          &s)
          .ok());
  EXPECT_FALSE(s.agent.watch);
  EXPECT_EQ(s.agent.watch_queue.max_steps, 100u);
  EXPECT_EQ(s.agent.watch_sender.flush_interval, absl::Milliseconds(250));
  EXPECT_EQ(s.agent.watch_sender.max_batch_steps, 64u);
  agent::AgentSettings defaults;
  ASSERT_TRUE(agent::ApplyAgentConfig(Parse("{}"), &defaults).ok());
  EXPECT_TRUE(defaults.agent.watch) << "watching is on unless turned off";

  EXPECT_NE(AgentError(R"({"watch": {"enable": false}})").find("\"enabled\""), std::string::npos)
      << AgentError(R"({"watch": {"enable": false}})");
  EXPECT_NE(AgentError(R"({"watch": {"max_queued_steps": 0}})").find("max_queued_steps"),
            std::string::npos);
  EXPECT_NE(AgentError(R"({"watch": {"max_batch_steps": 100000}})").find("max_batch_steps"),
            std::string::npos);
}

TEST(WatchConfigTest, TheAgentsStreamIntervalIsReadAndChecked) {
  agent::AgentSettings s;
  ASSERT_TRUE(agent::ApplyAgentConfig(Parse(R"({"stream_interval_ms": 250})"), &s).ok());
  EXPECT_EQ(s.agent.capture.stream_interval_ns, 250'000'000);
  ASSERT_TRUE(agent::ApplyAgentConfig(Parse(R"({"stream_interval_ms": 0})"), &s).ok());
  EXPECT_EQ(s.agent.capture.stream_interval_ns, 0);
  EXPECT_EQ(agent::AgentSettings().agent.capture.stream_interval_ns, 1'000'000'000)
      << "a second unless told";
  EXPECT_NE(AgentError(R"({"stream_interval_ms": -1})").find("stream_interval_ms"),
            std::string::npos);
  EXPECT_NE(AgentError(R"({"stream_interval_ms": 3600000})").find("stream_interval_ms"),
            std::string::npos);
}

}  // namespace
}  // namespace podscope
