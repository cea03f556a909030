// The host collector: samples the node's CPU, memory and network, the CPU of every
// registered worker process, and each worker's GPU (through a GpuReader), while at least one
// capture is running, into a bounded ring. A capture's workers each get the samples of their
// window: node-wide figures plus their own process and GPU.
//
// Idle costs nothing: the thread sleeps until a capture acquires the sampler.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/host/gpu_reader.h"
#include "agent/host/proc_stats.h"
#include "common/time_source.h"
#include "common/trace_model.h"

namespace podscope::agent::host {

using common::TimeNs;

// Whether a watched pid is the process's pid in the proc root. One the kernel gave the agent
// (SO_PEERCRED) is; one a probe reported from inside another PID namespace is not: there it is
// some other process of the node, so that worker gets node and GPU samples but no CPU of its own.
enum class PidScope { kProcRoot, kForeign };

struct HostSamplerOptions {
  std::string proc_root = "/proc";
  int64_t interval_ns = 100'000'000;
  size_t max_samples = 36'000;   // an hour at the default interval
  int64_t ticks_per_second = 0;  // 0: sysconf(_SC_CLK_TCK)
};

class HostSampler {
 public:
  // `gpus` may be null (no NVML): GPU fields stay 0. `now` null: CLOCK_REALTIME.
  // `time` stamps the samples and paces the thread; it must outlive the sampler.
  HostSampler(HostSamplerOptions options, std::unique_ptr<GpuReader> gpus,
              const common::TimeSource& time = common::RealTime());
  ~HostSampler();

  // Sampling runs while the count of acquisitions is above zero (a capture window each).
  void Acquire();
  void Release();

  // Processes whose samples are kept, with the GPU index each one uses (-1: none known). `pid`
  // names the process in SamplesFor and GpuMemoryFor; a kForeign one is only that name (any
  // number): its CPU is not read.
  void Watch(int64_t pid, int gpu_index, PidScope scope = PidScope::kProcRoot);
  void Unwatch(int64_t pid);

  // Takes one sample at `now` (the thread calls it every interval; tests call it directly).
  // The first call only reads the counters the next one differences against.
  void SampleOnce(TimeNs now);

  // The samples within [begin, end] for one worker: node figures, its process CPU, its GPU.
  common::HostSampleTable SamplesFor(int64_t pid, TimeNs begin, TimeNs end) const;
  // The memory used on pid's GPU (NVML: every process's together) in [begin, end], as memory
  // samples of that device (bytes 0, reserved = used); empty without NVML's memory figures.
  common::MemoryEventTable GpuMemoryFor(int64_t pid, TimeNs begin, TimeNs end) const;
  size_t samples() const;
  // Why a counter could not be read, the first time it happened (empty when all is well).
  std::string problems() const;

 private:
  struct Sample {
    TimeNs time = 0;
    float cpu_percent = -1;
    int64_t memory_used = 0;
    int64_t net_rx = 0, net_tx = 0;  // bytes during the interval that ends here
    std::map<int64_t, float> process_cpu;
    std::map<int, GpuSample> gpu;
  };
  void Loop();
  void NoteProblem(const std::string& what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const HostSamplerOptions options_;
  std::unique_ptr<GpuReader> gpus_;
  const common::TimeSource& time_;
  int64_t ticks_per_second_;

  mutable absl::Mutex mu_;
  int holders_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  struct Watched {
    int gpu_index = -1;
    PidScope scope = PidScope::kProcRoot;
  };
  std::map<int64_t, Watched> watched_ ABSL_GUARDED_BY(mu_);
  std::deque<Sample> ring_ ABSL_GUARDED_BY(mu_);
  std::string problems_ ABSL_GUARDED_BY(mu_);
  // The previous reading.
  bool have_previous_ ABSL_GUARDED_BY(mu_) = false;
  TimeNs previous_time_ ABSL_GUARDED_BY(mu_) = 0;
  CpuTimes previous_cpu_ ABSL_GUARDED_BY(mu_);
  NetBytes previous_net_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, uint64_t> previous_ticks_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace podscope::agent::host
