// The real-collector path end to end on a machine without a GPU: podscope-coordinator, a real
// podscope-agent serving probes on a unix socket, and two training processes that load
// libpodscope_probe.so as NCCL does (tests/integration/fake_training.cc). A capture through REST
// must find both ranks, their steps and their collectives, with nothing dropped.
#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>

#include <chrono>
#include <set>
#include <thread>

#include "common/parse_number.h"
#include "tests/integration/daemon.h"
#include "tests/integration/test_security.h"
#include "tests/sanitizers.h"
#include "tests/test_paths.h"
#include "tests/wait_for.h"

namespace podscope::testing {
namespace {

class ProbeCaptureTest : public ::testing::Test {
 protected:
  simdjson::dom::element Json(const std::string& body) {
    documents_.push_back(std::make_unique<simdjson::dom::parser>());
    simdjson::dom::element e;
    EXPECT_EQ(documents_.back()->parse(body).get(e), simdjson::SUCCESS) << body;
    return e;
  }

  ScratchDir dir_;
  std::vector<std::unique_ptr<simdjson::dom::parser>> documents_;
};

TEST_F(ProbeCaptureTest, TwoProbedProcessesCapturedThroughTheRealDaemons) {
  const std::string config =
      dir_.Write("coordinator.json", R"({"agents": {"heartbeat_interval_ms": 300}})");
  Daemon coordinator(CoordinatorBinary(),
                     Concat({"--config", config, "--data-dir", dir_.File("store"), "--http",
                             "127.0.0.1:0", "--grpc", "127.0.0.1:0"},
                            TestSecurity::Get().CoordinatorFlags()),
                     dir_.File("coordinator.log"));
  const std::string grpc = coordinator.WaitForLog("agents on grpc://[^:]+:([0-9]+)");
  ASSERT_FALSE(grpc.empty()) << coordinator.Log();
  const int http = coordinator.WaitForPort();
  ASSERT_GT(http, 0);

  const std::string socket = dir_.File("run/agent.sock");
  // What the probes record goes up five times a second while the window runs.
  const std::string agent_config = dir_.Write("agent.json", R"({"stream_interval_ms": 200})");
  Daemon agent(AgentBinary(),
               Concat({"--coordinator", "127.0.0.1:" + grpc, "--agent-id", "node-a", "--host",
                       "node-a", "--probe-socket", socket, "--config", agent_config},
                      TestSecurity::Get().AgentFlags("node-a")),
               dir_.File("agent.log"));
  ASSERT_FALSE(agent.WaitForLog("(serving) 0 workers").empty()) << agent.Log();

  // Rank 0's NCCL reads the plugin's v6 table (NCCL 2.29+, copy-engine collectives included),
  // rank 1's the v5 table, as an older NCCL would.
  std::vector<std::unique_ptr<Daemon>> training;
  for (int rank = 0; rank < 2; ++rank) {
    training.push_back(std::make_unique<Daemon>(
        FakeTrainingBinary(),
        std::vector<std::string>{ProbeLibrary(), socket, std::to_string(rank), "2", "fake-job",
                                 "30", rank == 0 ? "nccl=v6" : "nccl=v5"},
        dir_.File("rank" + std::to_string(rank) + ".log")));
  }
  // Both processes register and the coordinator hears of them, and has the agent's clock (a
  // capture asked before the agent's first clock burst arrives cannot be scheduled).
  const bool registered = testing::WaitFor([&] {
    const HttpResult r = HttpCall(http, "GET", "/v1/workers");
    if (r.status != 200 || r.body.find("\"job\":\"fake-job\"") == std::string::npos) return false;
    simdjson::dom::element doc = Json(r.body);
    size_t synced = 0;
    for (simdjson::dom::element a : doc["agents"].get_array()) synced += !a["clock"].is_null();
    return doc["workers"].get_array().size() == 2 && synced == 1;
  });
  ASSERT_TRUE(registered) << HttpCall(http, "GET", "/v1/workers").body << agent.Log();

  const HttpResult created =
      HttpCall(http, "POST", "/v1/captures", R"({"job": "fake-job", "duration_ms": 1000})",
               "application/json");
  ASSERT_EQ(created.status, 202) << created.body;
  const std::string id(Json(created.body)["id"].get_string().value());
  std::string state;
  testing::WaitFor([&] {
    state = std::string(
        Json(HttpCall(http, "GET", "/v1/captures/" + id).body)["state"].get_string().value());
    return state == "complete" || state == "partial" || state == "failed";
  });
  ASSERT_EQ(state, "complete") << HttpCall(http, "GET", "/v1/captures/" + id).body << "\n"
                               << agent.Log();

  simdjson::dom::element capture = Json(HttpCall(http, "GET", "/v1/captures/" + id).body);
  std::set<int64_t> ranks;
  for (simdjson::dom::element w : capture["workers"].get_array()) {
    ranks.insert(w["rank"].get_int64().value());
    // Steps, their spans and two collectives per step, plus host samples.
    EXPECT_GT(w["events"].get_uint64().value(), 50u) << simdjson::to_string(w);
    EXPECT_EQ(w["dropped_events"].get_uint64().value(), 0u) << simdjson::to_string(w);
    EXPECT_EQ(w["dropped_reasons"].get_object().size(), 0u) << simdjson::to_string(w);
  }
  EXPECT_EQ(ranks, (std::set<int64_t>{0, 1}));
  // Each NCCL told the probe which table it read, and the probe told its agent: at registration,
  // or later when NCCL's init comes after it, which on a loaded machine can be after the capture.
  EXPECT_NE(agent.WaitForLog("rank 0 job 'fake-job' features (?:now )?\\[nccl-profiler-v6\\]"), "")
      << agent.Log();
  EXPECT_NE(agent.WaitForLog("rank 1 job 'fake-job' features (?:now )?\\[nccl-profiler-v5\\]"), "")
      << agent.Log();

  // Steps found on both ranks from the probe's markers. (Without a GPU there is no device time,
  // so no per-step breakdown: the breakdown measures steps on the device.)
  const HttpResult steps = HttpCall(http, "GET", "/v1/captures/" + id + "/steps");
  ASSERT_EQ(steps.status, 200) << steps.body;
  for (simdjson::dom::element w : Json(steps.body)["workers"].get_array()) {
    EXPECT_EQ(w["step_source"].get_string().value(), "markers") << simdjson::to_string(w);
  }
  // About 95 steps of ~10.5 ms per rank in the 1 s window (fewer on a loaded machine), each
  // exported as a ProfilerStep span.
  const HttpResult trace = HttpCall(http, "GET", "/v1/captures/" + id + "/trace");
  ASSERT_EQ(trace.status, 200);
  size_t step_spans = 0;
  for (size_t at = trace.body.find("ProfilerStep#"); at != std::string::npos;
       at = trace.body.find("ProfilerStep#", at + 1)) {
    ++step_spans;
  }
  EXPECT_GE(step_spans, 20u);
  EXPECT_LE(step_spans, 200u) << "no more than 1 s of 10 ms steps on two ranks";
  // The trace's time base is the window's start (within the millisecond left before it), not
  // its earliest event.
  const int64_t window_start = capture["window"]["start_ns"].get_int64().value();
  const int64_t base = Json(trace.body)["podscope"]["base_time_ns"].get_int64().value();
  EXPECT_LE(base, window_start - 1'000'000);
  EXPECT_GT(base, window_start - 2'000'000);
  // The AllReduces were matched across the two ranks by communicator and sequence number.
  const HttpResult comm = HttpCall(http, "GET", "/v1/captures/" + id + "/communication");
  ASSERT_EQ(comm.status, 200) << comm.body;
  EXPECT_NE(comm.body.find("AllReduce"), std::string::npos) << comm.body.substr(0, 2000);

  // SIGTERM stops an agent serving probes cleanly (its collector threads must not take the
  // signal), and the training processes carry on without it.
  EXPECT_EQ(agent.Terminate(), 0) << agent.Log();
  // A moment for a process the agent's exit would take down to go: not a timing assertion (a
  // dead one stays dead, so a later look would only see more of them).
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // not a timing assertion
  for (const auto& t : training)
    EXPECT_EQ(kill(t->pid(), 0), 0) << "a training process died with its agent";
}

}  // namespace
}  // namespace podscope::testing

namespace podscope::testing {
namespace {

// Watch mode through the real probe library: four probed processes synchronised
// at every AllReduce (fake_training's barrier), one real agent streaming watch data, the
// coordinator's detectors alerting. No capture is asked for: all of it comes from between
// windows.
class ProbeWatchTest : public ProbeCaptureTest {
 protected:
  void Start(const std::string& job, const std::vector<std::string>& options,
             const std::string& rules) {
    const std::string config =
        dir_.Write("coordinator.json", R"({"agents": {"heartbeat_interval_ms": 300}})");
    coordinator_ =
        std::make_unique<Daemon>(CoordinatorBinary(),
                                 Concat({"--config", config, "--data-dir", dir_.File("store"),
                                         "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"},
                                        TestSecurity::Get().CoordinatorFlags()),
                                 dir_.File("coordinator.log"));
    const std::string grpc = coordinator_->WaitForLog("agents on grpc://[^:]+:([0-9]+)");
    ASSERT_FALSE(grpc.empty()) << coordinator_->Log();
    http_ = coordinator_->WaitForPort();
    ASSERT_GT(http_, 0);
    const HttpResult put = HttpCall(http_, "PUT", "/v1/alerts/rules", rules, "application/json");
    ASSERT_EQ(put.status, 200) << put.body;
    const std::string socket = dir_.File("run/agent.sock");
    agent_ =
        std::make_unique<Daemon>(AgentBinary(),
                                 Concat({"--coordinator", "127.0.0.1:" + grpc, "--agent-id",
                                         "node-w", "--host", "node-w", "--probe-socket", socket},
                                        TestSecurity::Get().AgentFlags("node-w")),
                                 dir_.File("agent.log"));
    ASSERT_FALSE(agent_->WaitForLog("(serving) 0 workers").empty()) << agent_->Log();
    for (size_t rank = 0; rank < options.size(); ++rank) {
      training_.push_back(std::make_unique<Daemon>(
          FakeTrainingBinary(),
          std::vector<std::string>{ProbeLibrary(), socket, std::to_string(rank),
                                   std::to_string(options.size()), job, "60",
                                   "barrier=" + dir_.File("barrier") + "," + options[rank]},
          dir_.File("rank" + std::to_string(rank) + ".log")));
    }
  }

  // The alert of `kind` firing for `job`, polled until `deadline_ns` (Unix).
  std::optional<simdjson::dom::element> WaitForAlert(const std::string& job,
                                                     const std::string& kind, int64_t deadline_ns) {
    std::optional<simdjson::dom::element> found;
    testing::WaitFor(
        [&] {
          const HttpResult r = HttpCall(http_, "GET", "/v1/alerts?job=" + job + "&state=firing");
          if (r.status != 200) return false;
          for (simdjson::dom::element a : Json(r.body)["alerts"].get_array()) {
            if (a["kind"].get_string().value() == kind) found = a;
          }
          return found.has_value();
        },
        MillisUntil(deadline_ns), std::chrono::milliseconds(200));
    return found;
  }
  static std::chrono::milliseconds MillisUntil(int64_t deadline_ns) {
    return std::chrono::milliseconds(std::max<int64_t>(0, (deadline_ns - UnixNowNs()) / 1'000'000));
  }

  // Until every one of `ranks` has at least `steps` steps in the watch's window (20 at most).
  bool WaitForSteps(const std::string& job, size_t ranks, int64_t steps, int64_t deadline_ns) {
    return testing::WaitFor(
        [&] {
          const HttpResult r = HttpCall(http_, "GET", "/v1/watch/jobs/" + job);
          if (r.status != 200) return false;
          size_t ready = 0;
          for (simdjson::dom::element rank : Json(r.body)["ranks"].get_array()) {
            if (rank["steps"].get_int64().value() >= steps) ++ready;
          }
          return ready == ranks;
        },
        MillisUntil(deadline_ns), std::chrono::milliseconds(200));
  }

  int http_ = 0;
  std::unique_ptr<Daemon> coordinator_;
  std::unique_ptr<Daemon> agent_;
  std::vector<std::unique_ptr<Daemon>> training_;
};

TEST_F(ProbeWatchTest, AStragglingProbedProcessIsAlertedFromItsMarkedSteps) {
  // Rank 2's compute takes 40% longer from 15 s on; the others wait for it at every AllReduce.
  // Real processes whose "compute" is a sleep, on a two-core machine that CI also loads with
  // compilers and other suites: the scheduler alone makes one rank late again and again (1.3%
  // of step time in one CI run, over the default's 0.5% even without its worst step; 5.4% for
  // an ASan-built rank beside a TSan build, before any slowdown began). A 40% slowdown causes
  // about 25%. A user with hosts that noisy raises the bar the same way.
  const std::string rules =
      R"({"rules": [{"name": "straggler", "kind": "straggler", "capture_evidence": false,
                                          "min_share_of_step_time": 0.1}]})";
  Start("probe-straggler",
        {"compute-ms=20", "compute-ms=20", "compute-ms=20,slow=1.4,slow-after=15", "compute-ms=20"},
        rules);
  const int64_t started = UnixNowNs();
  ASSERT_TRUE(WaitForSteps("probe-straggler", 4, 20, started + 30'000'000'000))
      << HttpCall(http_, "GET", "/v1/watch/jobs/probe-straggler").body << agent_->Log();
  const HttpResult before = HttpCall(http_, "GET", "/v1/alerts?job=probe-straggler");
  // (Asked only while the job is still even; on a slow machine the window may fill later.)
  if (UnixNowNs() < started + 14'000'000'000) {
    EXPECT_EQ(before.body.find("\"kind\""), std::string::npos)
        << "nothing fires while the job is even: " << before.body;
  }

  std::optional<simdjson::dom::element> fired =
      WaitForAlert("probe-straggler", "straggler", started + 45'000'000'000);
  ASSERT_TRUE(fired.has_value()) << HttpCall(http_, "GET", "/v1/watch/jobs/probe-straggler").body
                                 << agent_->Log();
  ASSERT_EQ((*fired)["ranks"].get_array().size(), 1u) << simdjson::to_string(*fired);
  EXPECT_EQ((*fired)["ranks"].at(0).get_int64().value(), 2);
  EXPECT_EQ((*fired)["hosts"].at(0).get_string().value(), "node-w");
  // The watch view: every rank's steps came from its marks, rank 2 caused the delay.
  simdjson::dom::element job = Json(HttpCall(http_, "GET", "/v1/watch/jobs/probe-straggler").body);
  double rank2 = 0, others = 0;
  for (simdjson::dom::element r : job["ranks"].get_array()) {
    (r["rank"].get_int64().value() == 2 ? rank2 : others) +=
        r["caused_delay_ms"].get_double().value();
  }
  EXPECT_GT(rank2, others) << simdjson::to_string(job) << "\n" << simdjson::to_string(*fired);
}

// A one-GPU job: no collectives at all (NCCL never calls the plugin for one rank), only its step
// marks. The watch still has its steps, and a slowdown is a regression alert.
TEST_F(ProbeWatchTest, AOneRankJobWithoutCollectivesGetsStepsAndARegressionAlert) {
  const std::string rules =
      R"({"rules": [{"name": "regression", "kind": "regression", "capture_evidence": false}]})";
  Start("probe-single", {"collectives=0,compute-ms=20,slow=1.6,slow-after=12"}, rules);
  const int64_t started = UnixNowNs();
  ASSERT_TRUE(WaitForSteps("probe-single", 1, 20, started + 11'000'000'000))
      << HttpCall(http_, "GET", "/v1/watch/jobs/probe-single").body << agent_->Log();
  if (UnixNowNs() < started + 11'000'000'000) {
    EXPECT_EQ(HttpCall(http_, "GET", "/v1/alerts?job=probe-single").body.find("\"kind\""),
              std::string::npos)
        << "nothing fires while the steps are even";
  }
  std::optional<simdjson::dom::element> fired =
      WaitForAlert("probe-single", "regression", started + 45'000'000'000);
  ASSERT_TRUE(fired.has_value()) << HttpCall(http_, "GET", "/v1/watch/jobs/probe-single").body
                                 << HttpCall(http_, "GET", "/v1/alerts").body << agent_->Log();
  simdjson::dom::element job = Json(HttpCall(http_, "GET", "/v1/watch/jobs/probe-single").body);
  ASSERT_EQ(job["ranks"].get_array().size(), 1u) << simdjson::to_string(job);
  EXPECT_EQ(job["ranks"].at(0)["rank"].get_int64().value(), 0);
}

// A Python loop marks its steps with the module shipped with the probe (podscope_step.py), in a
// process that loads the probe as NCCL does only after its first marks: those do nothing, the
// later ones reach the watch.
TEST_F(ProbeWatchTest, APythonLoopMarksItsStepsWithTheModuleShippedWithTheProbe) {
  if (kSanitized) {
    // A sanitized probe loads only into a process whose sanitizer runtime came first, which the
    // system's Python is not: the plain suite runs this.
    GTEST_SKIP() << "the system's Python cannot load a sanitized probe";
  }
  Start("probe-python", {}, R"({"rules": []})");
  const std::string script = dir_.Write("train.py", R"(
import ctypes, os, sys, time
probe, socket, job, module_dir = sys.argv[1:5]
os.environ.update(NCCL_PROFILER_PLUGIN=probe, PODSCOPE_AGENT_SOCKET=socket,
                  PODSCOPE_PROBE_RECONNECT_MS="100", RANK="0", LOCAL_RANK="0", WORLD_SIZE="1",
                  PODSCOPE_JOB=job)
sys.path.insert(0, module_dir)
import podscope_step
for i in range(3):  # before the probe is loaded: nothing happens, nothing fails
    with podscope_step.step(i):
        pass
ctypes.CDLL(probe, mode=os.RTLD_LOCAL)  # as NCCL loads the plugin
print("python loop running", flush=True)
end = time.monotonic() + 60
i = 3
while time.monotonic() < end:
    with podscope_step.step(i):
        time.sleep(0.02)
    i += 1
)");
  training_.push_back(std::make_unique<Daemon>(
      "/usr/bin/python3",
      std::vector<std::string>{script, ProbeLibrary(), dir_.File("run/agent.sock"), "probe-python",
                               SourceDir() + "/agent/probe/python"},
      dir_.File("python.log")));
  const int64_t started = UnixNowNs();
  ASSERT_TRUE(WaitForSteps("probe-python", 1, 20, started + 30'000'000'000))
      << HttpCall(http_, "GET", "/v1/watch/jobs/probe-python").body << training_[0]->Log()
      << agent_->Log();
  simdjson::dom::element job = Json(HttpCall(http_, "GET", "/v1/watch/jobs/probe-python").body);
  EXPECT_EQ(job["ranks"].at(0)["rank"].get_int64().value(), 0) << simdjson::to_string(job);
}

// NVTX step ranges with no collectives and no CUPTI: the probe as NVTX's injection library turns
// them into step marks between windows, so a one-GPU job that marks steps only with NVTX is
// watched.
TEST_F(ProbeWatchTest, NvtxStepRangesBetweenWindowsAreWatchedWithoutCollectives) {
  Start("probe-nvtx", {"collectives=0,nvtx=1,compute-ms=10"}, R"({"rules": []})");
  const int64_t started = UnixNowNs();
  ASSERT_TRUE(WaitForSteps("probe-nvtx", 1, 20, started + 30'000'000'000))
      << HttpCall(http_, "GET", "/v1/watch/jobs/probe-nvtx").body << training_[0]->Log()
      << agent_->Log();
  EXPECT_NE(agent_->WaitForLog("job 'probe-nvtx' features (?:now )?\\[.*nvtx"), "")
      << agent_->Log();
}

TEST_F(ProbeWatchTest, StepsAreInferredWithoutMarksAndAHungProcessIsNamedWithItsCollective) {
  const std::string rules = R"({"rules": [{"name": "hang", "kind": "hang", "hang_after_s": 3}]})";
  Start("probe-hang", {"marks=0", "marks=0", "marks=0", "marks=0,hang-at=15"}, rules);
  const int64_t started = UnixNowNs();
  // Steps inferred from the AllReduces' period reach the watch before the hang.
  ASSERT_TRUE(WaitForSteps("probe-hang", 4, 20, started + 14'000'000'000))
      << HttpCall(http_, "GET", "/v1/watch/jobs/probe-hang").body << agent_->Log();
  std::optional<simdjson::dom::element> fired =
      WaitForAlert("probe-hang", "hang", started + 45'000'000'000);
  ASSERT_TRUE(fired.has_value()) << HttpCall(http_, "GET", "/v1/alerts").body << agent_->Log();
  simdjson::dom::element alert = *fired;
  ASSERT_EQ(alert["ranks"].get_array().size(), 1u) << simdjson::to_string(alert);
  EXPECT_EQ(alert["ranks"].at(0).get_int64().value(), 3);
  simdjson::dom::element evidence = alert["evidence"];
  EXPECT_EQ(evidence["communicator"].get_string().value(), "0000000000005eed");
  EXPECT_EQ(evidence["op"].get_string().value(), "AllReduce");
  EXPECT_EQ(evidence["bytes"].get_double().value(), 2 << 20);
  EXPECT_EQ(evidence["waiting_ranks"].get_double().value(), 3);
  // The sequence the hung rank never entered is the one its log names.
  const std::string hung = training_[3]->WaitForLog("hangs before collective ([0-9]+)");
  ASSERT_FALSE(hung.empty()) << training_[3]->Log();
  EXPECT_EQ(static_cast<int64_t>(evidence["sequence"].get_double().value()),
            common::ParseInt(hung).value());
}

}  // namespace
}  // namespace podscope::testing
