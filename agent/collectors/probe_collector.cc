#include "agent/collectors/probe_collector.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "agent/host/proc_stats.h"
#include "agent/watch/probe_watch.h"
#include "common/chunk_codec.h"
#include "common/dropped_records.h"
#include "common/parse_number.h"
#include "common/protocol_version.h"
#include "common/str_util.h"
#include "common/trace_slice.h"
#include "common/watch_wire.h"
#include "spdlog/spdlog.h"

namespace podscope::agent {

namespace {

bool ProcessGone(int64_t pid) {
  return pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// How the agent names a worker's process: the kernel's pid; for a probe in a PID namespace the
// agent cannot see (the kernel says 0), the pid it reports, a name only (never read in /proc).
int64_t PidOf(const common::PeerCredentials& peer, const v1::ProbeRegister& r) {
  return peer.pid > 0 ? peer.pid : r.pid();
}

// What names a probe's process inside the agent (its host samples, its unclaimed results): the
// kernel's pid, which outlives a reconnection; else its connection, because the pids probes
// report from their own namespaces collide (every pod may have a pid 1). Never a pid then.
int64_t ProcessKeyOf(ProbeConnectionId id, const common::PeerCredentials& peer) {
  return peer.pid > 0 ? peer.pid : -static_cast<int64_t>(id);
}

// The ancestors of `pid` (parent first, up to init) as far as `proc_root` tells them.
std::vector<int64_t> AncestorsOf(const std::string& proc_root, int64_t pid) {
  std::vector<int64_t> out;
  // A bound, for a tree that changes under the walk (a parent's pid reused).
  while (out.size() < 64) {
    const absl::StatusOr<int64_t> parent = host::ReadParentPid(proc_root, pid);
    if (!parent.ok() || *parent <= 0) break;
    out.push_back(*parent);
    if (*parent == 1) break;
    pid = *parent;
  }
  return out;
}

// The NVML index of a worker's GPU: the physical index the probe reported ("cuda:5"), else
// its local rank.
int GpuIndexOf(const v1::ProbeRegister& r) {
  const std::string& d = r.device();
  if (d.starts_with("cuda:")) {
    const absl::StatusOr<int64_t> index = common::ParseInt(std::string_view(d).substr(5));
    if (index.ok() && *index >= 0 && *index < 1024) return static_cast<int>(*index);
  }
  return std::max(r.local_rank(), 0);
}

// Whether a process with these ancestors was started by `worker`'s process. The probe's own
// ppid_chain is not used: it counts in the probe's PID namespace, which may be any pod's.
bool StartedBy(const std::vector<int64_t>& ancestors, const common::PeerCredentials& worker) {
  return worker.pid > 0 &&
         std::find(ancestors.begin(), ancestors.end(), worker.pid) != ancestors.end();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ProbeCollector>> ProbeCollector::Start(
    ProbeCollectorOptions options, const AgentClock& clock,
    std::unique_ptr<host::HostSampler> sampler) {
  std::unique_ptr<ProbeCollector> c(
      new ProbeCollector(std::move(options), clock, std::move(sampler)));
  absl::StatusOr<std::unique_ptr<ProbeServer>> server =
      ProbeServer::Listen(c->options_.server, c.get());
  if (!server.ok()) {
    const std::string why(server.status().message());
    const bool denied = server.status().code() == absl::StatusCode::kPermissionDenied ||
                        common::Contains(why, "Permission denied");
    return absl::Status(
        server.status().code(),
        common::StrCat(
            "probe socket ", c->options_.server.socket_path, ": ", why,
            denied ? " (run the agent as root, or give --probe-socket a path it may create)" : ""));
  }
  // Held before it runs: a probe that registers at once is answered through server_.
  c->server_ = *std::move(server);
  c->server_->Run();
  return c;
}

ProbeCollector::ProbeCollector(ProbeCollectorOptions options, const AgentClock& clock,
                               std::unique_ptr<host::HostSampler> sampler)
    : options_(std::move(options)), clock_(clock), sampler_(std::move(sampler)) {}

ProbeCollector::~ProbeCollector() {
  if (server_ != nullptr) server_->Stop();
  absl::MutexLock lock(&mu_);
  for (auto& [id, c] : captures_) {
    if (c.sampling && sampler_ != nullptr) sampler_->Release();
  }
}

void ProbeCollector::SetWorkersChangedCallback(std::function<void()> callback) {
  absl::MutexLock lock(&mu_);
  workers_changed_ = std::move(callback);
}

void ProbeCollector::NotifyWorkersChanged() {
  std::function<void()> callback;
  {
    absl::MutexLock lock(&mu_);
    callback = workers_changed_;
  }
  if (callback) callback();
}

std::vector<WorkerIdentity> ProbeCollector::Workers() const {
  absl::MutexLock lock(&mu_);
  std::vector<WorkerIdentity> out;
  for (const auto& [id, p] : probes_) {
    if (p.rank < 0) continue;
    const v1::ProbeRegister& r = p.registration;
    WorkerIdentity w;
    w.rank = p.rank;
    w.local_rank = r.local_rank() >= 0 ? r.local_rank() : 0;
    w.world_size = std::max(r.world_size(), p.rank + 1);
    w.pid = PidOf(p.peer, r);
    w.job = r.job();
    w.host = options_.host;
    w.device = !r.device().empty() ? r.device() : common::StrCat("cuda:", w.local_rank);
    out.push_back(std::move(w));
  }
  std::sort(out.begin(), out.end(),
            [](const WorkerIdentity& a, const WorkerIdentity& b) { return a.rank < b.rank; });
  return out;
}

void ProbeCollector::AssignRanks() {
  std::map<int32_t, const Probe*> served;
  for (auto& [id, p] : probes_) {
    p.rank = -1;
    p.ignored.clear();
  }
  // Launchers' ranks first, in registration order; then the processes that have none.
  for (int pass = 0; pass < 2; ++pass) {
    for (auto& [id, p] : probes_) {
      const v1::ProbeRegister& r = p.registration;
      if ((pass == 0) != (r.rank() >= 0)) continue;
      // A process a worker started (a compile worker, a dataloader that touched CUDA) inherits
      // the worker's environment and probe; it is not a worker of its own.
      for (const auto& [rank, other] : served) {
        if (StartedBy(p.ancestors, other->peer)) {
          p.ignored = common::StrCat("a child of rank ", rank, "'s process");
          break;
        }
      }
      if (!p.ignored.empty()) continue;
      int32_t rank = r.rank();
      if (rank >= 0 && served.contains(rank)) {
        p.ignored = common::StrCat("rank ", rank, " is served by pid ",
                                   PidOf(served[rank]->peer, served[rank]->registration));
        continue;
      }
      if (rank < 0) {
        rank = std::max(r.local_rank(), 0);
        while (served.contains(rank)) ++rank;
      }
      p.rank = rank;
      served[rank] = &p;
    }
  }
}

ProbeConnectionId ProbeCollector::ProbeOfRank(int32_t rank) const {
  for (const auto& [id, p] : probes_) {
    if (p.rank == rank) return id;
  }
  return 0;
}

void ProbeCollector::OnRegister(ProbeConnectionId id, const common::PeerCredentials& peer,
                                const v1::ProbeRegister& r) {
  std::vector<v1::ProbeArm> rearm;
  // Read before the lock: /proc takes a while.
  std::vector<int64_t> ancestors;
  if (peer.pid > 0) ancestors = AncestorsOf(options_.proc_root, peer.pid);
  // /proc unreadable (hidepid) but the probe in the agent's own PID namespace (its pid is the
  // kernel's): its own chain counts in the same pids.
  if (ancestors.empty() && peer.pid > 0 && r.pid() == peer.pid)
    ancestors.assign(r.ppid_chain().begin(), r.ppid_chain().end());
  {
    absl::MutexLock lock(&mu_);
    const bool again = probes_.contains(id);
    Probe& p = probes_[id];
    const bool features_changed =
        again && !std::equal(p.registration.features().begin(), p.registration.features().end(),
                             r.features().begin(), r.features().end());
    p.peer = peer;
    p.registration = r;
    p.ancestors = std::move(ancestors);
    AssignRanks();
    const int64_t pid = PidOf(peer, r);
    std::string features;
    for (const std::string& f : r.features())
      common::StrAppend(&features, features.empty() ? "" : ",", f);
    if (!again) {
      spdlog::info("probe registered: pid {} rank {} job '{}' features [{}]{}", pid, p.rank,
                   r.job(), features,
                   p.ignored.empty() ? "" : common::StrCat(" (not served: ", p.ignored, ")"));
    } else if (features_changed) {  // e.g. NCCL's init, after the probe first registered
      spdlog::info("probe pid {} rank {} job '{}' features now [{}]", pid, p.rank, r.job(),
                   features);
    }
    if (!r.warnings().empty()) spdlog::warn("probe pid {}: {}", pid, r.warnings());
    if (peer.pid <= 0 && !said_foreign_pid_) {
      said_foreign_pid_ = true;
      spdlog::warn(
          "probe pid {} is in a PID namespace this agent cannot see (SO_PEERCRED gives no pid): "
          "workers such as this one get no CPU samples of their own, and their child processes "
          "are told from them by rank only; run the agent in the node's PID namespace (hostPID) "
          "for both",
          pid);
    }
    if (sampler_ != nullptr && p.rank >= 0) {
      sampler_->Watch(ProcessKeyOf(id, peer), GpuIndexOf(r),
                      peer.pid > 0 ? host::PidScope::kProcRoot : host::PidScope::kForeign);
    }
    // A probe that reconnected is armed again for what it still owes (a repeated arm of the
    // window under way changes nothing on its side).
    for (auto& [capture_id, c] : captures_) {
      auto w = c.workers.find(p.rank);
      if (w == c.workers.end() || w->second.status.has_value() || !w->second.error.empty())
        continue;
      w->second.probe = id;
      v1::ProbeArm& arm = rearm.emplace_back();
      arm.set_capture_id(capture_id);
      arm.set_start_host_ns(clock_.ToHost(c.window.start_ns));
      arm.set_stop_host_ns(clock_.ToHost(c.window.stop_ns));
      arm.set_max_events(c.window.max_events_per_worker);
    }
  }
  v1::AgentToProbe welcome;
  {
    absl::MutexLock lock(&mu_);
    welcome = Welcome();
  }
  server_->Send(id, welcome);
  for (const v1::ProbeArm& arm : rearm) {
    v1::AgentToProbe command;
    *command.mutable_arm() = arm;
    server_->Send(id, command);
  }
  NotifyWorkersChanged();
}

v1::AgentToProbe ProbeCollector::Welcome() const {
  v1::AgentToProbe welcome;
  welcome.mutable_welcome()->set_protocol_major(common::kProbeProtocolMajor);
  welcome.mutable_welcome()->set_protocol_minor(common::kProbeProtocolMinor);
  welcome.mutable_welcome()->set_watch(watch_sink_ != nullptr);
  return welcome;
}

void ProbeCollector::StartWatch(WatchSink* sink) {
  std::vector<ProbeConnectionId> ids;
  v1::AgentToProbe welcome;
  {
    absl::MutexLock lock(&mu_);
    watch_sink_ = sink;
    welcome = Welcome();
    for (const auto& [id, p] : probes_) ids.push_back(id);
  }
  // Probes already here hear of it at once (a welcome again changes nothing else).
  for (ProbeConnectionId id : ids) server_->Send(id, welcome);
}

void ProbeCollector::StopWatch() { StartWatch(nullptr); }

void ProbeCollector::OnWatch(ProbeConnectionId id, const v1::ProbeWatch& message) {
  ProbeWatchData data = DecodeProbeWatch(message);
  std::vector<common::StepSummary> steps;
  // Under the lock, sink calls included: StopWatch returns only once no call is under way (the
  // sink never calls back into the collector).
  absl::MutexLock lock(&mu_);
  auto it = probes_.find(id);
  if (watch_sink_ == nullptr || it == probes_.end() || it->second.rank < 0) return;
  Probe& p = it->second;
  const std::string& job = p.registration.job();
  // Losses are said once as they happen, not every second: the probe's ring overran (its flush
  // fell behind), or the process sent records that break a bound (the first time).
  if (data.probe_dropped > p.watch_lost) {
    spdlog::warn(
        "probe pid {} (rank {}): {} watch records (collectives, step marks) lost so far: its "
        "buffers overran between flushes",
        PidOf(p.peer, p.registration), p.rank, data.probe_dropped);
    p.watch_lost = data.probe_dropped;
  }
  if (data.refused > 0 && p.watch_refused == 0) {
    spdlog::warn(
        "probe pid {} (rank {}): {} watch records dropped for breaking a bound (times, ops or "
        "sizes)",
        PidOf(p.peer, p.registration), p.rank, data.refused);
  }
  p.watch_refused += data.refused;
  if (p.steps == nullptr) p.steps = std::make_unique<StepAssembler>();
  p.steps->Add(data.collectives, data.steps, data.now_ns, &steps);
  // Probes record on the host clock; watch data goes out on the agent's.
  const auto to_agent = [&](TimeNs t) { return clock_.FromHost(t); };
  for (common::StepSummary& s : steps) {
    if (s.end_ns - s.start_ns > common::kMaxWatchSpanNs) continue;  // a pause of days: no step
    s.rank = p.rank;
    s.start_ns = to_agent(s.start_ns);
    s.end_ns = to_agent(s.end_ns);
    for (common::CollectiveArrival& a : s.collectives) {
      a.enqueue_ns = to_agent(a.enqueue_ns);
      a.start_ns = to_agent(a.start_ns);
      a.end_ns = to_agent(a.end_ns);
    }
    watch_sink_->Step(job, s);
  }
  for (common::RankProgress& r : data.progress) {
    r.rank = p.rank;
    if (r.entered_sequence >= 0) r.entered_ns = to_agent(r.entered_ns);
    if (r.completed_sequence >= 0) r.completed_ns = to_agent(r.completed_ns);
    watch_sink_->Progress(job, r);
  }
}

void ProbeCollector::OnDisconnect(ProbeConnectionId id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = probes_.find(id);
    if (it == probes_.end()) return;
    spdlog::info("probe of pid {} (rank {}) disconnected",
                 PidOf(it->second.peer, it->second.registration), it->second.rank);
    if (sampler_ != nullptr) sampler_->Unwatch(ProcessKeyOf(id, it->second.peer));
    probes_.erase(it);
    AssignRanks();
  }
  NotifyWorkersChanged();
}

void ProbeCollector::AddChunk(WorkerCapture& w, v1::TraceChunk&& chunk) {
  if (!w.error.empty()) return;
  if (w.sequences.contains(chunk.sequence())) return;  // sent again after a re-arm
  const size_t bytes = chunk.ByteSizeLong();
  if (w.bytes + bytes > options_.max_worker_bytes) {
    w.error = common::StrCat("the probe sent more than ", options_.max_worker_bytes,
                             " bytes of chunks for this capture");
    w.pieces.clear();
    return;
  }
  common::WorkerTrace piece;
  if (absl::Status s = common::AppendChunk(chunk, &piece); !s.ok()) {
    w.error =
        common::StrCat("chunk ", chunk.sequence(), " from the probe: ", std::string(s.message()));
    w.pieces.clear();
    return;
  }
  w.sequences.insert(chunk.sequence());
  w.events += piece.Counts().Total();
  w.bytes += bytes;
  // A probe that streams its window names the devices seen so far in each chunk: the latest
  // says the most (a chunk sent again after a re-arm is older).
  if (!w.info || chunk.sequence() >= w.info_sequence) {
    w.info = piece.info;
    w.info_sequence = chunk.sequence();
  }
  w.pieces.push_back(std::move(piece));
}

void ProbeCollector::OnChunk(ProbeConnectionId id, v1::TraceChunk&& chunk) {
  absl::MutexLock lock(&mu_);
  auto p = probes_.find(id);
  if (p == probes_.end()) return;
  if (auto c = captures_.find(chunk.capture_id()); c != captures_.end()) {
    if (auto w = c->second.workers.find(p->second.rank); w != c->second.workers.end()) {
      AddChunk(w->second, std::move(chunk));
      return;
    }
  }
  // Not (yet) a capture of this agent: kept, within a bound, for an agent that restarted and
  // will be asked for it again.
  const size_t bytes = chunk.ByteSizeLong();
  while (!unclaimed_.empty() && unclaimed_bytes_ + bytes > options_.max_unclaimed_bytes) {
    spdlog::warn(
        "dropping unclaimed chunks of capture {} from pid {} (the unclaimed store is full)",
        unclaimed_.front().capture_id, unclaimed_.front().pid);
    unclaimed_bytes_ -= unclaimed_.front().bytes;
    unclaimed_.erase(unclaimed_.begin());
  }
  if (bytes > options_.max_unclaimed_bytes) return;
  const int64_t process = ProcessKeyOf(id, p->second.peer);
  auto u = std::find_if(unclaimed_.begin(), unclaimed_.end(), [&](const Unclaimed& x) {
    return x.capture_id == chunk.capture_id() && x.process == process;
  });
  if (u == unclaimed_.end()) {
    u = unclaimed_.insert(
        unclaimed_.end(),
        Unclaimed{chunk.capture_id(), process, PidOf(p->second.peer, p->second.registration)});
  }
  u->bytes += bytes;
  unclaimed_bytes_ += bytes;
  u->chunks.push_back(std::move(chunk));
}

void ProbeCollector::OnStatus(ProbeConnectionId id, const v1::ProbeCaptureStatus& status) {
  {
    absl::MutexLock lock(&mu_);
    auto p = probes_.find(id);
    if (p == probes_.end()) return;
    auto c = captures_.find(status.capture_id());
    if (c != captures_.end()) {
      if (auto w = c->second.workers.find(p->second.rank); w != c->second.workers.end())
        w->second.status = status;
    } else {
      const int64_t process = ProcessKeyOf(id, p->second.peer);
      auto u = std::find_if(unclaimed_.begin(), unclaimed_.end(), [&](const Unclaimed& x) {
        return x.capture_id == status.capture_id() && x.process == process;
      });
      if (u == unclaimed_.end())
        u = unclaimed_.insert(
            unclaimed_.end(),
            Unclaimed{status.capture_id(), process, PidOf(p->second.peer, p->second.registration)});
      u->status = status;
    }
  }
}

absl::Status ProbeCollector::Arm(const CaptureWindow& window) {
  std::vector<std::pair<ProbeConnectionId, v1::AgentToProbe>> commands;
  {
    absl::MutexLock lock(&mu_);
    if (captures_.contains(window.capture_id)) return absl::OkStatus();
    Capture& c = captures_[window.capture_id];
    c.window = window;
    for (int32_t rank : window.ranks) {
      WorkerCapture& w = c.workers[rank];
      w.probe = ProbeOfRank(rank);
      if (w.probe == 0) {
        w.error = common::StrCat("no probe is registered for rank ", rank,
                                 " on this node (did the process exit?)");
        continue;
      }
      const int64_t process = ProcessKeyOf(w.probe, probes_.at(w.probe).peer);
      // What a probe sent before this agent knew the capture (it restarted) is claimed now.
      for (auto u = unclaimed_.begin(); u != unclaimed_.end();) {
        if (u->capture_id != window.capture_id || u->process != process) {
          ++u;
          continue;
        }
        for (v1::TraceChunk& chunk : u->chunks) AddChunk(w, std::move(chunk));
        if (u->status.has_value()) w.status = u->status;
        unclaimed_bytes_ -= u->bytes;
        u = unclaimed_.erase(u);
      }
      v1::AgentToProbe command;
      v1::ProbeArm* arm = command.mutable_arm();
      arm->set_capture_id(window.capture_id);
      arm->set_start_host_ns(clock_.ToHost(window.start_ns));
      arm->set_stop_host_ns(clock_.ToHost(window.stop_ns));
      arm->set_max_events(window.max_events_per_worker);
      commands.emplace_back(w.probe, std::move(command));
    }
  }
  for (const auto& [probe, command] : commands) {
    if (!server_->Send(probe, command)) {
      absl::MutexLock lock(&mu_);
      for (auto& [rank, w] : captures_[window.capture_id].workers) {
        if (w.probe == probe && w.error.empty())
          w.error = "the probe disconnected before it could be armed";
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ProbeCollector::Start(std::string_view capture_id) {
  absl::MutexLock lock(&mu_);
  auto c = captures_.find(capture_id);
  if (c == captures_.end() || c->second.sampling) return absl::OkStatus();
  c->second.sampling = true;
  if (sampler_ != nullptr) sampler_->Acquire();
  return absl::OkStatus();
}

absl::Status ProbeCollector::Stop(std::string_view capture_id) {
  absl::MutexLock lock(&mu_);
  auto c = captures_.find(capture_id);
  if (c == captures_.end() || !c->second.sampling) return absl::OkStatus();
  c->second.sampling = false;
  if (sampler_ != nullptr) sampler_->Release();
  // A cancel before the window's end reaches the probes too (Stop comes early on cancel; a
  // Stop at the end, however its timer fires, is no cancel).
  if (clock_.Now() + 50'000'000 < c->second.window.stop_ns) {
    for (const auto& [rank, w] : c->second.workers) {
      if (w.probe == 0 || w.status.has_value()) continue;
      v1::AgentToProbe command;
      command.mutable_cancel()->set_capture_id(std::string(capture_id));
      server_->Send(w.probe, command);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<CollectedWorker> ProbeCollector::Drain(std::string_view capture_id, int32_t rank) {
  mu_.Lock();
  auto c = captures_.find(capture_id);
  if (c == captures_.end()) {
    mu_.Unlock();
    return absl::NotFoundError(common::StrCat("capture ", capture_id, " was not armed here"));
  }
  auto wi = c->second.workers.find(rank);
  if (wi == c->second.workers.end()) {
    mu_.Unlock();
    return absl::NotFoundError(common::StrCat("rank ", rank, " is not in capture ", capture_id));
  }
  WorkerCapture& w = wi->second;
  const CaptureWindow window = c->second.window;
  int64_t pid = 0;
  int64_t process = 0;
  pid_t kernel_pid = 0;  // 0: the agent cannot tell whether the process lives
  bool known = false;    // the probe was connected when the drain began
  if (auto p = probes_.find(w.probe); p != probes_.end()) {
    known = true;
    pid = PidOf(p->second.peer, p->second.registration);
    process = ProcessKeyOf(w.probe, p->second.peer);
    kernel_pid = p->second.peer.pid;
  }
  const TimeNs deadline = window.stop_ns + options_.drain_timeout_ns;
  while (w.error.empty() && !w.status.has_value()) {
    const bool connected = probes_.contains(w.probe);
    // A probe whose process the agent cannot see (no kernel pid) may still reconnect: it gets
    // until the deadline.
    if (!connected && (!known || (kernel_pid > 0 && ProcessGone(kernel_pid)))) {
      w.error = "the training process exited before its probe delivered the window";
      break;
    }
    const TimeNs left = deadline - clock_.Now();
    if (left <= 0) {
      w.error = common::StrCat("the probe of rank ", rank, " sent no status within ",
                               options_.drain_timeout_ns / 1'000'000'000, " s of the window's end",
                               connected ? "" : " (it is disconnected)");
      break;
    }
    // Woken by the status, an error or the probe coming or going; and twice a second to see
    // whether a disconnected probe's process is gone.
    const auto news = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !w.error.empty() || w.status.has_value() || probes_.contains(w.probe) != connected;
    };
    clock_.SleepUntil(clock_.Now() + std::min<TimeNs>(left, 500'000'000), mu_,
                      absl::Condition(&news));
  }
  CollectedWorker out;
  out.rank = rank;
  if (!w.error.empty()) {
    out.error = w.error;
    mu_.Unlock();
    return out;
  }
  const v1::ProbeCaptureStatus& s = *w.status;
  out.dropped_events = s.dropped_events();
  out.dropped_reasons = common::BoundedDroppedReasons(s.dropped_reasons());
  // Events the probe sent that never arrived (chunks lost with a connection): dropped too.
  if (s.events() > w.events) out.dropped_events += s.events() - w.events;
  out.actual_start_ns = clock_.FromHost(s.actual_start_ns());
  out.actual_stop_ns = clock_.FromHost(s.actual_stop_ns());
  if (s.cancelled()) {
    out.error = "cancelled";
    mu_.Unlock();
    return out;
  }
  if (!s.error().empty()) {
    out.error = common::StrCat("probe: ", s.error());
    mu_.Unlock();
    return out;
  }
  out.pieces = std::move(w.pieces);
  w.pieces.clear();
  if (sampler_ != nullptr && process != 0) {
    common::WorkerTrace samples;
    samples.host_samples = sampler_->SamplesFor(process, s.actual_start_ns(), s.actual_stop_ns());
    samples.memory_events =
        sampler_->GpuMemoryFor(process, s.actual_start_ns(), s.actual_stop_ns());
    if (samples.host_samples.size() > 0 || samples.memory_events.size() > 0)
      out.pieces.push_back(std::move(samples));
  }
  const common::WorkerInfo info = w.info.value_or(common::WorkerInfo());
  mu_.Unlock();
  Describe(rank, pid, info, &out.pieces);
  return out;
}

absl::StatusOr<std::vector<common::WorkerTrace>> ProbeCollector::TakeRecorded(
    std::string_view capture_id, int32_t rank) {
  std::vector<common::WorkerTrace> pieces;
  common::WorkerInfo info;
  int64_t pid = 0;
  {
    absl::MutexLock lock(&mu_);
    auto c = captures_.find(capture_id);
    if (c == captures_.end())
      return absl::NotFoundError(common::StrCat("capture ", capture_id, " was not armed here"));
    auto wi = c->second.workers.find(rank);
    if (wi == c->second.workers.end())
      return absl::NotFoundError(common::StrCat("rank ", rank, " is not in capture ", capture_id));
    WorkerCapture& w = wi->second;
    if (!w.error.empty()) return pieces;  // Drain says what went wrong
    pieces = std::move(w.pieces);
    w.pieces.clear();
    info = w.info.value_or(common::WorkerInfo());
    if (auto p = probes_.find(w.probe); p != probes_.end())
      pid = PidOf(p->second.peer, p->second.registration);
  }
  Describe(rank, pid, std::move(info), &pieces);
  return pieces;
}

void ProbeCollector::Describe(int32_t rank, int64_t pid, common::WorkerInfo info,
                              std::vector<common::WorkerTrace>* pieces) const {
  if (pieces->empty()) return;
  const std::vector<WorkerIdentity> workers = Workers();
  const auto me = std::find_if(workers.begin(), workers.end(),
                               [rank](const WorkerIdentity& x) { return x.rank == rank; });
  info.rank = rank;
  info.host = options_.host;
  info.source = common::StrCat("probe pid ", pid);
  if (me != workers.end()) {
    info.world_size = me->world_size;
    info.local_rank = me->local_rank;
    info.pid = me->pid;
    info.job = me->job;
  }
  // Probes record on the host clock; the capture's clock model is the agent's.
  const bool skewed = clock_.skew().offset_ns != 0 || clock_.skew().drift_ppb != 0;
  for (common::WorkerTrace& piece : *pieces) {
    piece.info = info;
    if (skewed) common::MapTimes(clock_.skew(), &piece);
  }
}

size_t ProbeCollector::probes() const {
  absl::MutexLock lock(&mu_);
  return probes_.size();
}

size_t ProbeCollector::unclaimed_results() const {
  absl::MutexLock lock(&mu_);
  return static_cast<size_t>(
      std::count_if(unclaimed_.begin(), unclaimed_.end(),
                    [](const Unclaimed& u) { return u.status.has_value(); }));
}

void ProbeCollector::Forget(std::string_view capture_id) {
  absl::MutexLock lock(&mu_);
  auto c = captures_.find(capture_id);
  if (c == captures_.end()) return;
  if (c->second.sampling && sampler_ != nullptr) sampler_->Release();
  captures_.erase(c);
}

}  // namespace podscope::agent
