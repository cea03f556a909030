// The host collector against a fake /proc tree with known counters.
#include "agent/host/host_sampler.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/test_paths.h"
#include "tests/wait_for.h"

namespace podscope::agent::host {
namespace {

// A net/dev table: loopback (never counted), eth0 and ib0.
std::string NetDevTable(uint64_t eth_rx, uint64_t eth_tx, uint64_t ib_rx, uint64_t ib_tx) {
  auto row = [](const char* name, uint64_t rx, uint64_t tx) {
    return std::string(name) + ": " + std::to_string(rx) + " 10 0 0 0 0 0 0 " + std::to_string(tx) +
           " 20 0 0 0 0 0 0\n";
  };
  return "Inter-|   Receive                                                |  Transmit\n"
         " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets "
         "errs drop fifo colls carrier compressed\n" +
         row("    lo", 999999, 999999) + row("  eth0", eth_rx, eth_tx) + row("  ib0", ib_rx, ib_tx);
}

class FakeProc {
 public:
  FakeProc() {
    for (const char* d : {"net", "self/net", "1/net"})
      std::filesystem::create_directories(dir_.File(d));
  }
  const std::string& root() const { return dir_.path(); }
  void Write(const std::string& name, const std::string& text) { dir_.Write(name, text); }

  void Stat(uint64_t user, uint64_t nice, uint64_t system, uint64_t idle, uint64_t iowait,
            uint64_t irq, uint64_t softirq, uint64_t steal) {
    dir_.Write("stat", "cpu  " + std::to_string(user) + " " + std::to_string(nice) + " " +
                           std::to_string(system) + " " + std::to_string(idle) + " " +
                           std::to_string(iowait) + " " + std::to_string(irq) + " " +
                           std::to_string(softirq) + " " + std::to_string(steal) +
                           " 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n");
  }
  void MemInfo(int64_t total_kb, int64_t available_kb) {
    dir_.Write("meminfo", "MemTotal:       " + std::to_string(total_kb) +
                              " kB\nMemFree:         1000 kB\n"
                              "MemAvailable:   " +
                              std::to_string(available_kb) + " kB\nBuffers:  10 kB\n");
  }
  // The node's interfaces: those of PID 1's network namespace.
  void NetDev(uint64_t eth_rx, uint64_t eth_tx, uint64_t ib_rx, uint64_t ib_tx) {
    dir_.Write("1/net/dev", NetDevTable(eth_rx, eth_tx, ib_rx, ib_tx));
  }
  // The reader's own interfaces (/proc/net is /proc/self/net): a pod's, in a DaemonSet.
  void OwnNetDev(uint64_t eth_rx, uint64_t eth_tx) {
    dir_.Write("net/dev", NetDevTable(eth_rx, eth_tx, 0, 0));
    dir_.Write("self/net/dev", NetDevTable(eth_rx, eth_tx, 0, 0));
  }
  void Process(int64_t pid, uint64_t utime, uint64_t stime) {
    std::filesystem::create_directories(dir_.File(std::to_string(pid)));
    // A command name with a space and a parenthesis, as a python process may have.
    dir_.Write(std::to_string(pid) + "/stat",
               std::to_string(pid) + " (pt_main (th) S 1 2 3 4 5 6 7 8 9 10 " +
                   std::to_string(utime) + " " + std::to_string(stime) + " 0 0 20 0\n");
  }

 private:
  podscope::testing::ScratchDir dir_;
};

class FakeGpus : public GpuReader {
 public:
  std::optional<GpuSample> Read(int index) override {
    if (index != 1) return std::nullopt;
    return GpuSample{1980, 612'000, 71, 0x4, 42'000'000'000};
  }
};

TEST(ProcStatsTest, ReadsExactCounters) {
  FakeProc proc;
  proc.Stat(100, 5, 50, 800, 20, 3, 2, 1);
  proc.MemInfo(1'000'000, 250'000);
  proc.NetDev(1000, 2000, 30000, 40000);
  proc.Process(4242, 700, 300);
  absl::StatusOr<CpuTimes> cpu = ReadCpuTimes(proc.root());
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->busy, 161u);
  EXPECT_EQ(cpu->total, 981u);
  EXPECT_EQ(*ReadMemoryUsedBytes(proc.root()), 750'000 * 1024);
  absl::StatusOr<NetBytes> net = ReadNetBytes(proc.root());
  ASSERT_TRUE(net.ok()) << net.status();
  EXPECT_EQ(net->rx, 31'000u) << "loopback is not network";
  EXPECT_EQ(net->tx, 42'000u);
  EXPECT_EQ(*ReadProcessCpuTicks(proc.root(), 4242), 1000u);
  EXPECT_FLOAT_EQ(NodeCpuPercent({100, 1000}, {400, 2000}), 30.0f);
  EXPECT_FLOAT_EQ(ProcessCpuPercent(1000, 1150, 1'000'000'000, 100), 150.0f);
}

TEST(ProcStatsTest, MalformedFilesAreClearErrors) {
  podscope::testing::ScratchDir dir;
  EXPECT_EQ(ReadCpuTimes(dir.path()).status().code(), absl::StatusCode::kNotFound);
  dir.Write("stat", "intr 1 2 3\n");
  EXPECT_NE(std::string(ReadCpuTimes(dir.path()).status().message()).find("aggregate"),
            std::string::npos);
  dir.Write("meminfo", "MemTotal: 10 kB\n");
  EXPECT_NE(std::string(ReadMemoryUsedBytes(dir.path()).status().message()).find("MemAvailable"),
            std::string::npos);
  std::filesystem::create_directories(dir.File("7"));
  dir.Write("7/stat", "7 (x) S 1 2 3 4 5 6 7 8 9 10 abc 4\n");
  EXPECT_NE(
      std::string(ReadProcessCpuTicks(dir.path(), 7).status().message()).find("not a tick count"),
      std::string::npos);
}

TEST(HostSamplerTest, SamplesNodeProcessAndGpuBetweenReadings) {
  FakeProc proc;
  proc.Stat(100, 0, 100, 800, 0, 0, 0, 0);
  proc.MemInfo(2'000'000, 500'000);
  proc.NetDev(1000, 1000, 0, 0);
  proc.Process(10, 50, 50);
  proc.Process(11, 0, 0);
  HostSamplerOptions options;
  options.proc_root = proc.root();
  options.ticks_per_second = 100;
  HostSampler sampler(options, std::make_unique<FakeGpus>());
  sampler.Watch(10, 1);
  sampler.Watch(11, 0);
  sampler.SampleOnce(1'000'000'000);  // the baseline: no sample yet
  EXPECT_EQ(sampler.samples(), 0u);

  // Half a second later: 300 of 1000 ticks busy, pid 10 used 40 ticks (80% of a core).
  proc.Stat(300, 0, 200, 1500, 0, 0, 0, 0);
  proc.NetDev(1500, 3000, 100, 0);
  proc.Process(10, 80, 60);
  proc.MemInfo(2'000'000, 400'000);
  sampler.SampleOnce(1'500'000'000);
  ASSERT_EQ(sampler.samples(), 1u);

  common::HostSampleTable s = sampler.SamplesFor(10, 1'000'000'000, 2'000'000'000);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s.time[0], 1'500'000'000);
  EXPECT_FLOAT_EQ(s.cpu_percent[0], 30.0f);
  EXPECT_FLOAT_EQ(s.process_cpu_percent[0], 80.0f);
  EXPECT_EQ(s.memory_used_bytes[0], 1'600'000 * 1024);
  EXPECT_EQ(s.net_rx_bytes[0], 600);
  EXPECT_EQ(s.net_tx_bytes[0], 2000);
  EXPECT_EQ(s.gpu_sm_clock_mhz[0], 1980);
  EXPECT_EQ(s.gpu_power_mw[0], 612'000);
  EXPECT_EQ(s.gpu_temperature_c[0], 71);
  EXPECT_EQ(s.gpu_throttle_reasons[0], 0x4u);
  // Pid 11 used nothing, on a GPU NVML does not answer for.
  common::HostSampleTable other = sampler.SamplesFor(11, 0, 2'000'000'000);
  ASSERT_EQ(other.size(), 1u);
  EXPECT_FLOAT_EQ(other.process_cpu_percent[0], 0.0f);
  EXPECT_EQ(other.gpu_sm_clock_mhz[0], 0);
  // GPU memory used on pid 10's GPU, as a memory sample of device 1; none for pid 11's GPU
  // (NVML does not answer for it) or an unwatched pid.
  common::MemoryEventTable memory = sampler.GpuMemoryFor(10, 1'000'000'000, 2'000'000'000);
  ASSERT_EQ(memory.size(), 1u);
  EXPECT_EQ(memory.time[0], 1'500'000'000);
  EXPECT_EQ(memory.device[0], 1);
  EXPECT_EQ(memory.bytes[0], 0);
  EXPECT_EQ(memory.total_allocated[0], common::kUnknownBytes);
  EXPECT_EQ(memory.total_reserved[0], 42'000'000'000);
  EXPECT_EQ(sampler.GpuMemoryFor(11, 0, 2'000'000'000).size(), 0u);
  EXPECT_EQ(sampler.GpuMemoryFor(12, 0, 2'000'000'000).size(), 0u);
  // Outside the window: nothing.
  EXPECT_EQ(sampler.SamplesFor(10, 1'600'000'000, 2'000'000'000).size(), 0u);
  EXPECT_EQ(sampler.problems(), "");
}

// In a pod, <proc root>/net/dev and <proc root>/self/net/dev are the pod's own interfaces; the
// node's are PID 1's.
TEST(ProcStatsTest, NetworkCountersAreTheNodesFromPid1) {
  FakeProc proc;
  proc.NetDev(1000, 2000, 30000, 40000);
  proc.OwnNetDev(7, 8);
  absl::StatusOr<NetBytes> net = ReadNetBytes(proc.root());
  ASSERT_TRUE(net.ok()) << net.status();
  EXPECT_EQ(net->rx, 31'000u);
  EXPECT_EQ(net->tx, 42'000u);

  proc.Stat(100, 0, 100, 800, 0, 0, 0, 0);
  proc.MemInfo(2'000'000, 500'000);
  HostSamplerOptions options;
  options.proc_root = proc.root();
  HostSampler sampler(options, nullptr);
  sampler.SampleOnce(1'000'000'000);
  // The node moved 600 bytes in and 650 out; the pod's own namespace far more.
  proc.NetDev(1500, 2600, 30100, 40050);
  proc.OwnNetDev(900'007, 800'008);
  sampler.SampleOnce(1'500'000'000);
  common::HostSampleTable s = sampler.SamplesFor(1, 0, 2'000'000'000);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s.net_rx_bytes[0], 600);
  EXPECT_EQ(s.net_tx_bytes[0], 650);
  EXPECT_EQ(sampler.problems(), "");
}

TEST(ProcStatsTest, ANodeNetDevMissingOrMalformedIsAnErrorNotThePodsCounters) {
  podscope::testing::ScratchDir dir;
  std::filesystem::create_directories(dir.File("1/net"));
  dir.Write("net/dev", NetDevTable(7, 8, 0, 0));
  absl::StatusOr<NetBytes> net = ReadNetBytes(dir.path());
  EXPECT_EQ(net.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(net.status().message(), "cannot read " + dir.path() + "/1/net/dev");
  dir.Write("1/net/dev", "Inter-|\n face |\n  eth0: 1 2 3\n");
  EXPECT_EQ(ReadNetBytes(dir.path()).status().message(),
            dir.path() + "/1/net/dev: interface eth0 has 3 counters, want 16");
  dir.Write("1/net/dev", "eth0 1 2 3\n");
  EXPECT_EQ(ReadNetBytes(dir.path()).status().message(),
            dir.path() + "/1/net/dev: not a net/dev table");
}

TEST(ProcStatsTest, ParentPidsAndTheirMalformedFiles) {
  podscope::testing::ScratchDir dir;
  std::filesystem::create_directories(dir.File("4300"));
  dir.Write("4300/stat", "4300 (data loader (1)) S 4250 4300 4300 0 -1 4194304 0 0 0 0 5 6\n");
  absl::StatusOr<int64_t> parent = ReadParentPid(dir.path(), 4300);
  ASSERT_TRUE(parent.ok()) << parent.status();
  EXPECT_EQ(*parent, 4250);
  EXPECT_EQ(*ParseParentPid("1 (systemd) S 0 1 1 0 -1\n", "1/stat"), 0);
  EXPECT_EQ(ReadParentPid(dir.path(), 4301).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ParseParentPid("4300 data loader S 4250\n", "4300/stat").status().message(),
            "4300/stat: no \"(comm)\"");
  EXPECT_EQ(ParseParentPid("4300 (x) S\n", "4300/stat").status().message(),
            "4300/stat: ends before field 4");
  EXPECT_EQ(ParseParentPid("4300 (x) S -1 0\n", "4300/stat").status().message(),
            "4300/stat: field 4 is '-1', not a parent's pid");
  EXPECT_EQ(ParseParentPid("4300 (x) S 42x 0\n", "4300/stat").status().message(),
            "4300/stat: field 4 is '42x', not a parent's pid");
  EXPECT_EQ(ParseParentPid("4300 (x) S 99999999 0\n", "4300/stat").status().message(),
            "4300/stat: field 4 is '99999999', not a parent's pid");
}

// A worker the agent knows only by the pid its probe reported from another PID namespace: that
// pid's /proc entry is some other process of the node, and is never read.
TEST(HostSamplerTest, AForeignPidGetsNodeAndGpuSamplesButNoCpuOfItsOwn) {
  FakeProc proc;
  proc.Stat(100, 0, 100, 800, 0, 0, 0, 0);
  proc.MemInfo(2'000'000, 500'000);
  proc.NetDev(1000, 1000, 0, 0);
  proc.Process(7, 50, 50);  // the node's pid 7: not the worker
  HostSamplerOptions options;
  options.proc_root = proc.root();
  options.ticks_per_second = 100;
  HostSampler sampler(options, std::make_unique<FakeGpus>());
  sampler.Watch(7, 1, PidScope::kForeign);
  sampler.SampleOnce(1'000'000'000);
  proc.Stat(300, 0, 200, 1500, 0, 0, 0, 0);
  proc.Process(7, 80, 60);  // were it read: 80% of a core
  sampler.SampleOnce(1'500'000'000);
  common::HostSampleTable s = sampler.SamplesFor(7, 0, 2'000'000'000);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_FLOAT_EQ(s.process_cpu_percent[0], -1.0f);
  EXPECT_FLOAT_EQ(s.cpu_percent[0], 30.0f);
  EXPECT_EQ(s.memory_used_bytes[0], 1'500'000 * 1024);
  EXPECT_EQ(s.gpu_sm_clock_mhz[0], 1980);
  EXPECT_EQ(sampler.GpuMemoryFor(7, 0, 2'000'000'000).size(), 1u);
  EXPECT_EQ(sampler.problems(), "");
}

TEST(HostSamplerTest, WithoutNvmlOrProcItSaysSoAndCarriesOn) {
  podscope::testing::ScratchDir empty;
  HostSamplerOptions options;
  options.proc_root = empty.path();
  HostSampler sampler(options, nullptr);
  sampler.SampleOnce(1);
  sampler.SampleOnce(2);
  EXPECT_EQ(sampler.samples(), 1u);
  common::HostSampleTable s = sampler.SamplesFor(1, 0, 10);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_FLOAT_EQ(s.cpu_percent[0], -1.0f);
  EXPECT_NE(sampler.problems().find("/stat"), std::string::npos) << sampler.problems();
}

TEST(HostSamplerTest, TheThreadSamplesOnlyWhileAcquired) {
  FakeProc proc;
  proc.Stat(1, 0, 0, 1, 0, 0, 0, 0);
  proc.MemInfo(10, 5);
  proc.NetDev(0, 0, 0, 0);
  HostSamplerOptions options;
  options.proc_root = proc.root();
  options.interval_ns = 10'000'000;
  common::SimulatedTimeSource time(1'000'000'000);
  HostSampler sampler(options, nullptr, time);
  time.AdvanceBy(5 * options.interval_ns);
  EXPECT_EQ(sampler.samples(), 0u) << "idle costs nothing";
  sampler.Acquire();
  // The first reading only sets the baseline; each interval after it stores one sample. Time
  // moves once the thread sleeps on its interval.
  for (size_t want = 1; want <= 2; ++want) {
    ASSERT_TRUE(testing::WaitFor([&] { return time.Sleepers() == 1; }));
    time.AdvanceBy(options.interval_ns);
    ASSERT_TRUE(testing::WaitFor([&] { return sampler.samples() == want; })) << sampler.samples();
  }
  sampler.Release();
  EXPECT_EQ(sampler.samples(), 2u);
}

// Found by fuzzing (podscope_proc_fuzz): istream's >> read "-2" as 2^64 - 2, so a garbled
// /proc/stat gave a busy time larger than the total. Counters are digits only now.
TEST(ProcStatsTest, SignedOrHugeCountersAreErrorsNotWrappedNumbers) {
  EXPECT_FALSE(ParseCpuTimes("cpu  4705 3  85-2\x8f"
                             "349 23 0 10 0 0\n",
                             "stat")
                   .ok());
  EXPECT_FALSE(ParseCpuTimes("cpu  4705 -3 85 349 23 0 10 0\n", "stat").ok());
  EXPECT_FALSE(ParseCpuTimes("cpu  18446744073709551615 1 1 1\n", "stat").ok());
  absl::StatusOr<CpuTimes> ok = ParseCpuTimes("cpu  4705 356 584 3699 23 0 12 0 0 0\n", "stat");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->busy, 4705u + 356 + 584 + 12);
  EXPECT_EQ(ok->total, ok->busy + 3699 + 23);
  EXPECT_TRUE(ParseCpuTimes("cpu  1 2 3 4\n", "stat").ok()) << "old kernels stop after idle";
  EXPECT_FALSE(
      ParseMemoryUsedBytes("MemTotal: 9223372036854775807 kB\nMemAvailable: 1 kB\n", "meminfo")
          .ok());
  EXPECT_FALSE(ParseMemoryUsedBytes("MemTotal: 10 kB\nMemAvailable: 20 kB\n", "meminfo").ok());
  EXPECT_FALSE(ParseNetBytes("Inter-|\n eth0: -1 0 0 0 0 0 0 0 5 0 0 0 0 0 0 0\n", "net/dev").ok());
  EXPECT_FALSE(
      ParseProcessCpuTicks("1 (x) S 1 1 1 0 -1 0 0 0 0 0 18446744073709551615 1 0\n", "1/stat")
          .ok());
}

}  // namespace
}  // namespace podscope::agent::host
