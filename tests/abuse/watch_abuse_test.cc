// Watching against the real coordinator and raw agent sessions: what agents' data makes the
// coordinator keep has bounds, and jobs that end give their place to the jobs that run.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/parse_number.h"
#include "common/protocol_version.h"
#include "common/watch_wire.h"
#include "tests/integration/live_cluster_fixture.h"
#include "tests/integration/raw_client.h"
#include "tests/wait_for.h"

namespace podscope::testing {
namespace {

using Clock = std::chrono::steady_clock;

class WatchAbuseTest : public LiveClusterTest {
 protected:
  // A raw agent session serving ranks 0..ranks-1 of each of `jobs`, with one clock sample taken.
  std::unique_ptr<RawAgentSession> Feeder(const std::string& id,
                                          const std::vector<std::string>& jobs, int ranks = 1) {
    std::unique_ptr<RawAgentSession> session = OpenRawAgentSession(id);
    v1::AgentMessage hello;
    v1::AgentHello* h = hello.mutable_hello();
    h->set_protocol_major(common::kAgentProtocolMajor);
    h->set_agent_id(id);
    h->set_instance_id("i1");
    for (const std::string& job : jobs) {
      for (int rank = 0; rank < ranks; ++rank) {
        v1::WorkerDescriptor* w = h->add_workers();
        w->set_job(job);
        w->set_rank(rank);
      }
    }
    EXPECT_TRUE(session->stream->Write(hello));
    v1::CoordinatorMessage welcome;
    EXPECT_TRUE(session->stream->Read(&welcome));
    v1::AgentMessage clock;
    v1::ClockSample* sample = clock.mutable_clock()->add_samples();
    sample->set_t1_ns(UnixNowNs());
    sample->set_t2_ns(sample->t1_ns() + 100'000);
    sample->set_t3_ns(sample->t1_ns() + 110'000);
    sample->set_t4_ns(sample->t1_ns() + 210'000);
    EXPECT_TRUE(session->stream->Write(clock));
    return session;
  }
  // Steps 1..`steps` of rank 0 of each job, as one watch batch of agent `id`.
  grpc::Status SendSteps(RawAgentSession& session, const std::string& id,
                         const std::vector<std::string>& jobs, int steps) {
    common::WatchBatchBuilder builder;
    const int64_t now = UnixNowNs();
    for (const std::string& job : jobs) {
      for (int step = 1; step <= steps; ++step) {
        common::StepSummary s;
        s.rank = 0;
        s.step = step;
        s.start_ns = now - (steps - step + 1) * 100'000'000;
        s.end_ns = s.start_ns + 90'000'000;
        builder.Add(job, s);
      }
    }
    v1::WatchBatch batch = builder.Take();
    batch.set_agent_id(id);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::WatchAck ack;
    std::unique_ptr<grpc::ClientWriter<v1::WatchBatch>> writer =
        session.stub->Watch(&context, &ack);
    writer->Write(batch);
    writer->WritesDone();
    return writer->Finish();
  }
  // Until `n` agents are connected with a clock model, on one page of up to 10,000 workers
  // (the fixture's WaitForAgents reads the first page, 1,000 workers).
  void WaitForFeeders(size_t n) {
    EXPECT_TRUE(WaitFor([&] {
      const HttpResult r = HttpCall(http_port_, "GET", "/v1/workers?limit=10000");
      if (r.status != 200) return false;
      size_t synced = 0;
      for (simdjson::dom::element a : Json(r.body)["agents"].get_array()) {
        if (a["health"].get_string().value() != "disconnected" && !a["clock"].is_null()) ++synced;
      }
      return synced == n;
    })) << HttpCall(http_port_, "GET", "/v1/workers?limit=10000").body.substr(0, 2000);
  }
  int64_t MetricValue(const std::string& sample) {
    const absl::StatusOr<int64_t> n = common::ParseInt(Metric(http_port_, sample));
    return n.ok() ? *n : -1;
  }
};

// Jobs were never forgotten: once 1,024 job names had been seen (ordinary churn on a long-running
// coordinator), every new job's data was refused until a restart and it got no alert. Now a job
// with no data for forget_quiet_jobs_after_s is forgotten and the next job takes its place.
TEST_F(WatchAbuseTest, NewJobsAreWatchedAfter1024DeadOnes) {
  // Raw sessions send no heartbeats: the default interval (5 s) keeps them connected meanwhile.
  config_ = dir_.Write("coordinator.json",
                       R"({"watch": {"max_jobs_per_agent": 256, "forget_quiet_jobs_after_s": 2}})");
  StartCoordinator();
  // The hang rule's threshold sets the floor of the quiet time (twice it): 1 s here.
  std::string rules = HttpCall(http_port_, "GET", "/v1/alerts/rules").body;
  const size_t hang = rules.find("\"hang_after_s\":");
  ASSERT_NE(hang, std::string::npos) << rules;
  rules.replace(hang, rules.find_first_of(",}", hang) - hang, "\"hang_after_s\":1");
  ASSERT_EQ(HttpCall(http_port_, "PUT", "/v1/alerts/rules", rules, "application/json").status, 200);

  std::vector<std::unique_ptr<RawAgentSession>> feeders;
  std::vector<std::vector<std::string>> jobs(4);
  for (int a = 0; a < 4; ++a) {
    for (int i = 0; i < 256; ++i) jobs[a].push_back("dead-" + std::to_string(a * 256 + i));
    feeders.push_back(Feeder("feeder-" + std::to_string(a), jobs[a]));
  }
  WaitForFeeders(4);
  const auto fed = Clock::now();
  for (int a = 0; a < 4; ++a) {
    const grpc::Status s = SendSteps(*feeders[a], "feeder-" + std::to_string(a), jobs[a], 1);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  // Every slot taken: the next job is refused, and counted.
  std::unique_ptr<RawAgentSession> late = Feeder("late", {"alive"});
  WaitForFeeders(5);
  ASSERT_TRUE(SendSteps(*late, "late", {"alive"}, 3).ok());
  EXPECT_GE(MetricValue("podscope_watch_refused_jobs_total"), 1);
  EXPECT_EQ(HttpCall(http_port_, "GET", "/v1/watch/jobs/alive").status, 404);
  // The dead jobs go once quiet for 2 s; the new job is watched.
  ASSERT_TRUE(WaitFor([&] { return MetricValue("podscope_watch_forgotten_jobs_total") >= 1024; },
                      std::chrono::seconds(60)))
      << Metric(http_port_, "podscope_watch_forgotten_jobs_total");
  const double forgotten_after = std::chrono::duration<double>(Clock::now() - fed).count();
  ASSERT_TRUE(SendSteps(*late, "late", {"alive"}, 3).ok());
  EXPECT_TRUE(WaitFor([&] {
    return HttpCall(http_port_, "GET", "/v1/watch/jobs/alive").status == 200;
  })) << HttpCall(http_port_, "GET", "/v1/watch/jobs/alive").body;
  std::printf(
      "[ watch ] 1,024 dead jobs forgotten %.1f s after their last data (quiet time 2 s); "
      "the next job watched\n",
      forgotten_after);
  EXPECT_NE(coordinator_->Log().find("watch: job dead-0 forgotten after 2 s without data"),
            std::string::npos);
}

// A hostile agent with a valid certificate once grew the coordinator by 11.7 MB a job, without
// bound and for good: collectives that claim 65,536 ranks, in a step that never settles (it ends
// an hour from now), wait for ranks that never come. Two such agents, 16 jobs each, at bounds of
// 16 MiB a job, 48 MiB an agent and 128 MiB in all: the coordinator keeps what the bounds allow,
// and a job that comes afterwards from another agent is watched all the same.
TEST_F(WatchAbuseTest, AHostileWatchStreamGrowsTheCoordinatorOnlyToItsBounds) {
  config_ = dir_.Write("coordinator.json", R"({"watch": {"max_job_bytes": 16777216,
      "max_agent_bytes": 50331648, "max_total_bytes": 134217728}})");
  StartCoordinator();
  std::vector<std::unique_ptr<RawAgentSession>> hostile;
  std::vector<std::vector<std::string>> jobs(2);
  for (int a = 0; a < 2; ++a) {
    for (int j = 0; j < 16; ++j)
      jobs[a].push_back("h" + std::to_string(a) + "-" + std::to_string(j));
    // Ranks 0-15 of its 16 jobs: 256 workers, the most an agent serves.
    hostile.push_back(Feeder("hostile-" + std::to_string(a), jobs[a], 16));
  }
  WaitForAgents(2);
  const uint64_t rss_before = StatusBytes(coordinator_->pid(), "VmRSS:");
  const int64_t in_an_hour = UnixNowNs() + int64_t{3600} * 1'000'000'000;
  int64_t sequence = 0;
  for (int a = 0; a < 2; ++a) {
    for (const std::string& job : jobs[a]) {
      common::WatchBatchBuilder builder;
      for (int32_t rank = 0; rank < 16; ++rank) {
        common::StepSummary s;
        s.rank = rank;
        s.step = 1;
        s.start_ns = in_an_hour;
        s.end_ns = in_an_hour + 1'000'000;
        for (int c = 0; c < 4'096; ++c) {
          common::CollectiveArrival arrival;
          arrival.communicator = 7;
          arrival.sequence = ++sequence;
          arrival.op = common::CollectiveOp::kAllReduce;
          arrival.nranks = 65'536;
          arrival.bytes = 1 << 20;
          arrival.enqueue_ns = arrival.start_ns = in_an_hour;
          arrival.end_ns = in_an_hour + 1'000;
          s.collectives.push_back(arrival);
        }
        builder.Add(job, s);
      }
      v1::WatchBatch batch = builder.Take();
      batch.set_agent_id("hostile-" + std::to_string(a));
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      v1::WatchAck ack;
      std::unique_ptr<grpc::ClientWriter<v1::WatchBatch>> writer =
          hostile[a]->stub->Watch(&context, &ack);
      writer->Write(batch);
      writer->WritesDone();
      const grpc::Status status = writer->Finish();
      ASSERT_TRUE(status.ok()) << status.error_message();
    }
  }
  const int64_t memory = MetricValue("podscope_watch_memory_bytes");
  const int64_t over = MetricValue("podscope_watch_over_memory_total");
  const uint64_t rss_after = StatusBytes(coordinator_->pid(), "VmRSS:");
  std::printf(
      "[ watch ] hostile stream, 2 agents x 16 jobs x 65,536 pending collectives: the "
      "watch keeps %.1f MiB (bounds 16 a job, 48 an agent, 128 in all), %lld records "
      "dropped; coordinator RSS %.1f -> %.1f MB\n",
      static_cast<double>(memory) / (1 << 20), static_cast<long long>(over),
      static_cast<double>(rss_before) / 1e6, static_cast<double>(rss_after) / 1e6);
  // Each agent past its 48 MiB adds nothing more (it may finish the batch it was in): two shares,
  // within the total.
  EXPECT_LE(memory, int64_t{128} << 20);
  EXPECT_GT(over, 0);
  // Real memory beside the estimate: the bounds and the allocator's slack, not 32 x 11.7 MB.
  EXPECT_LT(rss_after, rss_before + (uint64_t{256} << 20));
  // Another agent's job is watched while the hostile ones hold their shares.
  std::unique_ptr<RawAgentSession> honest = Feeder("honest", {"honest-job"});
  WaitForAgents(3);
  ASSERT_TRUE(SendSteps(*honest, "honest", {"honest-job"}, 3).ok());
  EXPECT_TRUE(WaitFor([&] {
    return HttpCall(http_port_, "GET", "/v1/watch/jobs/honest-job").status == 200;
  })) << HttpCall(http_port_, "GET", "/v1/watch/jobs/honest-job").body;
}

}  // namespace
}  // namespace podscope::testing
