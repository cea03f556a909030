// The coordinator's settings as the daemon loads them: the config file, the flags over it, and
// the values derived from both.
#include <gtest/gtest.h>

#include <string>

#include "coordinator/coordinator_flags.h"
#include "coordinator/shards/shard_map.h"
#include "tests/test_paths.h"

namespace podscope::coordinator {
namespace {

TEST(CoordinatorSettingsTest, FlagsOverTheFileThenDerivedValues) {
  testing::ScratchDir dir;
  CoordinatorFlags flags;
  flags.config_path = dir.Write("c.json", R"({"http": "127.0.0.1:9000", "data_dir": "/from/file",
      "insecure": true,
      "limits": {"max_events_per_worker": 12345, "max_ranks_per_capture": 77},
      "shards": {"members_file": "/etc/members", "self": "file-self"}})");
  flags.data_dir = "/from/flag";
  flags.shard_name = "podscope-2";
  absl::StatusOr<CoordinatorSettings> s = LoadCoordinatorSettings(flags);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->http, "127.0.0.1:9000");  // the file's, no flag given
  EXPECT_EQ(s->data_dir, "/from/flag");  // the flag over the file
  EXPECT_EQ(s->shards.self, "podscope-2");
  EXPECT_TRUE(s->insecure);
  // Derived: a live capture's bounds are the API's, uploads stream under the data directory,
  // sharded ids end with this shard's tag, and plaintext agents need not be named by a
  // certificate.
  EXPECT_EQ(s->scheduler.max_events_per_worker, 12345u);
  EXPECT_EQ(s->scheduler.max_workers_per_capture, 77u);
  EXPECT_EQ(s->http_limits.upload_dir, "/from/flag/uploads");
  EXPECT_EQ(s->scheduler.id_suffix, "-" + ShardTag("podscope-2"));
  EXPECT_FALSE(s->scheduler.id_suffix.empty());
  EXPECT_FALSE(s->agents.require_certificate_identity);
}

TEST(CoordinatorSettingsTest, UnshardedIdsHaveNoSuffix) {
  CoordinatorFlags flags;
  flags.insecure = true;
  absl::StatusOr<CoordinatorSettings> s = LoadCoordinatorSettings(flags);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->scheduler.id_suffix, "");
  EXPECT_EQ(s->http_limits.upload_dir, "podscope-data/uploads");
}

TEST(CoordinatorSettingsTest, BadInputIsRefusedWithItsReason) {
  testing::ScratchDir dir;
  CoordinatorFlags missing;
  missing.config_path = dir.File("absent.json");
  missing.insecure = true;
  EXPECT_FALSE(LoadCoordinatorSettings(missing).ok());

  CoordinatorFlags bad_key;
  bad_key.config_path = dir.Write("bad.json", R"({"limits": {"max_events_per_worker": 0}})");
  bad_key.insecure = true;
  const absl::Status status = LoadCoordinatorSettings(bad_key).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("max_events_per_worker"), std::string_view::npos) << status;

  // Neither certificates nor --insecure: refused, naming both ways out.
  const absl::Status no_tls = LoadCoordinatorSettings(CoordinatorFlags{}).status();
  EXPECT_FALSE(no_tls.ok());
  EXPECT_NE(no_tls.message().find("--insecure"), std::string_view::npos) << no_tls;
}

}  // namespace
}  // namespace podscope::coordinator
