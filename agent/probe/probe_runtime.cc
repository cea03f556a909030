#include "agent/probe/probe_runtime.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/probe/collective_links.h"
#include "common/chunk_codec.h"
#include "common/protocol_version.h"
#include "common/str_util.h"
#include "common/trace_slice.h"

namespace podscope::agent::probe {

namespace {

constexpr size_t kChunkEvents = 100'000;

// The parent of `pid` from /proc/<pid>/stat ("pid (comm) state ppid ..."; comm may hold spaces
// and parentheses, so the fields are read after the last ')').
int64_t ParentOf(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 1));
  std::string state;
  int64_t ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

}  // namespace

ProbeDescription DescribeThisProcess() {
  ProbeDescription d;
  d.identity = IdentityFromEnvironment([](const char* name) { return std::getenv(name); });
  d.device = DeviceFromEnvironment(d.identity.local_rank,
                                   [](const char* name) { return std::getenv(name); });
  d.pid = getpid();
  std::ifstream comm("/proc/self/comm");
  std::getline(comm, d.process_name);
  int64_t pid = d.pid;
  for (int depth = 0; depth < 32; ++depth) {
    pid = depth == 0 ? getppid() : ParentOf(pid);
    if (pid <= 0) break;
    d.ppid_chain.push_back(pid);
    if (pid == 1) break;
  }
  return d;
}

ProbeRuntime::ProbeRuntime(ProbeSettings settings, ProbeDescription description,
                           std::vector<EventSource*> sources, TimeNs (*host_now)())
    : settings_(std::move(settings)),
      host_now_(host_now != nullptr ? host_now : &common::HostNowNs),
      agent_client_(settings_.agent_socket, settings_.reconnect_interval_ns,
                    settings_.max_queue_bytes, this),
      description_(std::move(description)),
      sources_(std::move(sources)) {}

ProbeRuntime::~ProbeRuntime() { Stop(); }

void ProbeRuntime::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { WindowLoop(); });
  watch_thread_ = std::thread([this] { WatchLoop(); });
  agent_client_.Start();
}

void ProbeRuntime::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  if (watch_thread_.joinable()) watch_thread_.join();
  agent_client_.Stop();
}

void ProbeRuntime::AddWatchSource(WatchSource* source) {
  bool on = false;
  {
    absl::MutexLock lock(&mu_);
    watch_sources_.push_back(source);
    on = watching_;
  }
  source->SetWatching(on);
}

void ProbeRuntime::SetDeviceDescriber(DeviceDescriber describer) {
  absl::MutexLock lock(&mu_);
  device_describer_ = std::move(describer);
}

void ProbeRuntime::SetClockReader(std::function<void(GpuClockMap*)> reader) {
  absl::MutexLock lock(&mu_);
  clock_reader_ = std::move(reader);
}

void ProbeRuntime::OnWelcome(const v1::ProbeWelcome& welcome) {
  SetWatching(settings_.watch && welcome.watch());
}

void ProbeRuntime::OnDisconnected() { SetWatching(false); }

void ProbeRuntime::SetWatching(bool on) {
  std::vector<WatchSource*> sources;
  {
    absl::MutexLock lock(&mu_);
    if (watching_ == on) return;
    watching_ = on;
    sources = watch_sources_;
  }
  for (WatchSource* s : sources) s->SetWatching(on);
}

void ProbeRuntime::WatchLoop() {
  const auto on = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || watching_; };
  const auto off = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !watching_; };
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.Await(absl::Condition(&on));
    if (stopping_) return;
    mu_.AwaitWithTimeout(absl::Condition(&off),
                         absl::Nanoseconds(settings_.watch_flush_interval_ns));
    if (stopping_ || !watching_) continue;
    mu_.Unlock();
    FlushWatch();
    mu_.Lock();
  }
}

bool ProbeRuntime::FlushWatch() {
  absl::MutexLock flush(&flush_mu_);
  std::vector<WatchSource*> sources;
  std::function<void(GpuClockMap*)> reader;
  {
    absl::MutexLock lock(&mu_);
    sources = watch_sources_;
    reader = clock_reader_;
  }
  if (reader) reader(&watch_clock_);
  const TimeNs now = host_now_();
  WatchHarvest h;
  for (WatchSource* s : sources) s->TakeWatch(now, watch_clock_, &h);
  if (h.collectives.empty() && h.steps.empty() && h.progress.empty()) return false;
  v1::ProbeMessage m;
  v1::ProbeWatch* w = m.mutable_watch();
  w->set_now_ns(now);
  w->set_dropped(h.dropped);
  for (const common::CollectiveArrival& a : h.collectives) {
    v1::ProbeWatchCollective* c = w->add_collectives();
    c->set_communicator(a.communicator);
    c->set_sequence(a.sequence);
    c->set_op(static_cast<uint32_t>(a.op));
    c->set_nranks(a.nranks);
    c->set_bytes(a.bytes);
    c->set_enqueue_ns(a.enqueue_ns);
    c->set_start_ns(a.start_ns);
    c->set_end_ns(a.end_ns);
  }
  for (const WatchStepMark& s : h.steps) {
    v1::ProbeWatchStep* step = w->add_steps();
    step->set_step(s.step);
    step->set_start_ns(s.start_ns);
    step->set_end_ns(s.end_ns);
  }
  for (const common::RankProgress& p : h.progress) {
    v1::ProbeWatchProgress* q = w->add_progress();
    q->set_communicator(p.communicator);
    q->set_nranks(p.nranks);
    q->set_entered_sequence(p.entered_sequence);
    q->set_entered_ns(p.entered_ns);
    q->set_entered_op(static_cast<uint32_t>(p.entered_op));
    q->set_entered_bytes(p.entered_bytes);
    q->set_completed_sequence(p.completed_sequence);
    q->set_completed_ns(p.completed_ns);
  }
  // Not connected: nothing queues up for an agent that may never come (it is dropped).
  return agent_client_.connected() && agent_client_.Send(m);
}

void ProbeRuntime::AddSource(EventSource* source) {
  absl::MutexLock lock(&mu_);
  sources_.push_back(source);
}

void ProbeRuntime::AddFeature(const std::string& feature) {
  {
    absl::MutexLock lock(&mu_);
    auto& f = description_.features;
    if (std::find(f.begin(), f.end(), feature) != f.end()) return;
    f.push_back(feature);
  }
  Reregister();
}

void ProbeRuntime::AddWarning(const std::string& warning) {
  {
    absl::MutexLock lock(&mu_);
    common::StrAppend(&description_.warnings, description_.warnings.empty() ? "" : "; ", warning);
  }
  Reregister();
}

void ProbeRuntime::Reregister() {
  // Each connection starts with a registration; one under way hears of the change at once.
  if (!agent_client_.connected()) return;
  v1::ProbeMessage m;
  *m.mutable_register_() = Registration();
  agent_client_.Send(m, /*control=*/true);
}

uint64_t ProbeRuntime::windows_done() const {
  absl::MutexLock lock(&mu_);
  return windows_done_;
}

v1::ProbeRegister ProbeRuntime::Registration() {
  absl::MutexLock lock(&mu_);
  v1::ProbeRegister r;
  r.set_protocol_major(common::kProbeProtocolMajor);
  r.set_protocol_minor(common::kProbeProtocolMinor);
  r.set_pid(description_.pid);
  for (int64_t p : description_.ppid_chain) r.add_ppid_chain(p);
  r.set_rank(description_.identity.rank);
  r.set_local_rank(description_.identity.local_rank);
  r.set_world_size(description_.identity.world_size);
  r.set_job(description_.identity.job);
  r.set_device(description_.device);
  for (const std::string& f : description_.features) r.add_features(f);
  if (!recording_.empty()) r.add_open_captures(recording_);
  r.set_warnings(description_.warnings);
  return r;
}

void ProbeRuntime::OnArm(const v1::ProbeArm& arm) {
  std::string refusal;
  {
    absl::MutexLock lock(&mu_);
    // An agent that restarted re-arms what it lost: the window under way is the same one, and
    // what it streamed goes again.
    if (window_ != nullptr && window_->arm.capture_id() == arm.capture_id()) {
      window_->resend = true;
      return;
    }
    if (arm.capture_id() == last_done_) return;  // already delivered
    if (window_ != nullptr) {
      refusal = common::StrCat("the probe is busy with capture ", window_->arm.capture_id());
    } else if (arm.stop_host_ns() <= arm.start_host_ns()) {
      refusal = common::StrCat("empty window: stop ", arm.stop_host_ns(), " is not after start ",
                               arm.start_host_ns());
    } else if (arm.stop_host_ns() <= host_now_()) {
      refusal = "the window was over before the probe was armed";
    } else {
      window_ = std::make_unique<Window>();
      window_->arm = arm;
    }
  }
  if (refusal.empty()) return;
  v1::ProbeCaptureStatus status;
  status.set_capture_id(arm.capture_id());
  status.set_error(refusal);
  SendStatus(status);
}

void ProbeRuntime::OnCancel(const v1::ProbeCancel& cancel) {
  {
    absl::MutexLock lock(&mu_);
    if (window_ == nullptr || window_->arm.capture_id() != cancel.capture_id()) return;
    window_->cancelled = true;
  }
}

void ProbeRuntime::OnRefused(const std::string& reason) {
  std::fprintf(stderr, "podscope probe: the agent refused this process: %s\n", reason.c_str());
}

void ProbeRuntime::SendStatus(const v1::ProbeCaptureStatus& status) {
  v1::ProbeMessage m;
  *m.mutable_status() = status;
  agent_client_.Send(m, /*control=*/true);
}

bool ProbeRuntime::SleepUntil(TimeNs deadline) {
  const auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || window_->cancelled;
  };
  while (!stop()) {
    const TimeNs left = deadline - host_now_();
    if (left <= 0) return true;
    mu_.AwaitWithTimeout(absl::Condition(&stop), absl::Nanoseconds(left));
  }
  return false;
}

void ProbeRuntime::WindowLoop() {
  const auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || window_ != nullptr;
  };
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(&work));
    if (stopping_) return;
    const v1::ProbeArm arm = window_->arm;
    Record(arm);
    window_.reset();
    recording_.clear();
    last_done_ = arm.capture_id();
    ++windows_done_;
  }
}

void ProbeRuntime::Record(const v1::ProbeArm& arm) {
  v1::ProbeCaptureStatus status;
  status.set_capture_id(arm.capture_id());
  if (!SleepUntil(arm.start_host_ns())) {
    status.set_cancelled(true);
    mu_.Unlock();
    SendStatus(status);
    mu_.Lock();
    return;
  }
  recording_ = arm.capture_id();
  const uint64_t max_events = arm.max_events() > 0
                                  ? std::min(arm.max_events(), settings_.max_events_per_window)
                                  : settings_.max_events_per_window;
  budget_.Reset(max_events);
  gpu_clock_.Clear();
  const std::vector<EventSource*> sources = sources_;
  const DeviceDescriber describer = device_describer_;
  common::WorkerInfo info;
  info.rank = description_.identity.rank;
  info.world_size = std::max(description_.identity.world_size, 0);
  info.local_rank = description_.identity.local_rank;
  info.pid = description_.pid;
  info.job = description_.identity.job;
  info.source = "probe";
  info.backend = "nccl";
  info.process_name = description_.process_name;

  mu_.Unlock();
  const TimeNs start = host_now_();
  for (EventSource* s : sources) s->OpenWindow(start, &budget_, &gpu_clock_);
  WindowOutput out{arm.capture_id(), info, describer};
  mu_.Lock();
  // Until the stop, what the sources recorded goes to the agent every interval, so that a window
  // of a million events is never held whole here.
  bool running = true;
  while (running) {
    const TimeNs next =
        settings_.stream_interval_ns > 0
            ? std::min(arm.stop_host_ns(), host_now_() + settings_.stream_interval_ns)
            : arm.stop_host_ns();
    running = SleepUntil(next) && next < arm.stop_host_ns();
    if (!running) break;
    const bool again = ArmedAgain();
    mu_.Unlock();
    if (again) Resend(&out);
    std::vector<Harvest> taken;
    for (EventSource* s : sources) taken.push_back(s->TakeRecorded());
    for (size_t i = 0; i < sources.size(); ++i) {
      if (sources[i]->name() == "cupti") AppendCommKernels(taken[i].trace, &out.comm_kernels);
    }
    Send(taken, /*keep=*/true, &out);
    mu_.Lock();
  }
  const bool cancelled = stopping_ || window_->cancelled;
  mu_.Unlock();
  const TimeNs stop = host_now_();
  for (EventSource* s : sources) s->CloseWindow(stop);
  if (!cancelled && settings_.harvest_grace_ns > 0) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(settings_.harvest_grace_ns));
  }
  status.set_actual_start_ns(start);
  status.set_actual_stop_ns(stop);
  std::string errors;
  std::vector<Harvest> harvests;
  for (EventSource* s : sources) {
    Harvest& h = harvests.emplace_back(s->TakeHarvest());
    if (!h.error.empty())
      common::StrAppend(&errors, errors.empty() ? "" : "; ", s->name(), ": ", h.error);
  }
  // NCCL's collectives and CUPTI's kernels describe the same operations: link them, the
  // collectives to kernels of the whole window (what went up while it ran too).
  const auto named = [&](std::string_view name) -> Harvest* {
    for (size_t i = 0; i < sources.size(); ++i) {
      if (sources[i]->name() == name) return &harvests[i];
    }
    return nullptr;
  };
  if (Harvest* cupti = named("cupti"), *nccl = named("nccl"); cupti != nullptr && nccl != nullptr) {
    AppendCommKernels(cupti->trace, &out.comm_kernels);
    LinkCollectivesToKernels(std::move(out.comm_kernels), &nccl->trace);
  }
  if (cancelled) {
    for (Harvest& h : harvests) h.trace = common::WorkerTrace();
  }
  bool again = false;
  {
    absl::MutexLock lock(&mu_);
    again = ArmedAgain();
  }
  if (again && !cancelled) Resend(&out);
  Send(harvests, /*keep=*/false, &out);
  status.set_events(out.events);
  status.set_dropped_events(out.dropped + budget_.dropped());
  for (const auto& [reason, n] : out.dropped_reasons) {
    v1::DroppedRecords* d = status.add_dropped_reasons();
    d->set_reason(reason);
    d->set_count(n);
  }
  status.set_chunks(out.chunks);
  status.set_cancelled(cancelled);
  status.set_error(errors);
  SendStatus(status);
  mu_.Lock();
}

bool ProbeRuntime::ArmedAgain() {
  const bool again = window_->resend;
  window_->resend = false;
  return again;
}

void ProbeRuntime::Resend(WindowOutput* out) {
  // A chunk the link's queue refuses now may never have reached the agent: counted as dropped
  // (the agent may hold it from the first time; the count errs on the side of loss).
  for (const auto& [m, events] : out->streamed) {
    if (!agent_client_.Send(m)) out->dropped += events;
  }
}

void ProbeRuntime::Send(std::vector<Harvest>& harvests, bool keep, WindowOutput* out) {
  for (Harvest& h : harvests) {
    out->dropped += h.dropped;
    for (const auto& [reason, n] : h.dropped_reasons) out->dropped_reasons[reason] += n;
    h.dropped_reasons.clear();
  }
  // Each piece names every device its window has run on so far: the agent keeps the latest.
  for (common::DeviceInfo& d : devices_.For(harvests, out->describer)) {
    const bool known = std::any_of(out->info.devices.begin(), out->info.devices.end(),
                                   [&d](const common::DeviceInfo& e) { return e.id == d.id; });
    if (!known) out->info.devices.push_back(std::move(d));
  }
  for (Harvest& h : harvests) {
    if (h.trace.Counts().Total() == 0) continue;
    h.trace.info = out->info;
    h.trace.SortByTime();
    for (common::WorkerTrace& part : common::SplitIntoChunks(std::move(h.trace), kChunkEvents)) {
      const uint64_t n = part.Counts().Total();
      v1::ProbeMessage m;
      common::EncodeChunk(part, common::ChunkHeader{out->capture_id, 0, out->chunks},
                          m.mutable_chunk());
      if (agent_client_.Send(m)) {
        out->events += n;
        ++out->chunks;
        if (keep) out->streamed.emplace_back(std::move(m), n);
      } else {
        out->dropped += n;  // the queue to the agent is full
      }
    }
    h.trace = common::WorkerTrace();
  }
}

}  // namespace podscope::agent::probe
