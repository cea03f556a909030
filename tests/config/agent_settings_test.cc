// The agent's settings as the daemon loads them: the config file, the flags over it, and what
// follows from both (the host, the collectors' settings, whether probes are served).
#include <gtest/gtest.h>

#include <string>

#include "agent/agent_flags.h"
#include "tests/test_paths.h"

namespace podscope::agent {
namespace {

TEST(AgentSettingsTest, FlagsOverTheFileThenTheCollectorsSettings) {
  testing::ScratchDir dir;
  AgentFlags flags;
  flags.config_path = dir.Write("a.json", R"({"coordinator": "10.0.0.1:50051", "host": "file-host",
      "simulate": "ranks=0-3,world=4,job=j", "insecure": true})");
  flags.host = "node-7";
  flags.proc_root = "/host/proc";
  absl::StatusOr<AgentSettings> s = LoadAgentSettings(flags);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->agent.coordinator, "10.0.0.1:50051");  // the file's
  EXPECT_EQ(s->agent.host, "node-7");                 // the flag over the file
  EXPECT_EQ(s->collectors.host, "node-7");
  EXPECT_EQ(s->collectors.simulate, "ranks=0-3,world=4,job=j");
  EXPECT_EQ(s->collectors.proc_root, "/host/proc");
  // Simulated without --probe-socket: no probes (simulated agents share a machine).
  EXPECT_FALSE(s->collectors.probes);

  flags.probe_socket = dir.File("probe.sock");
  s = LoadAgentSettings(flags);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->collectors.probes);
  EXPECT_EQ(s->collectors.probe_socket, dir.File("probe.sock"));
}

TEST(AgentSettingsTest, ARealAgentServesProbesAndNamesItsHost) {
  AgentFlags flags;
  flags.insecure = true;
  absl::StatusOr<AgentSettings> s = LoadAgentSettings(flags);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->collectors.probes);
  EXPECT_FALSE(s->agent.host.empty());
  EXPECT_EQ(s->collectors.host, s->agent.host);
}

TEST(AgentSettingsTest, BadInputIsRefusedWithItsReason) {
  testing::ScratchDir dir;
  AgentFlags bad_key;
  bad_key.config_path = dir.Write("bad.json", R"({"coordinater": "x:1", "insecure": true})");
  const absl::Status key = LoadAgentSettings(bad_key).status();
  EXPECT_EQ(key.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(key.message().find("coordinater"), std::string_view::npos) << key;

  AgentFlags loud;
  loud.insecure = true;
  loud.log_level = "loud";
  const absl::Status level = LoadAgentSettings(loud).status();
  EXPECT_NE(level.message().find("\"loud\" is not one of"), std::string_view::npos) << level;

  for (const char* health : {"nohost", "localhost:0", "127.0.0.1:99999", ":0"}) {
    AgentFlags bad_health;
    bad_health.insecure = true;
    bad_health.health = health;
    const absl::Status s = LoadAgentSettings(bad_health).status();
    EXPECT_NE(s.message().find("--health"), std::string_view::npos) << health << ": " << s;
  }

  AgentFlags missing_cert;
  missing_cert.tls = {
      .cert = dir.File("none.pem"), .key = dir.File("none.key"), .ca = dir.File("ca.pem")};
  EXPECT_FALSE(LoadAgentSettings(missing_cert).ok());
  EXPECT_FALSE(LoadAgentSettings(AgentFlags{}).ok());  // neither TLS files nor --insecure
}

}  // namespace
}  // namespace podscope::agent
