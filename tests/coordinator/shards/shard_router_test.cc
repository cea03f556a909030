#include "coordinator/shards/shard_router.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <string>
#include <vector>

#include "common/time_source.h"
#include "tests/test_paths.h"

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
  http::HttpRequest r;
  r.path = "/v1/captures/cap 1/steps";
  r.query = {{"window", "hta"}, {"ranks", "0-3,7"}};
  EXPECT_EQ(RequestTarget(r), "/v1/captures/cap%201/steps?ranks=0-3%2C7&window=hta");
  r.path = "/v1/captures/x:cancel";
  r.query = {};
  EXPECT_EQ(RequestTarget(r), "/v1/captures/x:cancel");
}

// A peer that never answers (it listens and never accepts: connections open, nothing comes):
// its lookups end at lookup_timeout_ms, and after one has failed the peer is not called again
// for peer_retry_after_ms of the router's clock.
TEST(ShardRouterTest, APeerThatFailedToAnswerIsNotAskedAgainForAWhile) {
  const int hung = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(bind(hung, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(hung, 16), 0);
  getsockname(hung, reinterpret_cast<sockaddr*>(&address), &length);
  testing::ScratchDir dir;
  const std::string members =
      dir.Write("members.json",
                R"({"members": [{"name": "a", "rest": "http://127.0.0.1:1", "grpc": "127.0.0.1:2"},
        {"name": "b", "rest": "http://127.0.0.1:)" +
                    std::to_string(ntohs(address.sin_port)) + R"(", "grpc": "127.0.0.1:3"}]})");
  absl::StatusOr<std::unique_ptr<ShardMembership>> membership =
      ShardMembership::Open({.self = "a",
                             .members_file = members,
                             .lookup_timeout_ms = 200,
                             .peer_retry_after_ms = 5'000});
  ASSERT_TRUE(membership.ok()) << membership.status();
  common::SimulatedTimeSource time(1'000'000'000);
  ShardRouter router(**membership, "", time);
  const ShardMember b = (*membership)->current()->peers().at(0);
  const http::HttpRequest request;

  absl::StatusOr<http::HttpClientResponse> first =
      router.Call(b, "GET", "/v1/captures/x", request, "", ShardRouter::CallKind::kLookup);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), absl::StatusCode::kDeadlineExceeded) << first.status();
  // Within the 5 s: refused without a call, saying why and for how long.
  time.AdvanceBy(1'000'000'000);
  absl::StatusOr<http::HttpClientResponse> quiet =
      router.Call(b, "GET", "/v1/captures/x", request, "", ShardRouter::CallKind::kLookup);
  ASSERT_FALSE(quiet.ok());
  EXPECT_EQ(quiet.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(quiet.status().message().find("did not answer lately"), std::string::npos)
      << quiet.status();
  EXPECT_NE(quiet.status().message().find("not asked again for 4000 ms"), std::string::npos)
      << quiet.status();
  std::string metrics;
  router.AppendMetrics(&metrics);
  EXPECT_NE(metrics.find("podscope_shard_peer_calls_refused_total{reason=\"quiet\"} 1\n"),
            std::string::npos)
      << metrics;
  // After it, asked again (and it still does not answer).
  time.AdvanceBy(4'000'000'001);
  absl::StatusOr<http::HttpClientResponse> again =
      router.Call(b, "GET", "/v1/captures/x", request, "", ShardRouter::CallKind::kLookup);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kDeadlineExceeded) << again.status();
  close(hung);
}

}  // namespace
}  // namespace podscope::coordinator
