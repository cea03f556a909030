// Coordinators sharded by job (docs/deploy.md), as deployed (HTTPS, mutual TLS, tokens):
// three coordinators on loopback with a shared members file, agents serving four jobs that all
// dial the first one (as they would a Kubernetes Service). Each job's captures land on its
// owner, any replica answers for any job and lists every capture, and scaling to four replicas
// moves only the jobs the new one owns, while a capture in flight finishes where it started.
#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/parse_number.h"
#include "coordinator/shards/shard_map.h"
#include "tests/integration/daemon.h"
#include "tests/integration/test_security.h"
#include "tests/test_paths.h"
#include "tests/wait_for.h"

namespace podscope::testing {
namespace {

using coordinator::ShardMap;
using coordinator::ShardMember;

// Polls `done` every 100 ms until it holds or `seconds` pass.
template <typename F>
bool Eventually(F done, int seconds = 60) {
  return testing::WaitFor(done, std::chrono::seconds(seconds), std::chrono::milliseconds(100));
}

class ShardTest : public ::testing::Test {
 protected:
  struct Shard {
    std::string name;
    int http = 0, grpc = 0;
    std::unique_ptr<Daemon> daemon;
  };

  void SetUp() override {
    for (int i = 0; i < 4; ++i)
      shards_.push_back({"c" + std::to_string(i), FreePort(), FreePort(), nullptr});
  }

  std::vector<ShardMember> Members(size_t n) const {
    std::vector<ShardMember> members;
    for (size_t i = 0; i < n; ++i) {
      members.push_back({shards_[i].name, "https://127.0.0.1:" + std::to_string(shards_[i].http),
                         "127.0.0.1:" + std::to_string(shards_[i].grpc)});
    }
    return members;
  }
  ShardMap Map(size_t n) const { return *ShardMap::Make(Members(n), "c0"); }
  int IndexOf(const std::string& name) const { return name[1] - '0'; }

  // Written whole and renamed into place: a coordinator never reads half a file.
  void WriteMembers(size_t n, const std::string& forward = "proxy") {
    std::string json = "{\"members\": [";
    for (const ShardMember& m : Members(n)) {
      json += (json.back() == '[' ? "" : ",") + std::string("{\"name\":\"") + m.name +
              "\",\"rest\":\"" + m.rest + "\",\"grpc\":\"" + m.grpc + "\"}";
    }
    dir_.Write("members.json.new", json + "]}");
    std::filesystem::rename(dir_.File("members.json.new"), dir_.File("members.json"));
    forward_ = forward;
  }

  void StartShard(size_t i) {
    const std::string config = dir_.Write(
        shards_[i].name + ".json", R"({"shards": {"members_file": ")" + dir_.File("members.json") +
                                       R"(", "reload_interval_ms": 200, "forward": ")" + forward_ +
                                       R"("}, "agents": {"heartbeat_interval_ms": 300},
            "capture": {"capture_grace_ms": 4000, "upload_timeout_ms": 120000}})");
    // (peer_timeout_ms stays at its 30 s default: the test above relies on peers waiting that
    // long.)
    shards_[i].daemon =
        std::make_unique<Daemon>(CoordinatorBinary(),
                                 Concat({"--config", config, "--shard-name", shards_[i].name,
                                         "--data-dir", dir_.File("store-" + shards_[i].name),
                                         "--http", "127.0.0.1:" + std::to_string(shards_[i].http),
                                         "--grpc", "127.0.0.1:" + std::to_string(shards_[i].grpc)},
                                        TestSecurity::Get().CoordinatorFlags()),
                                 dir_.File(shards_[i].name + ".log"));
    ASSERT_EQ(shards_[i].daemon->WaitForPort(), shards_[i].http) << shards_[i].daemon->Log();
  }

  // An agent serving the 4 ranks of `job`, dialling c0 (the "Service").
  void StartAgent(const std::string& id, const std::string& job) {
    agents_.push_back(std::make_unique<Daemon>(
        AgentBinary(),
        Concat({"--coordinator", "127.0.0.1:" + std::to_string(shards_[0].grpc), "--agent-id", id,
                "--host", "host-" + id, "--simulate",
                "ranks=0-3,world=4,job=" + job + ",seed=5,profile=light"},
               TestSecurity::Get().AgentFlags(id)),
        dir_.File("agent-" + id + ".log")));
  }

  simdjson::dom::element Json(const std::string& body) {
    parsers_.push_back(std::make_unique<simdjson::dom::parser>());
    simdjson::dom::element e;
    EXPECT_EQ(parsers_.back()->parse(body).get(e), simdjson::SUCCESS) << body;
    return e;
  }

  // What shard i holds itself: a call marked as forwarded is never sent on.
  HttpResult Local(size_t i, const std::string& target) {
    return HttpCallWithToken(shards_[i].http, TestSecurity::Get().admin_token, "GET", target, "",
                             "", {{"X-Podscope-Shard-Forwarded", "test"}});
  }
  size_t LocalWorkers(size_t i, const std::string& job) {
    const HttpResult r = Local(i, "/v1/workers?job=" + job);
    if (r.status != 200) return 0;
    size_t n = 0;
    for (simdjson::dom::element w : Json(r.body)["workers"].get_array())
      n += std::string_view(w["health"]) != "disconnected";
    return n;
  }
  // Agents connected to replica i whose clock model it has.
  size_t LocalAgentsWithClocks(size_t i) {
    const HttpResult r = Local(i, "/v1/workers");
    if (r.status != 200) return 0;
    size_t n = 0;
    for (simdjson::dom::element a : Json(r.body)["agents"].get_array()) {
      n += std::string_view(a["health"]) != "disconnected" && !a["clock"].is_null();
    }
    return n;
  }
  std::set<std::string> LocalCaptureIds(size_t i) {
    std::set<std::string> ids;
    const HttpResult r = Local(i, "/v1/captures?limit=1000");
    if (r.status != 200) return ids;
    for (simdjson::dom::element c : Json(r.body)["captures"].get_array())
      ids.insert(std::string(std::string_view(c["id"])));
    return ids;
  }

  // Under a slowing sanitizer (PODSCOPE_TEST_TIME_SCALE > 1) the capture starts later, so that
  // seven daemons on two cores still hear of it and acknowledge before its start.
  std::string StartCapture(size_t via, const std::string& job, int duration_ms) {
    const int delay_ms = 1000 * (testing::TimeScale() - 1);
    const HttpResult r =
        HttpCall(shards_[via].http, "POST", "/v1/captures",
                 R"({"job":")" + job + R"(","duration_ms":)" + std::to_string(duration_ms) +
                     R"(,"delay_ms":)" + std::to_string(delay_ms) + "}",
                 "application/json");
    EXPECT_EQ(r.status, 202) << "via " << shards_[via].name << ": " << r.body;
    if (r.status != 202) return "";
    return std::string(std::string_view(Json(r.body)["id"]));
  }
  std::string StateVia(size_t via, const std::string& id) {
    const HttpResult r = HttpCall(shards_[via].http, "GET", "/v1/captures/" + id);
    if (r.status != 200) return "HTTP " + std::to_string(r.status);
    return std::string(std::string_view(Json(r.body)["state"]));
  }

  ScratchDir dir_;
  std::vector<Shard> shards_;
  std::vector<std::unique_ptr<Daemon>> agents_;
  std::vector<std::unique_ptr<simdjson::dom::parser>> parsers_;
  std::string forward_ = "proxy";
};

// Four job names whose owners among c0..c2 are not all one shard, at least one of which moves
// to c3 when it joins and at least one of which stays.
std::vector<std::string> PickJobs(const ShardMap& three, const ShardMap& four) {
  std::vector<std::string> jobs;
  std::set<std::string> owners;
  bool moves = false, stays = false;
  for (int k = 0; k < 1000 && jobs.size() < 4; ++k) {
    const std::string job = "train-" + std::to_string(k);
    const bool moved = four.OwnerOf(job).name != three.OwnerOf(job).name;
    // Fill in what is missing first, then anything.
    if (jobs.size() == 3 && (!moves || !stays || owners.size() < 2)) {
      if (!moves && !moved) continue;
      if (!stays && moved) continue;
      if (owners.size() < 2 && owners.count(three.OwnerOf(job).name)) continue;
    }
    jobs.push_back(job);
    owners.insert(three.OwnerOf(job).name);
    (moved ? moves : stays) = true;
  }
  return jobs;
}

TEST_F(ShardTest, EveryReplicaAnswersForEveryJobAndScalingOutMovesOnlyTheNewReplicasJobs) {
  const ShardMap three = Map(3), four = Map(4);
  const std::vector<std::string> jobs = PickJobs(three, four);
  ASSERT_EQ(jobs.size(), 4u);
  // Rendezvous hashing: a job either stays or moves to the new replica, never between old ones.
  for (int k = 0; k < 1000; ++k) {
    const std::string job = "any-" + std::to_string(k);
    const std::string before = three.OwnerOf(job).name, after = four.OwnerOf(job).name;
    EXPECT_TRUE(after == before || after == "c3") << job << ": " << before << " -> " << after;
  }

  WriteMembers(3);
  for (size_t i = 0; i < 3; ++i) ASSERT_NO_FATAL_FAILURE(StartShard(i));
  for (size_t k = 0; k < jobs.size(); ++k) StartAgent("node-" + std::to_string(k), jobs[k]);

  // Every agent dialled c0, heard who owns its job, and serves it on the owner alone.
  for (const std::string& job : jobs) {
    const size_t owner = IndexOf(three.OwnerOf(job).name);
    ASSERT_TRUE(Eventually([&] {
      for (size_t i = 0; i < 3; ++i) {
        if (LocalWorkers(i, job) != (i == owner ? 4u : 0u)) return false;
      }
      return true;
    })) << job
        << " is not served on its owner c" << owner
        << " alone: " << Local(owner, "/v1/workers").body;
  }
  // The gathered list, through any replica, holds every agent and worker once.
  {
    const HttpResult r = HttpCall(shards_[1].http, "GET", "/v1/workers");
    ASSERT_EQ(r.status, 200) << r.body;
    simdjson::dom::element doc = Json(r.body);
    EXPECT_EQ(int64_t(doc["connected_agents"]), 4) << r.body;
    EXPECT_EQ(doc["workers"].get_array().size(), 16u) << r.body;
    EXPECT_EQ(int64_t(doc["connected_workers"]), 16) << r.body;
    // An agent that dialled c0 and moved on is listed there as disconnected; gathered, it is
    // listed once, as connected where it is.
    for (simdjson::dom::element a : doc["agents"].get_array()) {
      EXPECT_NE(std::string_view(a["health"]), "disconnected") << r.body;
    }
    for (simdjson::dom::element w : doc["workers"].get_array()) {
      EXPECT_NE(std::string_view(w["health"]), "disconnected") << r.body;
    }
  }

  // A capture of each job, started through a replica that is not always its owner, lands on
  // its owner; its state is read through yet another replica.
  std::map<std::string, std::string> captured;  // id -> job
  for (size_t k = 0; k < jobs.size(); ++k) {
    const std::string id = StartCapture(k % 3, jobs[k], 500);
    ASSERT_FALSE(id.empty());
    const std::string owner = three.OwnerOf(jobs[k]).name;
    EXPECT_TRUE(id.ends_with("-" + coordinator::ShardTag(owner)))
        << id << " of " << jobs[k] << " was not made by its owner " << owner;
    EXPECT_TRUE(Eventually([&] { return StateVia((k + 1) % 3, id) == "complete"; }))
        << id << ": " << StateVia((k + 1) % 3, id);
    EXPECT_TRUE(LocalCaptureIds(IndexOf(owner)).count(id)) << id << " is not stored on " << owner;
    captured[id] = jobs[k];
  }
  for (size_t i = 0; i < 3; ++i) {
    const HttpResult r = HttpCall(shards_[i].http, "GET", "/v1/captures");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Json(r.body)["captures"].get_array().size(), 4u)
        << "through " << shards_[i].name << ": " << r.body;
    // A report of a capture another shard holds, through this one.
    const std::string id = captured.begin()->first;
    EXPECT_EQ(HttpCall(shards_[i].http, "GET", "/v1/captures/" + id + "/steps").status, 200);
  }

  // A long capture of a job that is about to move: it must finish where it started.
  std::string moving;
  for (const std::string& job : jobs) {
    if (four.OwnerOf(job).name == "c3") moving = job;
  }
  ASSERT_FALSE(moving.empty());
  const std::string old_owner = three.OwnerOf(moving).name;
  const std::string in_flight = StartCapture(0, moving, 4000);
  ASSERT_TRUE(Eventually([&] { return StateVia(0, in_flight) == "capturing"; }, 30))
      << StateVia(0, in_flight);

  // Scale out: the members file grows (every replica re-reads it), the new replica starts.
  WriteMembers(4);
  ASSERT_NO_FATAL_FAILURE(StartShard(3));
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NE(shards_[i].daemon->WaitForLog("shards: members are now (c0, c1, c2, c3)"), "");

  EXPECT_TRUE(Eventually([&] { return StateVia(3, in_flight) == "complete"; }))
      << "the capture in flight on " << old_owner << ": " << StateVia(3, in_flight);
  EXPECT_TRUE(LocalCaptureIds(IndexOf(old_owner)).count(in_flight));
  for (const std::string& job : jobs) {
    const size_t owner = IndexOf(four.OwnerOf(job).name);
    EXPECT_TRUE(Eventually([&] {
      for (size_t i = 0; i < 4; ++i) {
        if (LocalWorkers(i, job) != (i == owner ? 4u : 0u)) return false;
      }
      return true;
    })) << job
        << " is not served on its new owner c" << owner << " alone";
  }
  // Every job is served: a capture of each, through the new replica, lands on its owner (once
  // each owner has its agents' clocks: the moved agent's stream to c3 is new).
  std::map<size_t, size_t> agents_at;
  for (const std::string& job : jobs) ++agents_at[IndexOf(four.OwnerOf(job).name)];
  for (const auto& [owner, n] : agents_at) {
    EXPECT_TRUE(
        Eventually([&, owner = owner, n = n] { return LocalAgentsWithClocks(owner) == n; }, 60))
        << Local(owner, "/v1/workers").body;
  }
  for (const std::string& job : jobs) {
    const std::string id = StartCapture(3, job, 500);
    ASSERT_FALSE(id.empty());
    EXPECT_TRUE(id.ends_with("-" + coordinator::ShardTag(four.OwnerOf(job).name))) << id;
    EXPECT_TRUE(Eventually([&] { return StateVia(1, id) == "complete"; }))
        << id << ": " << StateVia(1, id);
  }
  for (size_t i = 0; i < 4; ++i) {
    const HttpResult r = HttpCall(shards_[i].http, "GET", "/v1/captures?limit=1000");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Json(r.body)["captures"].get_array().size(), 9u)
        << "through " << shards_[i].name << ": " << r.body;
  }
  // The agent of a job that stayed never left its owner: no stream to c3 was ever opened for it.
  for (size_t k = 0; k < jobs.size(); ++k) {
    if (four.OwnerOf(jobs[k]).name != "c3") {
      EXPECT_EQ(agents_[k]->Log().find("opening a control stream to shard c3"), std::string::npos)
          << jobs[k];
    }
  }
}

// A replica that stops answering holds up neither its peers' health checks (forwarded calls
// wait on their own pool) nor the jobs it owned: once it is taken out of the members, its
// agents give up on it and follow their jobs' new owners.
TEST_F(ShardTest, AReplicaThatGoesAwayHoldsUpNothingAndItsJobsMove) {
  const ShardMap three = Map(3);
  std::vector<ShardMember> without_c2 = Members(3);
  without_c2.pop_back();
  const ShardMap two = *ShardMap::Make(without_c2, "c0");
  std::string job;
  for (int k = 0; job.empty(); ++k) {
    if (three.OwnerOf("g-" + std::to_string(k)).name == "c2") job = "g-" + std::to_string(k);
  }
  WriteMembers(3);
  for (size_t i = 0; i < 3; ++i) ASSERT_NO_FATAL_FAILURE(StartShard(i));
  StartAgent("node-g", job);
  ASSERT_TRUE(Eventually([&] { return LocalWorkers(2, job) == 4; }))
      << Local(2, "/v1/workers").body;

  // c2 hangs: connections to it open, and nothing answers.
  shards_[2].daemon->Signal(SIGSTOP);
  std::vector<std::thread> gathers;
  std::atomic<int> gathered{0};
  for (int i = 0; i < 6; ++i) {
    gathers.emplace_back([&] {
      HttpCall(shards_[0].http, "GET", "/v1/workers");
      ++gathered;
    });
  }
  // While six gathers wait on c2 (more than c0 has I/O threads), c0 still answers its health
  // check, and well before the peer timeout lets the gathers go.
  const HttpResult health = HttpCall(shards_[0].http, "GET", "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_LT(gathered.load(), 6) << "the health check was answered only after the gathers gave up";

  // Taken out: c0 and c1 re-read the members, the agent gives up on c2 and asks again.
  WriteMembers(2);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_NE(shards_[i].daemon->WaitForLog("shards: members are now (c0, c1)"), "");
  shards_[2].daemon->Kill();
  for (std::thread& t : gathers) t.join();
  const size_t owner = IndexOf(two.OwnerOf(job).name);
  EXPECT_TRUE(Eventually([&] { return LocalWorkers(owner, job) == 4; }, 90))
      << job << " never reached its new owner c" << owner << ": " << agents_[0]->Log();
  // Its workers are registered with the new owner before its clock is: a capture needs both.
  EXPECT_TRUE(Eventually([&] { return LocalAgentsWithClocks(owner) == 1; }, 60))
      << Local(owner, "/v1/workers").body;
  const std::string id = StartCapture(1 - owner, job, 300);
  ASSERT_FALSE(id.empty());
  EXPECT_TRUE(Eventually([&] { return StateVia(1 - owner, id) == "complete"; }))
      << HttpCall(shards_[1 - owner].http, "GET", "/v1/captures/" + id).body << "\n"
      << agents_[0]->Log();
}

// One hung replica (SIGSTOP) stalls no healthy one. The healthy replica answers what it can
// itself on its I/O threads while 16 reads of unknown capture ids wait on peers; an unknown id
// made by itself is a 404 at once and one made by the healthy peer asks that peer only; the
// hung peer gets at most shards.max_calls_per_peer calls at once, and after it fails to answer
// its calls fail at once for shards.peer_retry_after_ms. The latencies are printed.
TEST_F(ShardTest, AHungReplicaStallsNoHealthyOne) {
  const ShardMap three = Map(3);
  std::string job;
  for (int k = 0; job.empty(); ++k) {
    if (three.OwnerOf("h-" + std::to_string(k)).name == "c0") job = "h-" + std::to_string(k);
  }
  WriteMembers(3);
  for (size_t i = 0; i < 3; ++i) ASSERT_NO_FATAL_FAILURE(StartShard(i));
  StartAgent("node-h", job);
  ASSERT_TRUE(Eventually([&] { return LocalWorkers(0, job) == 4; }))
      << Local(0, "/v1/workers").body;
  ASSERT_TRUE(Eventually(
      [&] { return HttpCall(shards_[0].http, "GET", "/v1/watch/jobs/" + job).status == 200; }));

  shards_[2].daemon->Signal(SIGSTOP);
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  // 8 ids made by the hung c2, 8 with no shard's tag (every peer may hold them).
  std::vector<std::string> unknown;
  for (int i = 0; i < 8; ++i) {
    unknown.push_back("cap-1-" + std::to_string(i) + "-" + coordinator::ShardTag("c2"));
    unknown.push_back("imported-" + std::to_string(i));
  }
  std::vector<HttpResult> answers(unknown.size());
  std::vector<double> unknown_ms(unknown.size());
  std::vector<std::thread> readers;
  for (size_t i = 0; i < unknown.size(); ++i) {
    readers.emplace_back([&, i] {
      const auto start = Clock::now();
      answers[i] = HttpCall(shards_[0].http, "GET", "/v1/captures/" + unknown[i]);
      unknown_ms[i] = ms_since(start);
    });
  }
  std::vector<double> local_ms;
  for (int i = 0; i < 10; ++i) {
    const auto start = Clock::now();
    EXPECT_EQ(HttpCall(shards_[0].http, "GET", "/v1/watch/jobs/" + job).status, 200);
    local_ms.push_back(ms_since(start));
  }
  auto start = Clock::now();
  const HttpResult mine =
      HttpCall(shards_[0].http, "GET", "/v1/captures/cap-9-" + coordinator::ShardTag("c0"));
  const double mine_ms = ms_since(start);
  start = Clock::now();
  const HttpResult peers =
      HttpCall(shards_[0].http, "GET", "/v1/captures/cap-9-" + coordinator::ShardTag("c1"));
  const double peers_ms = ms_since(start);
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(mine.status, 404) << mine.body;
  EXPECT_EQ(peers.status, 404) << peers.body;
  for (size_t i = 0; i < unknown.size(); ++i) {
    EXPECT_EQ(answers[i].status, 503) << unknown[i] << ": " << answers[i].body;
    EXPECT_NE(answers[i].body.find("c2 ("), std::string::npos) << answers[i].body;
  }
  const std::string metrics = HttpCall(shards_[0].http, "GET", "/metrics").body;
  auto refused = [&](const std::string& reason) {
    const std::string sample =
        "podscope_shard_peer_calls_refused_total{reason=\"" + reason + "\"} ";
    const size_t at = metrics.find(sample);
    return at == std::string::npos
               ? -1
               : common::ParseInt(metrics.substr(at + sample.size(),
                                                 metrics.find('\n', at) - at - sample.size()))
                     .value_or(-1);
  };
  // More than 4 calls were wanted of c2 at once, and later ones came after it had failed.
  EXPECT_GT(refused("busy") + refused("quiet"), 0) << metrics;
  std::sort(local_ms.begin(), local_ms.end());
  std::sort(unknown_ms.begin(), unknown_ms.end());
  std::printf(
      "[ abuse ] a hung replica: its own job's watch answer p50 %.1f ms max %.1f ms while 16 "
      "reads of unknown ids took %.0f-%.0f ms (503); an unknown id made here %.1f ms, made by "
      "the healthy peer %.1f ms (404); refused at once: %lld busy, %lld quiet\n",
      local_ms[local_ms.size() / 2], local_ms.back(), unknown_ms.front(), unknown_ms.back(),
      mine_ms, peers_ms, static_cast<long long>(refused("busy")),
      static_cast<long long>(refused("quiet")));
  std::fflush(stdout);
  shards_[2].daemon->Kill();
}

// Redirect mode: a replica answers a call about another's job with a 307 to the owner, which
// the CLI follows (with its token, over HTTPS).
TEST_F(ShardTest, RedirectModeSendsTheClientToTheOwnerAndTheCliFollows) {
  WriteMembers(3, "redirect");
  for (size_t i = 0; i < 3; ++i) ASSERT_NO_FATAL_FAILURE(StartShard(i));
  const ShardMap three = Map(3);
  std::string job;
  for (int k = 0; job.empty(); ++k) {
    if (three.OwnerOf("r-" + std::to_string(k)).name == "c2") job = "r-" + std::to_string(k);
  }
  StartAgent("node-r", job);
  ASSERT_TRUE(Eventually([&] { return LocalWorkers(2, job) == 4; }))
      << Local(2, "/v1/workers").body;
  // A capture asked before the agent's stream to the owner has settled (its clock known there)
  // fails with "did not acknowledge": seen once under ASan in CI.
  ASSERT_TRUE(Eventually([&] { return LocalAgentsWithClocks(2) == 1; }, 60))
      << Local(2, "/v1/workers").body;

  const HttpResult redirect =
      HttpCall(shards_[0].http, "POST", "/v1/captures",
               R"({"job":")" + job + R"(","duration_ms":300})", "application/json");
  EXPECT_EQ(redirect.status, 307) << redirect.body;
  EXPECT_EQ(redirect.headers.at("location"),
            "https://127.0.0.1:" + std::to_string(shards_[2].http) + "/v1/captures");

  std::string output;
  FILE* cli =
      popen((CliEnv(shards_[0].http) + " " + CliBinary() + " " + CliServerFlags(shards_[0].http) +
             " capture --job " + job + " --duration 300ms --wait 2>&1")
                .c_str(),
            "r");
  ASSERT_NE(cli, nullptr);
  char buffer[4096];
  while (const size_t n = fread(buffer, 1, sizeof(buffer), cli)) output.append(buffer, n);
  EXPECT_EQ(pclose(cli), 0) << output;
  EXPECT_NE(output.find("-" + coordinator::ShardTag("c2") + ": job " + job), std::string::npos)
      << output;
  EXPECT_NE(output.find("complete"), std::string::npos) << output;
}

}  // namespace
}  // namespace podscope::testing
