#include "coordinator/shards/shard_router.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <string>
#include <vector>

namespace podscope::coordinator {
namespace {

boost::json::object Page(const std::vector<std::string>& ids, const std::string& next) {
  boost::json::array list;
  for (const std::string& id : ids) list.push_back(boost::json::object{{"id", id}});
  boost::json::object page{{"captures", std::move(list)}};
  page["next_after"] = next.empty() ? boost::json::value(nullptr) : boost::json::value(next);
  return page;
}

std::vector<std::string> Ids(const boost::json::array& merged) {
  std::vector<std::string> ids;
  for (const boost::json::value& v : merged) ids.emplace_back(v.at("id").as_string());
  return ids;
}

TEST(ShardRouterTest, GatheredPagesAreCompleteUpToTheSmallestCursorAndNoLongerThanTheLimit) {
  // Three replicas, each answering its first 3 ids: b stopped at b3 (it has more), c at c2 (no
  // more), a at a3 (no more). Everything up to b3 is known; past it, b's next page may hold more.
  std::vector<boost::json::object> answers = {
      Page({"a1", "a2", "a3"}, ""), Page({"b1", "b2", "b3"}, "b3"), Page({"c1", "c2"}, "")};
  boost::json::array merged;
  EXPECT_EQ(MergePage(answers, "captures", "id", "next_after", 100, &merged), "b3");
  EXPECT_EQ(Ids(merged), (std::vector<std::string>{"a1", "a2", "a3", "b1", "b2", "b3"}));

  // The limit cuts first: the cursor is the last id given.
  answers = {Page({"a1", "a2", "a3"}, ""), Page({"b1", "b2"}, ""), Page({"c1"}, "")};
  merged = {};
  EXPECT_EQ(MergePage(answers, "captures", "id", "next_after", 4, &merged), "b1");
  EXPECT_EQ(Ids(merged), (std::vector<std::string>{"a1", "a2", "a3", "b1"}));

  // Every replica at its end: no cursor.
  answers = {Page({"a1"}, ""), Page({}, ""), Page({"c1"}, "")};
  merged = {};
  EXPECT_EQ(MergePage(answers, "captures", "id", "next_after", 100, &merged), "");
  EXPECT_EQ(Ids(merged), (std::vector<std::string>{"a1", "c1"}));
}

TEST(ShardRouterTest, AnAgentListedByTwoReplicasIsListedOnceAsConnected) {
  const auto agents = [](const std::string& health) {
    return boost::json::object{{"agents", boost::json::array{boost::json::object{
                                              {"agent_id", "node-1"}, {"health", health}}}}};
  };
  std::vector<boost::json::object> answers = {agents("disconnected"), agents("healthy")};
  boost::json::array merged;
  EXPECT_EQ(MergePage(answers, "agents", "agent_id", "next", 100, &merged), "");
  ASSERT_EQ(merged.size(), 1u);
  EXPECT_EQ(merged[0].at("health").as_string(), "healthy");
}

TEST(ShardRouterTest, ARequestGoesOnWithItsPathAndQueryEncoded) {
  HttpRequest r;
  r.path = "/v1/captures/cap 1/steps";
  r.query = {{"window", "hta"}, {"ranks", "0-3,7"}};
  EXPECT_EQ(RequestTarget(r), "/v1/captures/cap%201/steps?ranks=0-3%2C7&window=hta");
  r.path = "/v1/captures/x:cancel";
  r.query = {};
  EXPECT_EQ(RequestTarget(r), "/v1/captures/x:cancel");
}

}  // namespace
}  // namespace podscope::coordinator
