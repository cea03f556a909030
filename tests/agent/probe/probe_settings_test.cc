#include "agent/probe/probe_settings.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace podscope::agent::probe {
namespace {

ProbeSettings From(const std::map<std::string, std::string>& env, std::string* warnings) {
  return SettingsFromEnvironment(
      [&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      warnings);
}

TEST(ProbeSettingsTest, DefaultsWithoutAnyVariable) {
  std::string warnings;
  const ProbeSettings s = From({}, &warnings);
  EXPECT_EQ(s.agent_socket, "/run/podscope/agent.sock");
  EXPECT_EQ(s.reconnect_interval_ns, 5'000'000'000);
  EXPECT_EQ(s.max_events_per_window, 4'000'000u);
  EXPECT_EQ(s.max_queue_bytes, 256u << 20);
  EXPECT_FALSE(s.disabled);
  EXPECT_EQ(warnings, "");
}

TEST(ProbeSettingsTest, VariablesAndIgnoredTypos) {
  std::string warnings;
  const ProbeSettings s = From({{"PODSCOPE_AGENT_SOCKET", "/tmp/a.sock"},
                                {"PODSCOPE_PROBE_RECONNECT_MS", "250"},
                                {"PODSCOPE_PROBE_QUEUE_MB", "8"},
                                {"PODSCOPE_CUPTI_BUFFER_KB", "lots"},
                                {"PODSCOPE_PROBE_MAX_EVENTS", "0"},
                                {"PODSCOPE_STEP_PATTERN", "^iter ([0-9]+)$"},
                                {"PODSCOPE_PROBE_DISABLE", "1"}},
                               &warnings);
  EXPECT_EQ(s.agent_socket, "/tmp/a.sock");
  EXPECT_EQ(s.reconnect_interval_ns, 250'000'000);
  EXPECT_EQ(s.max_queue_bytes, 8u << 20);
  EXPECT_EQ(s.cupti_buffer_bytes, 4u << 20) << "a typo keeps the default";
  EXPECT_EQ(s.max_events_per_window, 4'000'000u);
  EXPECT_EQ(s.step_pattern, "^iter ([0-9]+)$");
  EXPECT_TRUE(s.disabled);
  EXPECT_NE(warnings.find("PODSCOPE_CUPTI_BUFFER_KB='lots' ignored"), std::string::npos)
      << warnings;
  EXPECT_NE(warnings.find("PODSCOPE_PROBE_MAX_EVENTS='0' ignored"), std::string::npos) << warnings;
}

TEST(ProbeSettingsTest, AnInvalidStepPatternKeepsTheDefaultAndSaysWhy) {
  std::string warnings;
  const ProbeSettings s = From({{"PODSCOPE_STEP_PATTERN", "(a)\\1"}}, &warnings);
  EXPECT_EQ(s.step_pattern, kDefaultStepPattern);
  EXPECT_NE(
      warnings.find("PODSCOPE_STEP_PATTERN ignored: step pattern \"(a)\\1\" is not a valid regex"),
      std::string::npos)
      << warnings;
  std::string long_warnings;
  EXPECT_EQ(From({{"PODSCOPE_STEP_PATTERN", std::string(600, 'x')}}, &long_warnings).step_pattern,
            kDefaultStepPattern);
  EXPECT_NE(long_warnings.find("at most 512"), std::string::npos) << long_warnings;
}

}  // namespace
}  // namespace podscope::agent::probe

namespace podscope::agent::probe {
namespace {

TEST(ProbeSettingsTest, WatchIsOnByDefaultAndPodscopeWatchZeroTurnsItOff) {
  std::string warnings;
  EXPECT_TRUE(From({}, &warnings).watch);
  EXPECT_EQ(From({}, &warnings).watch_flush_interval_ns, 1'000'000'000);
  EXPECT_FALSE(From({{"PODSCOPE_WATCH", "0"}}, &warnings).watch);
  EXPECT_FALSE(From({{"PODSCOPE_WATCH", "off"}}, &warnings).watch);
  EXPECT_TRUE(From({{"PODSCOPE_WATCH", "1"}}, &warnings).watch);
  EXPECT_EQ(warnings, "");
  const ProbeSettings s =
      From({{"PODSCOPE_WATCH", "nope"}, {"PODSCOPE_WATCH_FLUSH_MS", "250"}}, &warnings);
  EXPECT_TRUE(s.watch) << "a typo keeps the default";
  EXPECT_EQ(s.watch_flush_interval_ns, 250'000'000);
  EXPECT_NE(warnings.find("PODSCOPE_WATCH='nope' ignored"), std::string::npos) << warnings;
}

TEST(ProbeSettingsTest, AWindowStreamsEverySecondUnlessToldOtherwise) {
  std::string warnings;
  EXPECT_EQ(From({}, &warnings).stream_interval_ns, 1'000'000'000);
  EXPECT_EQ(From({{"PODSCOPE_STREAM_MS", "250"}}, &warnings).stream_interval_ns, 250'000'000);
  EXPECT_EQ(From({{"PODSCOPE_STREAM_MS", "0"}}, &warnings).stream_interval_ns, 0);
  EXPECT_EQ(warnings, "");
  EXPECT_EQ(From({{"PODSCOPE_STREAM_MS", "-5"}}, &warnings).stream_interval_ns, 1'000'000'000);
  EXPECT_NE(warnings.find("PODSCOPE_STREAM_MS='-5' ignored"), std::string::npos) << warnings;
}

}  // namespace
}  // namespace podscope::agent::probe
