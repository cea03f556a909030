#include "agent/host/host_sampler.h"

#include <unistd.h>

#include "spdlog/spdlog.h"

namespace podscope::agent::host {

HostSampler::HostSampler(HostSamplerOptions options, std::unique_ptr<GpuReader> gpus,
                         const common::TimeSource& time)
    : options_(std::move(options)),
      gpus_(std::move(gpus)),
      time_(time),
      ticks_per_second_(options_.ticks_per_second > 0 ? options_.ticks_per_second
                                                      : sysconf(_SC_CLK_TCK)) {
  thread_ = std::thread([this] { Loop(); });
}

HostSampler::~HostSampler() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void HostSampler::Acquire() {
  {
    absl::MutexLock lock(&mu_);
    ++holders_;
  }
}

void HostSampler::Release() {
  absl::MutexLock lock(&mu_);
  if (holders_ > 0) --holders_;
  if (holders_ == 0) have_previous_ = false;  // the next capture starts from a fresh reading
}

void HostSampler::Watch(int64_t pid, int gpu_index, PidScope scope) {
  absl::MutexLock lock(&mu_);
  watched_[pid] = Watched{gpu_index, scope};
}

void HostSampler::Unwatch(int64_t pid) {
  absl::MutexLock lock(&mu_);
  watched_.erase(pid);
  previous_ticks_.erase(pid);
}

void HostSampler::NoteProblem(const std::string& what) {
  // Once per kind of problem: a node without NVML or a container without /proc/net says so
  // once, then carries on with what it has.
  if (problems_.find(what) != std::string::npos) return;
  spdlog::warn("host collector: {} (carrying on without it)", what);
  problems_ += problems_.empty() ? what : "; " + what;
}

void HostSampler::SampleOnce(TimeNs now) {
  std::map<int64_t, Watched> watched;
  {
    absl::MutexLock lock(&mu_);
    watched = watched_;
  }
  // Read outside the lock: /proc and NVML take a while.
  absl::StatusOr<CpuTimes> cpu = ReadCpuTimes(options_.proc_root);
  absl::StatusOr<int64_t> memory = ReadMemoryUsedBytes(options_.proc_root);
  absl::StatusOr<NetBytes> net = ReadNetBytes(options_.proc_root);
  std::map<int64_t, uint64_t> ticks;
  for (const auto& [pid, w] : watched) {
    if (w.scope != PidScope::kProcRoot) continue;
    if (absl::StatusOr<uint64_t> t = ReadProcessCpuTicks(options_.proc_root, pid); t.ok())
      ticks[pid] = *t;
  }
  std::map<int, GpuSample> gpu;
  if (gpus_ != nullptr) {
    for (const auto& [pid, w] : watched) {
      const int index = w.gpu_index;
      if (index < 0 || gpu.contains(index)) continue;
      if (std::optional<GpuSample> g = gpus_->Read(index); g.has_value()) gpu[index] = *g;
    }
  }

  absl::MutexLock lock(&mu_);
  if (!cpu.ok()) NoteProblem(std::string(cpu.status().message()));
  if (!memory.ok()) NoteProblem(std::string(memory.status().message()));
  if (!net.ok()) NoteProblem(std::string(net.status().message()));
  if (have_previous_) {
    Sample s;
    s.time = now;
    if (cpu.ok()) s.cpu_percent = NodeCpuPercent(previous_cpu_, *cpu);
    if (memory.ok()) s.memory_used = *memory;
    if (net.ok() && net->rx >= previous_net_.rx && net->tx >= previous_net_.tx) {
      s.net_rx = static_cast<int64_t>(net->rx - previous_net_.rx);
      s.net_tx = static_cast<int64_t>(net->tx - previous_net_.tx);
    }
    for (const auto& [pid, t] : ticks) {
      auto before = previous_ticks_.find(pid);
      if (before == previous_ticks_.end()) continue;
      s.process_cpu[pid] =
          ProcessCpuPercent(before->second, t, now - previous_time_, ticks_per_second_);
    }
    s.gpu = std::move(gpu);
    ring_.push_back(std::move(s));
    while (ring_.size() > options_.max_samples) ring_.pop_front();
  }
  have_previous_ = true;
  previous_time_ = now;
  if (cpu.ok()) previous_cpu_ = *cpu;
  if (net.ok()) previous_net_ = *net;
  previous_ticks_ = std::move(ticks);
}

common::HostSampleTable HostSampler::SamplesFor(int64_t pid, TimeNs begin, TimeNs end) const {
  absl::MutexLock lock(&mu_);
  common::HostSampleTable t;
  int gpu_index = -1;
  if (auto it = watched_.find(pid); it != watched_.end()) gpu_index = it->second.gpu_index;
  for (const Sample& s : ring_) {
    if (s.time < begin || s.time > end) continue;
    t.time.push_back(s.time);
    t.cpu_percent.push_back(s.cpu_percent);
    auto p = s.process_cpu.find(pid);
    t.process_cpu_percent.push_back(p != s.process_cpu.end() ? p->second : -1.0f);
    t.memory_used_bytes.push_back(s.memory_used);
    t.net_rx_bytes.push_back(s.net_rx);
    t.net_tx_bytes.push_back(s.net_tx);
    auto g = s.gpu.find(gpu_index);
    const GpuSample none;
    const GpuSample& gs = g != s.gpu.end() ? g->second : none;
    t.gpu_sm_clock_mhz.push_back(gs.sm_clock_mhz);
    t.gpu_power_mw.push_back(gs.power_mw);
    t.gpu_temperature_c.push_back(gs.temperature_c);
    t.gpu_throttle_reasons.push_back(gs.throttle_reasons);
  }
  return t;
}

common::MemoryEventTable HostSampler::GpuMemoryFor(int64_t pid, TimeNs begin, TimeNs end) const {
  absl::MutexLock lock(&mu_);
  common::MemoryEventTable t;
  const auto watched = watched_.find(pid);
  if (watched == watched_.end() || watched->second.gpu_index < 0) return t;
  const int gpu_index = watched->second.gpu_index;
  for (const Sample& s : ring_) {
    if (s.time < begin || s.time > end) continue;
    const auto g = s.gpu.find(gpu_index);
    if (g == s.gpu.end() || g->second.memory_used_bytes < 0) continue;
    t.time.push_back(s.time);
    t.device.push_back(gpu_index);
    t.bytes.push_back(0);
    t.total_allocated.push_back(common::kUnknownBytes);
    t.total_reserved.push_back(g->second.memory_used_bytes);
    t.thread.push_back(0);
  }
  return t;
}

size_t HostSampler::samples() const {
  absl::MutexLock lock(&mu_);
  return ring_.size();
}

std::string HostSampler::problems() const {
  absl::MutexLock lock(&mu_);
  return problems_;
}

void HostSampler::Loop() {
  const auto wanted = [this]()
                          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || holders_ > 0; };
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.Await(absl::Condition(&wanted));
    if (stopping_) return;
    const TimeNs at = time_.Now();
    mu_.Unlock();
    SampleOnce(at);
    mu_.Lock();
    // An interval after this sample's time, however long reading it took.
    time_.AwaitUntil(mu_, absl::Condition(&stopping_), at + options_.interval_ns);
  }
}

}  // namespace podscope::agent::host
