// A probe (ProbeRuntime with a synthetic source) and the agent's ProbeCollector on a real unix
// socket: registration, a whole capture window, a probe without an agent, an agent restart in
// the middle of a window, and refusals.
#include "agent/collectors/probe_collector.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "agent/probe/probe_runtime.h"
#include "common/frame_codec.h"
#include "common/protocol_version.h"
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
  std::unique_ptr<ProbeCollector> agent = StartAgent();
  ASSERT_NE(agent, nullptr);
  std::atomic<int> changes{0};
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
