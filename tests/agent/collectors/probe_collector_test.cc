// A probe (ProbeRuntime with a synthetic source) and the agent's ProbeCollector on a real unix
// socket: registration, a whole capture window, a probe without an agent, an agent restart in
// the middle of a window, refusals, and which pid the agent reads a worker's /proc under.
#include "agent/collectors/probe_collector.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "agent/host/host_sampler.h"
#include "agent/probe/probe_runtime.h"
#include "common/frame_codec.h"
#include "common/protocol_version.h"
#include "common/str_util.h"
#include "tests/test_paths.h"
#include "tests/wait_for.h"

namespace podscope::agent {
namespace {

using probe::EventBudget;
using probe::GpuClockMap;
using probe::Harvest;

// Records one kernel per millisecond of window into the budget it is given, and hands over
// those that have ended while the window runs, as CUPTI's source does.
class SyntheticSource : public probe::EventSource {
 public:
  std::string_view name() const override { return "synthetic"; }
  void OpenWindow(TimeNs host_now, EventBudget* budget, GpuClockMap*) override {
    absl::MutexLock lock(&mu_);
    open_ = host_now;
    next_ = host_now;
    budget_ = budget;
    ++windows_opened;
  }
  Harvest TakeRecorded() override {
    absl::MutexLock lock(&mu_);
    Harvest h = KernelsEndedBy(common::HostNowNs());
    if (h.trace.kernels.size() > 0) ++takes;
    return h;
  }
  void CloseWindow(TimeNs host_now) override {
    absl::MutexLock lock(&mu_);
    close_ = host_now;
  }
  Harvest TakeHarvest() override {
    absl::MutexLock lock(&mu_);
    Harvest h = KernelsEndedBy(close_);
    h.error = error;
    h.dropped_reasons = invalid;
    for (const auto& [reason, n] : invalid) h.dropped += n;
    return h;
  }
  std::string error;
  std::map<std::string, uint64_t> invalid;  // records without true times, left out
  std::atomic<int> windows_opened{0};
  std::atomic<int> takes{0};  // takes while a window ran that handed kernels over

 private:
  // The kernels not handed over yet that end by `until`.
  Harvest KernelsEndedBy(TimeNs until) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Harvest h;
    common::KernelTable& k = h.trace.kernels;
    const common::NameId name = h.trace.strings.Intern("synthetic_kernel");
    for (; next_ + 500'000 <= until; next_ += 1'000'000) {
      const TimeNs t = next_;
      if (!budget_->Take()) continue;
      k.start.push_back(t);
      k.end.push_back(t + 500'000);
      k.device.push_back(0);
      k.stream.push_back(7);
      k.name.push_back(name);
      k.correlation.push_back(0);
      for (auto* col : {&k.grid_x, &k.grid_y, &k.grid_z, &k.block_x, &k.block_y, &k.block_z})
        col->push_back(1);
      k.registers_per_thread.push_back(0);
      k.shared_memory_bytes.push_back(0);
      k.kernel_class.push_back(common::KernelClass::kCompute);
    }
    return h;
  }

  absl::Mutex mu_;
  TimeNs open_ ABSL_GUARDED_BY(mu_) = 0;
  TimeNs next_ ABSL_GUARDED_BY(mu_) = 0;  // the next kernel's start
  TimeNs close_ ABSL_GUARDED_BY(mu_) = 0;
  EventBudget* budget_ ABSL_GUARDED_BY(mu_) = nullptr;
};

// What SyntheticSource records over a window: one kernel per whole millisecond.
size_t KernelsOver(const CollectedWorker& w) {
  const TimeNs length = w.actual_stop_ns - w.actual_start_ns;
  return length < 500'000 ? 0 : static_cast<size_t>((length - 500'000) / 1'000'000 + 1);
}

size_t KernelsIn(const CollectedWorker& w) {
  size_t n = 0;
  for (const common::WorkerTrace& piece : w.pieces) n += piece.kernels.size();
  return n;
}

using podscope::testing::WaitFor;

class ProbeCollectorTest : public ::testing::Test {
 protected:
  ProbeCollectorTest() : socket_(scratch_.File("run/agent.sock")) {}

  std::unique_ptr<ProbeCollector> StartAgent() {
    ProbeCollectorOptions options;
    options.server.socket_path = socket_;
    options.host = "node-1";
    options.drain_timeout_ns = 3'000'000'000;
    absl::StatusOr<std::unique_ptr<ProbeCollector>> c =
        ProbeCollector::Start(options, clock_, nullptr);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  std::unique_ptr<probe::ProbeRuntime> StartProbe(int32_t rank, int64_t reconnect_ms = 50,
                                                  uint64_t max_events = 1000,
                                                  int64_t stream_ms = 20) {
    probe::ProbeSettings settings;
    settings.agent_socket = socket_;
    settings.reconnect_interval_ns = reconnect_ms * 1'000'000;
    settings.max_events_per_window = max_events;
    settings.harvest_grace_ns = 1'000'000;
    settings.stream_interval_ns = stream_ms * 1'000'000;
    probe::ProbeDescription d;
    d.identity.rank = rank;
    d.identity.local_rank = rank % 8;
    d.identity.world_size = 16;
    d.identity.job = "train-42";
    d.pid = getpid();
    d.features = {"synthetic"};
    auto runtime = std::make_unique<probe::ProbeRuntime>(
        settings, d, std::vector<probe::EventSource*>{&source_});
    runtime->Start();
    return runtime;
  }
  // An agent that takes each connection's peer to be the next of `peer_pids` (what SO_PEERCRED
  // would say; 0: a PID namespace the agent cannot see), reading its workers in `proc_root`.
  std::unique_ptr<ProbeCollector> StartAgentSeeing(
      std::vector<pid_t> peer_pids, const std::string& proc_root,
      std::unique_ptr<host::HostSampler> sampler = nullptr) {
    ProbeCollectorOptions options;
    options.server.socket_path = socket_;
    options.host = "node-1";
    options.drain_timeout_ns = 3'000'000'000;
    options.proc_root = proc_root;
    auto next = std::make_shared<std::atomic<size_t>>(0);
    options.server.peer_credentials_for_testing =
        [peer_pids, next](int) -> absl::StatusOr<common::PeerCredentials> {
      const size_t i = next->fetch_add(1);
      if (i >= peer_pids.size()) return absl::FailedPreconditionError("more peers than expected");
      return common::PeerCredentials{peer_pids[i], getuid(), getgid()};
    };
    absl::StatusOr<std::unique_ptr<ProbeCollector>> c =
        ProbeCollector::Start(options, clock_, std::move(sampler));
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  // A probe of a process that says it is `pid`, child of `ppid_chain`, in its own PID namespace
  // (rank -1: its launcher gave it none).
  std::unique_ptr<probe::ProbeRuntime> StartProbeAs(int64_t pid, int32_t rank,
                                                    std::vector<int64_t> ppid_chain) {
    probe::ProbeSettings settings;
    settings.agent_socket = socket_;
    settings.harvest_grace_ns = 1'000'000;
    settings.stream_interval_ns = 20'000'000;
    probe::ProbeDescription d;
    d.identity.rank = rank;
    d.identity.world_size = 16;
    d.identity.job = "train-42";
    d.pid = pid;
    d.ppid_chain = std::move(ppid_chain);
    d.features = {"synthetic"};
    auto runtime = std::make_unique<probe::ProbeRuntime>(
        settings, d, std::vector<probe::EventSource*>{&source_});
    runtime->Start();
    return runtime;
  }
  // The host collector's samples of `rank` over a capture of 60 ms, sampled every 5 ms.
  std::vector<common::HostSampleTable> HostSamplesOfACapture(ProbeCollector& agent, int32_t rank) {
    std::vector<common::HostSampleTable> out;
    const std::string id = "cap-h" + std::to_string(rank);
    // The sampler ticks every 5 ms on its own thread: a window of sixty ticks has samples in it
    // however late a loaded machine runs that thread.
    EXPECT_TRUE(agent.Arm(Window(id, rank, 20, 300)).ok());
    EXPECT_TRUE(agent.Start(id).ok());
    absl::StatusOr<CollectedWorker> got = agent.Drain(id, rank);
    EXPECT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(agent.Stop(id).ok());
    agent.Forget(id);
    if (!got.ok()) return out;
    EXPECT_EQ(got->error, "");
    for (const common::WorkerTrace& piece : got->pieces) {
      if (piece.host_samples.size() > 0) out.push_back(piece.host_samples);
    }
    return out;
  }
  CaptureWindow Window(const std::string& id, int32_t rank, int64_t start_in_ms,
                       int64_t length_ms) {
    CaptureWindow w;
    w.capture_id = id;
    w.ranks = {rank};
    w.start_ns = clock_.Now() + start_in_ms * 1'000'000;
    w.stop_ns = w.start_ns + length_ms * 1'000'000;
    return w;
  }

  podscope::testing::ScratchDir scratch_;
  const std::string socket_;
  AgentClock clock_;
  SyntheticSource source_;
};

TEST_F(ProbeCollectorTest, ARegisteredProbeIsAWorkerAndDeliversItsWindow) {
  // Declared before the agent, so that it outlives the agent's server thread: the probe's
  // disconnect at the end of the test reaches the callback on that thread.
  std::atomic<int> changes{0};
  std::unique_ptr<ProbeCollector> agent = StartAgent();
  ASSERT_NE(agent, nullptr);
  agent->SetWorkersChangedCallback([&] { ++changes; });
  auto probe = StartProbe(/*rank=*/9);
  ASSERT_TRUE(WaitFor([&] { return agent->Workers().size() == 1; }));
  const WorkerIdentity w = agent->Workers()[0];
  EXPECT_EQ(w.rank, 9);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.world_size, 16);
  EXPECT_EQ(w.job, "train-42");
  EXPECT_EQ(w.pid, getpid());
  EXPECT_EQ(w.host, "node-1");
  EXPECT_TRUE(WaitFor([&] { return changes.load() >= 1; })) << "the agent is told workers changed";

  const CaptureWindow window = Window("cap-1", 9, 50, 40);
  ASSERT_TRUE(agent->Arm(window).ok());
  ASSERT_TRUE(agent->Start("cap-1").ok());
  absl::StatusOr<CollectedWorker> got = agent->Drain("cap-1", 9);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->error, "");
  EXPECT_EQ(got->dropped_events, 0u);
  for (const common::WorkerTrace& piece : got->pieces) {
    EXPECT_EQ(piece.info.rank, 9);
    EXPECT_EQ(piece.info.host, "node-1");
    EXPECT_EQ(piece.info.job, "train-42");
  }
  // Everything the source recorded over the window the probe reports, on the agent's clock.
  EXPECT_EQ(KernelsIn(*got), KernelsOver(*got));
  EXPECT_GT(KernelsIn(*got), 0u);
  EXPECT_GE(got->actual_start_ns, window.start_ns);
  EXPECT_LT(got->actual_start_ns, window.start_ns + 500'000'000)
      << "the probe starts on its own timer";
  EXPECT_GE(got->actual_stop_ns, window.stop_ns);
  EXPECT_TRUE(agent->Stop("cap-1").ok());
  agent->Forget("cap-1");

  // The process goes away: so does the worker.
  probe.reset();
  EXPECT_TRUE(WaitFor([&] { return agent->Workers().empty(); }));
}

TEST_F(ProbeCollectorTest, TheWindowsBudgetDropsAndTheAgentHearsTheCount) {
  std::unique_ptr<ProbeCollector> agent = StartAgent();
  auto probe = StartProbe(0, 50, /*max_events=*/10);
  ASSERT_TRUE(WaitFor([&] { return agent->Workers().size() == 1; }));
  ASSERT_TRUE(agent->Arm(Window("cap-b", 0, 30, 200)).ok());
  absl::StatusOr<CollectedWorker> got = agent->Drain("cap-b", 0);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(KernelsIn(*got), 10u);
  EXPECT_EQ(got->dropped_events, KernelsOver(*got) - 10);
}

TEST_F(ProbeCollectorTest, ASourceErrorFailsTheWorkerWithItsWords) {
  std::unique_ptr<ProbeCollector> agent = StartAgent();
  source_.error = "CUPTI cuptiSubscribe: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
  auto probe = StartProbe(2);
  ASSERT_TRUE(WaitFor([&] { return agent->Workers().size() == 1; }));
  ASSERT_TRUE(agent->Arm(Window("cap-e", 2, 20, 10)).ok());
  absl::StatusOr<CollectedWorker> got = agent->Drain("cap-e", 2);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(
      got->error,
      "probe: synthetic: CUPTI cuptiSubscribe: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED");
}

TEST_F(ProbeCollectorTest, AProbeWithoutAnAgentNeverBlocksAndKeepsItsQueueBounded) {
  probe::ProbeSettings settings;
  settings.agent_socket = scratch_.File("nobody/agent.sock");
  settings.reconnect_interval_ns = 20'000'000;
  settings.max_queue_bytes = 64 * 1024;
  probe::ProbeRuntime runtime(settings, probe::ProbeDescription{}, {&source_});
  runtime.Start();
  // No agent listens at that path, so no amount of waiting could connect it.
  EXPECT_FALSE(runtime.agent_client().connected());
  EXPECT_EQ(runtime.agent_client().connections(), 0u);
  // What the probe would send piles up to the bound, then is dropped and counted, at once.
  v1::ProbeMessage big;
  big.mutable_chunk()->set_capture_id(std::string(10'000, 'x'));
  int accepted = 0;
  for (int i = 0; i < 100; ++i)
    accepted += const_cast<probe::AgentSocketClient&>(runtime.agent_client()).Send(big) ? 1 : 0;
  EXPECT_EQ(accepted, 6) << "six frames of 10010 bytes fit in 64 KiB";
  EXPECT_EQ(runtime.agent_client().dropped_messages(), 94u);
  EXPECT_LE(runtime.agent_client().queued_bytes(), 64u * 1024);
  runtime.Stop();
}

TEST_F(ProbeCollectorTest, AnAgentRestartInTheMiddleOfAWindowLosesNothing) {
  auto agent = StartAgent();
  auto probe = StartProbe(3, /*reconnect_ms=*/50, /*max_events=*/10'000);
  ASSERT_TRUE(WaitFor([&] { return agent->Workers().size() == 1; }));
  // Long enough for the new agent's arm to land inside it even on a loaded machine: a window
  // already delivered is not sent again.
  const CaptureWindow window = Window("cap-r", 3, 20, 3'000);
  ASSERT_TRUE(agent->Arm(window).ok());
  ASSERT_TRUE(WaitFor([&] { return source_.windows_opened.load() == 1; }));
  // The probe has streamed part of the window to this agent...
  ASSERT_TRUE(WaitFor([&] { return source_.takes.load() >= 2; }));
  // ...when it dies while the probe records...
  agent.reset();
  ASSERT_TRUE(WaitFor([&] { return !probe->agent_client().connected(); }));
  // ...and a new one comes up; the probe finds it, and the coordinator re-sends the capture.
  agent = StartAgent();
  ASSERT_TRUE(WaitFor([&] { return agent->Workers().size() == 1; }));
  ASSERT_TRUE(agent->Arm(window).ok());
  absl::StatusOr<CollectedWorker> got = agent->Drain("cap-r", 3);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->error, "");
  // What went to the agent that died comes again, once: nothing lost, nothing twice.
  EXPECT_EQ(KernelsIn(*got), KernelsOver(*got));
  EXPECT_EQ(got->dropped_events, 0u);
  EXPECT_GT(KernelsIn(*got), 0u);
  EXPECT_EQ(source_.windows_opened.load(), 1) << "the second arm joined the window under way";
  EXPECT_GE(probe->agent_client().connections(), 2u);
}

// Records a source left out for their times reach the agent counted, with why.
TEST_F(ProbeCollectorTest, RecordsLeftOutReachTheAgentWithTheirReasons) {
  auto agent = StartAgent();
  source_.invalid = {{"kernels: no time", 11}, {"kernels: before the window", 2}};
  auto probe = StartProbe(8);
  ASSERT_TRUE(WaitFor([&] { return agent->Workers().size() == 1; }));
  ASSERT_TRUE(agent->Arm(Window("cap-r", 8, 20, 60)).ok());
  ASSERT_TRUE(agent->Start("cap-r").ok());
  absl::StatusOr<CollectedWorker> got = agent->Drain("cap-r", 8);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->error, "");
  EXPECT_EQ(got->dropped_events, 13u);
  EXPECT_EQ(got->dropped_reasons, source_.invalid);
  EXPECT_EQ(KernelsIn(*got), KernelsOver(*got));
}

// A probe that reconnects to the same agent is armed again, and sends again what it streamed:
// the agent takes each chunk once.
TEST_F(ProbeCollectorTest, WhatAProbeArmedAgainSendsAgainIsTakenOnce) {
  auto agent = StartAgent();
  auto probe = StartProbe(5);
  ASSERT_TRUE(WaitFor([&] { return agent->Workers().size() == 1; }));
  const CaptureWindow window = Window("cap-d", 5, 20, 300);
  ASSERT_TRUE(agent->Arm(window).ok());
  ASSERT_TRUE(agent->Start("cap-d").ok());
  ASSERT_TRUE(WaitFor([&] { return source_.takes.load() >= 2; }));
  v1::ProbeArm again;
  again.set_capture_id("cap-d");
  again.set_start_host_ns(clock_.ToHost(window.start_ns));
  again.set_stop_host_ns(clock_.ToHost(window.stop_ns));
  probe->OnArm(again);  // as the agent does when the probe registers again
  absl::StatusOr<CollectedWorker> got = agent->Drain("cap-d", 5);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->error, "");
  EXPECT_EQ(KernelsIn(*got), KernelsOver(*got));
  EXPECT_GT(KernelsIn(*got), 0u);
}

TEST_F(ProbeCollectorTest, ResultsThatArriveBeforeTheCaptureIsKnownAreClaimed) {
  auto agent = StartAgent();
  // Whole at the window's end: what a streaming probe sent the agent that went away before the
  // end is not sent again once the window is over.
  auto probe = StartProbe(4, 50, 1000, /*stream_ms=*/0);
  ASSERT_TRUE(WaitFor([&] { return agent->Workers().size() == 1; }));
  const CaptureWindow window = Window("cap-u", 4, 10, 300);
  ASSERT_TRUE(agent->Arm(window).ok());
  ASSERT_TRUE(WaitFor([&] { return source_.windows_opened.load() == 1; }));
  agent.reset();  // gone before the window ends; the results wait in the probe's queue
  ASSERT_TRUE(WaitFor([&] { return clock_.Now() > window.stop_ns; }));  // the window is over
  agent = StartAgent();
  ASSERT_TRUE(WaitFor([&] { return agent->Workers().size() == 1; }));
  ASSERT_TRUE(WaitFor([&] { return agent->unclaimed_results() == 1; }));  // they arrive unclaimed
  ASSERT_TRUE(agent->Arm(window).ok());
  absl::StatusOr<CollectedWorker> got = agent->Drain("cap-u", 4);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->error, "");
  EXPECT_EQ(KernelsIn(*got), KernelsOver(*got));
  EXPECT_GT(KernelsIn(*got), 0u);
}

// A streaming probe whose agent goes away before the window ends, and comes back after it: what
// went to the old agent is not sent again, and the new one counts it as dropped, so every
// kernel of the window is either delivered or counted.
TEST_F(ProbeCollectorTest, WhatAStreamingProbeSentToAnAgentThatWentAwayIsCountedAsDropped) {
  auto agent = StartAgent();
  auto probe = StartProbe(7);
  ASSERT_TRUE(WaitFor([&] { return agent->Workers().size() == 1; }));
  const CaptureWindow window = Window("cap-g", 7, 10, 300);
  ASSERT_TRUE(agent->Arm(window).ok());
  ASSERT_TRUE(WaitFor([&] { return source_.takes.load() >= 2; }));
  agent.reset();
  ASSERT_TRUE(WaitFor([&] { return clock_.Now() > window.stop_ns; }));
  agent = StartAgent();
  ASSERT_TRUE(WaitFor([&] { return agent->unclaimed_results() == 1; }));
  ASSERT_TRUE(agent->Arm(window).ok());
  absl::StatusOr<CollectedWorker> got = agent->Drain("cap-g", 7);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->error, "");
  EXPECT_EQ(KernelsIn(*got) + got->dropped_events, KernelsOver(*got));
}

TEST_F(ProbeCollectorTest, ARankWithoutAProbeFailsAtDrainWithAReason) {
  auto agent = StartAgent();
  ASSERT_TRUE(agent->Arm(Window("cap-n", 5, 10, 10)).ok());
  absl::StatusOr<CollectedWorker> got = agent->Drain("cap-n", 5);
  ASSERT_TRUE(got.ok());
  EXPECT_NE(got->error.find("no probe is registered for rank 5"), std::string::npos) << got->error;
}

TEST_F(ProbeCollectorTest, AChildOfAWorkerAndADuplicateRankAreNotServed) {
  auto agent = StartAgent();
  auto probe = StartProbe(6);
  ASSERT_TRUE(WaitFor([&] { return agent->Workers().size() == 1; }));
  // A second process claiming rank 6 whose parent is the worker (an inherited environment).
  probe::ProbeSettings settings;
  settings.agent_socket = socket_;
  probe::ProbeDescription child;
  child.identity.rank = 6;
  child.pid = getpid() + 100000;
  child.ppid_chain = {getpid(), 1};
  probe::ProbeRuntime child_probe(settings, child, {});
  child_probe.Start();
  ASSERT_TRUE(
      WaitFor([&] { return agent->probes() == 2; }));  // the child registered, and was judged
  ASSERT_EQ(agent->Workers().size(), 1u);
  EXPECT_EQ(agent->Workers()[0].rank, 6);
  child_probe.Stop();
}

// A node's /proc: counters that do not move (so node CPU is -1, no bytes), 1,500,000 kB used.
class FakeNodeProc {
 public:
  FakeNodeProc() {
    std::filesystem::create_directories(dir_.File("1/net"));
    dir_.Write("stat", "cpu  100 0 100 800 0 0 0 0 0 0\n");
    dir_.Write("meminfo", "MemTotal: 2000000 kB\nMemAvailable: 500000 kB\n");
    dir_.Write("1/net/dev", "Inter-|\n face |\n  eth0: 1000 1 0 0 0 0 0 0 2000 2 0 0 0 0 0 0\n");
  }
  const std::string& root() const { return dir_.path(); }
  // /proc/<pid>/stat of a process started by `ppid`, with `ticks` of CPU used.
  void Process(int64_t pid, int64_t ppid, int ticks) {
    std::filesystem::create_directories(dir_.File(std::to_string(pid)));
    dir_.Write(
        std::to_string(pid) + "/stat",
        common::StrCat(pid, " (python3) S ", ppid, " 1 1 0 -1 0 0 0 0 0 ", ticks, " 0 0 0\n"));
  }
  void Malformed(int64_t pid) {
    std::filesystem::create_directories(dir_.File(std::to_string(pid)));
    dir_.Write(std::to_string(pid) + "/stat", "garbage\n");
  }
  std::unique_ptr<host::HostSampler> Sampler() const {
    host::HostSamplerOptions options;
    options.proc_root = root();
    options.interval_ns = 5'000'000;
    options.ticks_per_second = 100;
    return std::make_unique<host::HostSampler>(options, nullptr);
  }

 private:
  podscope::testing::ScratchDir dir_;
};

// A probe in a PID namespace the agent cannot see (SO_PEERCRED says pid 0, as for a pod when
// the agent has no hostPID) is named by the pid it reports; in the node's /proc that pid is some
// other process, which is never read: the worker gets no CPU of its own (-1), not that process's.
TEST_F(ProbeCollectorTest, AProbeTheKernelGivesNoPidForIsNeverReadUnderItsReportedPid) {
  FakeNodeProc node;
  node.Process(7, 1, 500);  // the node's pid 7: read, it would say 0% (its ticks do not move)
  auto agent = StartAgentSeeing({0}, node.root(), node.Sampler());
  auto probe = StartProbeAs(/*pid=*/7, /*rank=*/4, {1});
  ASSERT_TRUE(WaitFor([&] { return agent->Workers().size() == 1; }));
  EXPECT_EQ(agent->Workers()[0].pid, 7);
  const std::vector<common::HostSampleTable> samples = HostSamplesOfACapture(*agent, 4);
  ASSERT_EQ(samples.size(), 1u);
  ASSERT_GE(samples[0].size(), 1u);
  for (size_t i = 0; i < samples[0].size(); ++i) {
    EXPECT_FLOAT_EQ(samples[0].process_cpu_percent[i], -1.0f) << i;
    EXPECT_FLOAT_EQ(samples[0].cpu_percent[i], -1.0f) << i;
    EXPECT_EQ(samples[0].memory_used_bytes[i], 1'500'000 * 1024) << i;
    EXPECT_EQ(samples[0].net_rx_bytes[i], 0) << i;
  }
}

// The kernel's pid (here 4242) is the one read, whatever the probe reports (7, malformed).
TEST_F(ProbeCollectorTest, AProbeTheKernelGivesAPidForIsReadUnderThatPid) {
  FakeNodeProc node;
  node.Process(4242, 1, 500);
  node.Malformed(7);  // read, it would give no CPU (-1)
  auto agent = StartAgentSeeing({4242}, node.root(), node.Sampler());
  auto probe = StartProbeAs(/*pid=*/7, /*rank=*/4, {1});
  ASSERT_TRUE(WaitFor([&] { return agent->Workers().size() == 1; }));
  EXPECT_EQ(agent->Workers()[0].pid, 4242);
  const std::vector<common::HostSampleTable> samples = HostSamplesOfACapture(*agent, 4);
  ASSERT_EQ(samples.size(), 1u);
  ASSERT_GE(samples[0].size(), 1u);
  for (size_t i = 0; i < samples[0].size(); ++i)
    EXPECT_FLOAT_EQ(samples[0].process_cpu_percent[i], 0.0f) << i;
}

// Which worker started a process is the node's /proc's word (ancestors under the kernel's
// pids), not the chain its probe reports: that counts in the probe's own PID namespace, which
// may be any pod's.
TEST_F(ProbeCollectorTest, AWorkersChildIsToldByTheNodesProcNotByWhatItsProbeReports) {
  FakeNodeProc node;
  node.Process(4242, 1, 0);     // the worker (pid 7 in its pod)
  node.Process(4250, 4242, 0);  // a dataloader it started
  node.Process(4300, 4250, 0);  // that one's child, which touched CUDA
  node.Process(4400, 1, 0);     // a process of another pod
  node.Malformed(4500);         // its ancestry unreadable
  auto agent = StartAgentSeeing({4242, 4300, 4400, 4500, 0}, node.root());
  auto worker = StartProbeAs(7, 6, {1});
  ASSERT_TRUE(WaitFor([&] { return agent->Workers().size() == 1; }));
  // No rank of its own, and a chain in its pod's numbering that names nothing the agent knows.
  auto child = StartProbeAs(31, -1, {30, 1});
  ASSERT_TRUE(WaitFor([&] { return agent->probes() == 2; }));
  EXPECT_EQ(agent->Workers().size(), 1u);
  auto other = StartProbeAs(7, -1, {1});
  ASSERT_TRUE(WaitFor([&] { return agent->Workers().size() == 2; }));
  auto unreadable = StartProbeAs(9, -1, {1});
  ASSERT_TRUE(WaitFor([&] { return agent->Workers().size() == 3; }));
  // With no kernel pid, a probe's chain naming the worker's reported pid proves nothing.
  auto foreign = StartProbeAs(32, -1, {7, 1});
  ASSERT_TRUE(WaitFor([&] { return agent->Workers().size() == 4; }));
  EXPECT_EQ(agent->probes(), 5u);
  std::vector<std::pair<int32_t, int64_t>> served;
  for (const WorkerIdentity& w : agent->Workers()) served.emplace_back(w.rank, w.pid);
  EXPECT_EQ(served,
            (std::vector<std::pair<int32_t, int64_t>>{{0, 4400}, {1, 4500}, {2, 32}, {6, 4242}}));
}

TEST_F(ProbeCollectorTest, ASocketThatIsNotWorldWritableAndAProbeOfAnotherMajorIsRefused) {
  auto agent = StartAgent();
  struct stat st {};
  ASSERT_EQ(stat(socket_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0002, 0u);
  absl::StatusOr<common::UniqueFd> fd = common::ConnectUnix(socket_);
  ASSERT_TRUE(fd.ok());
  v1::ProbeMessage hello;
  hello.mutable_register_()->set_protocol_major(common::kProbeProtocolMajor + 1);
  std::string frame;
  ASSERT_TRUE(common::AppendFrame(hello.SerializeAsString(), 1 << 20, &frame).ok());
  ASSERT_EQ(write(fd->get(), frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
  common::FrameReader reader(1 << 20);
  char buffer[4096];
  std::optional<std::string> payload;
  for (int i = 0; i < 100 && !payload.has_value(); ++i) {
    const ssize_t n = read(fd->get(), buffer, sizeof(buffer));
    if (n <= 0) break;
    reader.Append(std::string_view(buffer, static_cast<size_t>(n)));
    payload = *reader.Next();
  }
  ASSERT_TRUE(payload.has_value());
  v1::AgentToProbe answer;
  ASSERT_TRUE(answer.ParseFromString(*payload));
  ASSERT_TRUE(answer.has_refused());
  EXPECT_NE(answer.refused().reason().find("probe protocol 2.0 is not served"), std::string::npos)
      << answer.refused().reason();
  EXPECT_TRUE(agent->Workers().empty());
}

TEST_F(ProbeCollectorTest, APeerOfAUserTheAgentDoesNotServeIsRefusedByItsCredentials) {
  if (getuid() != 0) GTEST_SKIP() << "acting as another user needs root";
  constexpr uid_t kNobody = 65534;
  ProbeCollectorOptions options;
  options.server.socket_path = socket_;
  options.server.allowed_uids = {4242};
  absl::StatusOr<std::unique_ptr<ProbeCollector>> agent =
      ProbeCollector::Start(options, clock_, nullptr);
  ASSERT_TRUE(agent.ok()) << agent.status();
  // The file's group lets the other user connect; only the credentials check stands in its way.
  ASSERT_EQ(chmod(scratch_.path().c_str(), 0755), 0);
  ASSERT_EQ(chmod(scratch_.File("run").c_str(), 0755), 0);
  ASSERT_EQ(chown(socket_.c_str(), 0, kNobody), 0);
  v1::ProbeMessage hello;
  hello.mutable_register_()->set_protocol_major(common::kProbeProtocolMajor);
  hello.mutable_register_()->set_rank(0);
  std::string frame;
  ASSERT_TRUE(common::AppendFrame(hello.SerializeAsString(), 1 << 20, &frame).ok());
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_.c_str(), sizeof(address.sun_path) - 1);
  const pid_t child = fork();
  if (child == 0) {
    // Only system calls from here: the parent has threads, so the child must not allocate.
    if (setgid(kNobody) != 0 || setuid(kNobody) != 0) _exit(10);
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) _exit(11);
    if (write(fd, frame.data(), frame.size()) != static_cast<ssize_t>(frame.size())) _exit(12);
    char answer[4096];
    size_t got = 0;
    for (ssize_t n; got < sizeof(answer) && (n = read(fd, answer + got, sizeof(answer) - got)) > 0;)
      got += static_cast<size_t>(n);
    static const char kWant[] = "user 65534 may not register";
    _exit(memmem(answer, got, kWant, sizeof(kWant) - 1) != nullptr ? 0 : 13);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10: setuid, 11: connect, 12: write, 13: no refusal naming the user";
  EXPECT_TRUE((*agent)->Workers().empty());
}

}  // namespace
}  // namespace podscope::agent
