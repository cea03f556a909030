#include "coordinator/shards/shard_map.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "coordinator/shards/shard_membership.h"
#include "tests/test_paths.h"

namespace podscope::coordinator {
namespace {

std::vector<ShardMember> Members(int n) {
  std::vector<ShardMember> members;
  for (int i = 0; i < n; ++i) {
    members.push_back({"podscope-coordinator-" + std::to_string(i),
                       "https://shard-" + std::to_string(i) + ":8443",
                       "shard-" + std::to_string(i) + ":50051"});
  }
  return members;
}

TEST(ShardMapTest, JobsSpreadEvenlyAndEveryReplicaAgreesOnTheOwner) {
  const ShardMap a = *ShardMap::Make(Members(3), "podscope-coordinator-0");
  // Another replica's view, from the members listed in another order.
  std::vector<ShardMember> shuffled = Members(3);
  std::swap(shuffled[0], shuffled[2]);
  const ShardMap b = *ShardMap::Make(shuffled, "podscope-coordinator-2");
  std::map<std::string, int> owned;
  constexpr int kJobs = 30'000;
  for (int k = 0; k < kJobs; ++k) {
    const std::string job = "job-" + std::to_string(k);
    ASSERT_EQ(a.OwnerOf(job).name, b.OwnerOf(job).name) << job;
    ++owned[a.OwnerOf(job).name];
  }
  ASSERT_EQ(owned.size(), 3u);
  for (const auto& [name, n] : owned)
    EXPECT_NEAR(n, kJobs / 3, kJobs / 30) << name;  // within 10% of a third
}

TEST(ShardMapTest, AddingAReplicaMovesOnlyTheJobsItNowOwnsAndRemovingOneOnlyItsOwn) {
  const ShardMap three = *ShardMap::Make(Members(3), "podscope-coordinator-0");
  const ShardMap four = *ShardMap::Make(Members(4), "podscope-coordinator-0");
  int moved = 0;
  constexpr int kJobs = 20'000;
  for (int k = 0; k < kJobs; ++k) {
    const std::string job = "job-" + std::to_string(k);
    const std::string before = three.OwnerOf(job).name, after = four.OwnerOf(job).name;
    if (before != after) {
      EXPECT_EQ(after, "podscope-coordinator-3") << job << " moved between two old replicas";
      ++moved;
    }
  }
  EXPECT_NEAR(moved, kJobs / 4, kJobs / 40);  // about a quarter: the new replica's share
  // Removing replica 1 of four moves replica 1's jobs, and no other.
  std::vector<ShardMember> without = Members(4);
  without.erase(without.begin() + 1);
  const ShardMap three_left = *ShardMap::Make(without, "podscope-coordinator-0");
  for (int k = 0; k < kJobs; ++k) {
    const std::string job = "job-" + std::to_string(k);
    if (four.OwnerOf(job).name != "podscope-coordinator-1") {
      EXPECT_EQ(three_left.OwnerOf(job).name, four.OwnerOf(job).name) << job;
    }
  }
}

TEST(ShardMapTest, OwnsAndPeers) {
  const ShardMap map = *ShardMap::Make(Members(3), "podscope-coordinator-1");
  EXPECT_TRUE(map.sharded());
  EXPECT_EQ(map.self().name, "podscope-coordinator-1");
  ASSERT_EQ(map.peers().size(), 2u);
  for (const ShardMember& p : map.peers()) EXPECT_NE(p.name, "podscope-coordinator-1");
  for (int k = 0; k < 100; ++k) {
    const std::string job = "j" + std::to_string(k);
    EXPECT_EQ(map.Owns(job), map.OwnerOf(job).name == "podscope-coordinator-1");
  }
  const ShardMap single = ShardMap::Single();
  EXPECT_FALSE(single.sharded());
  EXPECT_TRUE(single.Owns("anything"));
}

TEST(ShardMapTest, IdTagsAreShortStableAndDistinct) {
  // Ids end with "-TAG": a StatefulSet pod's name can be 60 characters, an id at most 64.
  std::set<std::string> tags;
  for (int i = 0; i < 1000; ++i) {
    const std::string tag =
        ShardTag("a-long-helm-release-name-podscope-coordinator-" + std::to_string(i));
    EXPECT_EQ(tag.size(), 8u);
    EXPECT_EQ(tag.find_first_not_of("0123456789abcdef"), std::string::npos) << tag;
    tags.insert(tag);
  }
  EXPECT_EQ(tags.size(), 1000u);
  EXPECT_EQ(ShardTag("c0"), ShardTag(std::string("c0")));
}

TEST(ShardMapTest, AnIdNamesTheMemberThatMadeItByItsTag) {
  const ShardMap map = *ShardMap::Make(Members(3), "podscope-coordinator-0");
  for (const ShardMember& m : map.members()) {
    const ShardMember* maker = map.MakerOf("cap-1795814950193-7-" + ShardTag(m.name));
    ASSERT_NE(maker, nullptr) << m.name;
    EXPECT_EQ(maker->name, m.name);
  }
  // No member's tag, no dash before it, a tag alone, or nothing: no maker.
  for (const std::string& id : std::vector<std::string>{
           "my-import", "cap-1-2-00000000", "cap" + ShardTag("podscope-coordinator-1"),
           "-" + ShardTag("podscope-coordinator-1").substr(1), std::string()}) {
    EXPECT_EQ(map.MakerOf(id), nullptr) << id;
  }
  EXPECT_EQ(ShardMap::Single().MakerOf("cap-1-2-" + ShardTag("self")), nullptr);
}

TEST(ShardMapTest, BadMembersAreRefusedNamingTheProblem) {
  auto refused = [](std::vector<ShardMember> members, const std::string& self) {
    absl::StatusOr<ShardMap> map = ShardMap::Make(std::move(members), self);
    return map.ok() ? std::string("accepted") : std::string(map.status().message());
  };
  EXPECT_NE(refused({}, "x").find("no members"), std::string::npos);
  EXPECT_NE(refused(Members(3), "podscope-coordinator-9").find("is not among the members"),
            std::string::npos);
  std::vector<ShardMember> twice = Members(2);
  twice[1].name = twice[0].name;
  EXPECT_NE(refused(twice, twice[0].name).find("listed twice"), std::string::npos);
  std::vector<ShardMember> bad_url = Members(2);
  bad_url[1].rest = "ftp://x:1";
  EXPECT_NE(refused(bad_url, bad_url[0].name).find("rest \"ftp://x:1\""), std::string::npos);
  std::vector<ShardMember> bad_grpc = Members(2);
  bad_grpc[1].grpc = "shard-1";
  EXPECT_NE(refused(bad_grpc, bad_grpc[0].name).find("grpc \"shard-1\""), std::string::npos);
  std::vector<ShardMember> bad_name = Members(2);
  bad_name[1].name = "a b";
  EXPECT_NE(refused(bad_name, bad_name[0].name).find("member name \"a b\""), std::string::npos);
}

TEST(ShardMapTest, TheMembersFileIsCheckedKeyByKey) {
  EXPECT_TRUE(
      ParseShardMembers(R"({"members": [{"name": "a", "rest": "http://a:1", "grpc": "a:2"}]})", "f")
          .ok());
  for (const auto& [text, want] : std::vector<std::pair<std::string, std::string>>{
           {R"({"member": []})", "member"},
           {R"({"members": [{"name": "a", "rest": "http://a:1", "grpc": "a:2", "port": 3}]})",
            "port"},
           {R"({"members": {}})", "not a list"},
           {R"({"members": [1]})", "not a member"},
           {R"({"members": [{"name": 7}]})", "name"},
           {"not json", "not valid JSON"}}) {
    absl::StatusOr<std::vector<ShardMember>> members = ParseShardMembers(text, "shards.json");
    ASSERT_FALSE(members.ok()) << text;
    EXPECT_NE(std::string(members.status().message()).find(want), std::string::npos)
        << members.status();
    EXPECT_NE(std::string(members.status().message()).find("shards.json"), std::string::npos)
        << members.status();
  }
}

TEST(ShardMembershipTest, ReloadTakesAChangeTellsListenersAndKeepsTheLastGoodMembers) {
  testing::ScratchDir dir;
  const auto write = [&](int n) {
    std::string json = "{\"members\": [";
    for (const ShardMember& m : Members(n)) {
      json += (json.back() == '[' ? "" : ",") + std::string("{\"name\":\"") + m.name +
              "\",\"rest\":\"" + m.rest + "\",\"grpc\":\"" + m.grpc + "\"}";
    }
    return dir.Write("members.json", json + "]}");
  };
  const std::string file = write(2);
  absl::StatusOr<std::unique_ptr<ShardMembership>> membership =
      ShardMembership::Open({.self = "podscope-coordinator-0", .members_file = file});
  ASSERT_TRUE(membership.ok()) << membership.status();
  std::vector<std::pair<size_t, size_t>> changes;
  (*membership)->OnChange([&](const ShardMap& before, const ShardMap& after) {
    changes.emplace_back(before.members().size(), after.members().size());
  });
  EXPECT_EQ(*(*membership)->Reload(), false);  // the same members: nothing to tell
  write(3);
  EXPECT_EQ(*(*membership)->Reload(), true);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0], std::make_pair(size_t{2}, size_t{3}));
  dir.Write("members.json", "{\"members\": [");  // half-written
  EXPECT_FALSE((*membership)->Reload().ok());
  EXPECT_EQ((*membership)->current()->members().size(), 3u);
  std::filesystem::remove(file);
  EXPECT_FALSE((*membership)->Reload().ok());
  EXPECT_EQ((*membership)->current()->members().size(), 3u);
  EXPECT_EQ(changes.size(), 1u);
  // A file without this replica is refused at start.
  write(1);
  EXPECT_FALSE(
      ShardMembership::Open({.self = "podscope-coordinator-5", .members_file = file}).ok());
  EXPECT_FALSE(ShardMembership::Open({.self = "", .members_file = file}).ok());
}

}  // namespace
}  // namespace podscope::coordinator
