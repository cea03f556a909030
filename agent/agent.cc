#include "agent/agent.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <optional>
#include <random>

#include "agent/reachability.h"
#include "common/protocol_version.h"
#include "common/str_util.h"
#include "podscope/version.h"
#include "spdlog/spdlog.h"

namespace podscope::agent {

namespace {

std::chrono::system_clock::time_point DeadlineIn(int64_t ns) {
  return std::chrono::system_clock::now() + std::chrono::nanoseconds(ns);
}

std::string MachineHostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "unknown-host";
  return name;
}

}  // namespace

// One session's Connect call. Reads are always pending (each message goes to the agent as it
// arrives); writes go through a bounded queue, one in flight at a time.
class Agent::ControlStream
    : public grpc::ClientBidiReactor<v1::AgentMessage, v1::CoordinatorMessage> {
 public:
  static constexpr size_t kMaxQueued = 4096;

  explicit ControlStream(Agent& agent) : agent_(agent) {}

  void Begin(grpc::ClientContext* context, const v1::AgentMessage& hello) {
    agent_.stub_->async()->Connect(context, this);
    Enqueue(hello);
    StartRead(&in_);
    StartCall();
  }
  bool Enqueue(const v1::AgentMessage& message) {
    absl::MutexLock lock(&mu_);
    if (done_ || broken_ || out_.size() >= kMaxQueued) return false;
    out_.push_back(message);
    if (!writing_) {
      writing_ = true;
      StartWrite(&out_.front());
    }
    return true;
  }
  // Blocks until the call is over; its final status.
  grpc::Status Wait() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
    return status_;
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    out_.pop_front();
    if (ok && !out_.empty()) {
      StartWrite(&out_.front());
      return;
    }
    writing_ = false;
    if (!ok) {
      broken_ = true;  // the read side sees the end and the session closes
      out_.clear();
    }
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;  // the call is ending: OnDone follows
    agent_.OnMessage(*this, in_);
    StartRead(&in_);
  }
  void OnDone(const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    done_ = true;
    status_ = status;
  }

 private:
  Agent& agent_;
  v1::CoordinatorMessage in_;
  absl::Mutex mu_;
  std::deque<v1::AgentMessage> out_
      ABSL_GUARDED_BY(mu_);  // front() is being written while writing_
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

std::string Agent::NewInstanceId() {
  std::random_device entropy;
  const uint64_t id = (static_cast<uint64_t>(entropy()) << 32) ^ entropy();
  return fmt::format("{:016x}", id);
}

Agent::Agent(AgentOptions options, const AgentClock& clock,
             std::vector<std::unique_ptr<Collector>> collectors)
    : options_(std::move(options)),
      clock_(clock),
      collectors_(std::move(collectors)),
      heartbeat_interval_ns_(options_.heartbeat_interval_ns),
      clock_sync_interval_ns_(options_.clock_sync_interval_ns),
      watch_queue_(options_.watch_queue) {
  if (options_.host.empty()) options_.host = MachineHostName();
  if (options_.agent_id.empty()) options_.agent_id = common::StrCat(options_.host, "-", getpid());
  for (const std::unique_ptr<Collector>& c : collectors_) {
    c->SetWorkersChangedCallback([this] { OnWorkersChanged(); });
  }
  if (options_.capture.start_timer == nullptr) {
    own_start_timer_ = std::make_unique<StartTimer>(clock_.host_time());
    options_.capture.start_timer = own_start_timer_.get();
  }
}

Agent::~Agent() {
  Stop();
  // Collectors go first, while everything they may call back into is still alive: a probe
  // collector's server thread reports worker changes until it is joined. A report under way
  // finishes before the flag drops; later ones see it and return.
  {
    absl::MutexLock lock(&workers_changed_mu_);
    collectors_alive_ = false;
  }
  collectors_.clear();
}

std::shared_ptr<grpc::ChannelCredentials> Agent::Credentials(grpc::ChannelArguments* args) const {
  if (options_.tls.cert.empty()) return grpc::InsecureChannelCredentials();
  // The files are re-read every minute: a renewed certificate is used from the next connection.
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      options_.tls.key, options_.tls.cert, options_.tls.ca, /*refresh_interval_sec=*/60);
  grpc::experimental::TlsChannelCredentialsOptions tls;
  tls.set_certificate_provider(provider);
  tls.watch_root_certs();
  tls.watch_identity_key_cert_pairs();
  // The coordinator's certificate must chain to our CA and hold the name we dialled (or
  // --tls-server-name): an impostor with another valid certificate of the CA is refused too.
  tls.set_verify_server_certs(true);
  tls.set_certificate_verifier(std::make_shared<grpc::experimental::HostNameCertificateVerifier>());
  if (!options_.tls_server_name.empty()) args->SetSslTargetNameOverride(options_.tls_server_name);
  return grpc::experimental::TlsCredentials(tls);
}

void Agent::Start() {
  grpc::ChannelArguments args;
  // One TCP connection per agent even when a process hosts many (the scale benchmark).
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 20'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Come back quickly after a coordinator restart; our own loop adds the jittered backoff.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2'000);
  args.SetMaxSendMessageSize(64 << 20);
  channel_ = grpc::CreateCustomChannel(options_.coordinator, Credentials(&args), args);
  stub_ = v1::AgentService::NewStub(channel_);
  connection_thread_ = std::thread([this] { ConnectionLoop(); });
  timer_thread_ = std::thread([this] { TimerLoop(); });
  if (options_.watch) {
    watch_sender_ =
        std::make_unique<WatchSender>(options_.watch_sender, options_.agent_id, stub_.get(),
                                      watch_queue_, [this] { return connected_.load(); });
    watch_sender_->Start();
    for (const std::unique_ptr<Collector>& c : collectors_) c->StartWatch(&watch_queue_);
  }
}

WatchSenderCounters Agent::watch_sender_counters() const {
  return watch_sender_ != nullptr ? watch_sender_->counters() : WatchSenderCounters{};
}

void Agent::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    if (session_context_ != nullptr) session_context_->TryCancel();
    for (grpc::ClientContext* upload : uploads_) upload->TryCancel();
    for (auto& [id, run] : captures_) run->Cancel("agent shutting down");
  }
  if (watch_sender_ != nullptr) {
    for (const std::unique_ptr<Collector>& c : collectors_) c->StopWatch();
    watch_sender_->Stop();
    const WatchQueueCounters q = watch_queue_.counters();
    const WatchSenderCounters w = watch_sender_->counters();
    spdlog::info("agent {}: watch data: {} steps summarised, {} sent in {} batches, {} dropped",
                 options_.agent_id, q.pushed_steps, w.steps, w.batches, q.dropped_steps);
  }
  if (connection_thread_.joinable()) connection_thread_.join();
  if (timer_thread_.joinable()) timer_thread_.join();
  std::map<std::string, std::unique_ptr<CaptureRun>> runs;
  {
    absl::MutexLock lock(&mu_);
    runs.swap(captures_);
  }
  runs.clear();  // joins every capture thread
}

std::string Agent::refusal() const {
  absl::MutexLock lock(&mu_);
  return refusal_;
}

bool Agent::WaitConnected(int64_t timeout_ns) {
  absl::MutexLock lock(&mu_);
  const auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return connected_.load() || stopping_ || !refusal_.empty();
  };
  const common::TimeSource& time = clock_.host_time();
  return time.AwaitUntil(mu_, absl::Condition(&settled), time.Now() + timeout_ns) &&
         connected_.load();
}

bool Agent::busy() const {
  absl::MutexLock lock(&mu_);
  return std::any_of(captures_.begin(), captures_.end(),
                     [](const auto& c) { return !c.second->finished(); });
}

std::string Agent::shard() const {
  absl::MutexLock lock(&mu_);
  return shard_;
}

bool Agent::Sleep(int64_t ns) {
  absl::MutexLock lock(&mu_);
  const common::TimeSource& time = clock_.host_time();
  return !time.AwaitUntil(mu_, absl::Condition(&stopping_), time.Now() + ns);
}

void Agent::ConnectionLoop() {
  std::mt19937_64 rng(std::hash<std::string>()(options_.agent_id) ^
                      static_cast<uint64_t>(HostNowNs()));
  int64_t backoff = options_.reconnect_initial_ns;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_ || !refusal_.empty()) return;
    }
    if (!WaitForCoordinator()) return;
    const auto began = std::chrono::steady_clock::now();
    welcomed_ = false;
    RunSession();
    // A session that was welcomed and lived a while was a real connection: start the backoff over.
    if (welcomed_ && std::chrono::steady_clock::now() - began > std::chrono::seconds(1)) {
      backoff = options_.reconnect_initial_ns;
    }
    const int64_t wait = std::uniform_int_distribution<int64_t>(backoff / 2, backoff)(rng);
    if (!Sleep(wait)) return;
    backoff = std::min(backoff * 2, options_.reconnect_max_ns);
  }
}

// Waits for the channel to the coordinator to connect, saying at once when it cannot and why
// (gRPC alone would show nothing for 25 s on a wrong port), then every 30 s while it still
// cannot. False when the agent is stopping.
bool Agent::WaitForCoordinator() {
  std::chrono::steady_clock::time_point last_said{};
  bool said = false;
  uint64_t attempts = 0;
  while (!channel_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(1))) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return false;
    }
    ++attempts;
    const auto now = std::chrono::steady_clock::now();
    if (!said || now - last_said >= std::chrono::seconds(30)) {
      spdlog::warn("agent {}: cannot reach the coordinator at {}: {}; retrying{}",
                   options_.agent_id, options_.coordinator,
                   WhyUnreachable(options_.coordinator, 1'000, !options_.tls.cert.empty()),
                   said ? common::StrCat(" (", attempts, " tries so far)") : "");
      said = true;
      last_said = now;
    }
  }
  if (said)
    spdlog::info("agent {}: the coordinator at {} is reachable again", options_.agent_id,
                 options_.coordinator);
  return true;
}

void Agent::AddWorkers(google::protobuf::RepeatedPtrField<v1::WorkerDescriptor>* out) const {
  for (const std::unique_ptr<Collector>& c : collectors_) {
    for (const WorkerIdentity& w : c->Workers()) {
      v1::WorkerDescriptor* d = out->Add();
      d->set_rank(w.rank);
      d->set_local_rank(w.local_rank);
      d->set_world_size(w.world_size);
      d->set_pid(w.pid);
      d->set_job(w.job);
      d->set_host(w.host);
      d->set_device(w.device);
      d->set_collector(std::string(c->name()));
    }
  }
}

std::map<int32_t, Collector*> Agent::CollectorsByRank() const {
  std::map<int32_t, Collector*> by_rank;
  for (const std::unique_ptr<Collector>& c : collectors_) {
    for (const WorkerIdentity& w : c->Workers()) by_rank.emplace(w.rank, c.get());
  }
  return by_rank;
}

void Agent::OnWorkersChanged() {
  // Probes come and go with training processes; the coordinator hears at once (and in every
  // hello after a reconnect).
  absl::MutexLock lock(&workers_changed_mu_);
  if (!collectors_alive_ || !connected_.load()) return;
  v1::AgentMessage m;
  AddWorkers(m.mutable_workers()->mutable_workers());
  Send(m);
}

v1::AgentHello Agent::Hello() {
  v1::AgentHello hello;
  hello.set_protocol_major(common::kAgentProtocolMajor);
  hello.set_protocol_minor(common::kAgentProtocolMinor);
  hello.set_agent_id(options_.agent_id);
  hello.set_instance_id(instance_id_);
  hello.set_host(options_.host);
  hello.set_version(podscope::kVersion);
  AddWorkers(hello.mutable_workers());
  absl::MutexLock lock(&mu_);
  for (const auto& [id, run] : captures_) *hello.add_captures() = run->Status();
  return hello;
}

void Agent::RunSession() {
  grpc::ClientContext context;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    session_context_ = &context;
  }
  // Waits for the channel rather than failing fast: while the coordinator is down, the channel's
  // own jittered reconnect backoff (at most 2 s) paces the attempts, and the session starts the
  // moment the coordinator is back.
  context.set_wait_for_ready(true);
  v1::AgentMessage hello;
  *hello.mutable_hello() = Hello();
  ControlStream stream(*this);
  stream.Begin(&context, hello);
  const grpc::Status status = stream.Wait();
  {
    absl::MutexLock lock(&write_mu_);
    stream_ = nullptr;
  }
  connected_ = false;
  absl::MutexLock lock(&mu_);
  session_context_ = nullptr;
  if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
    refusal_ = status.error_message();
    spdlog::error("agent {}: the coordinator refused this agent: {}", options_.agent_id, refusal_);
  } else if (!stopping_) {
    spdlog::warn("agent {}: control stream to {} ended{}{}; reconnecting", options_.agent_id,
                 options_.coordinator, status.ok() ? "" : ": ", status.error_message());
  }
}

void Agent::OnMessage(ControlStream& stream, const v1::CoordinatorMessage& message) {
  if (!welcomed_) {
    if (!message.has_welcome()) {
      spdlog::warn("agent {}: the coordinator's first message was not a welcome; reconnecting",
                   options_.agent_id);
      absl::MutexLock lock(&mu_);
      if (session_context_ != nullptr) session_context_->TryCancel();
      return;
    }
    const v1::Welcome& w = message.welcome();
    if (w.heartbeat_interval_ms() > 0)
      heartbeat_interval_ns_ = int64_t{w.heartbeat_interval_ms()} * 1'000'000;
    if (w.clock_sync_interval_ms() > 0)
      clock_sync_interval_ns_ = int64_t{w.clock_sync_interval_ms()} * 1'000'000;
    {
      absl::MutexLock lock(&write_mu_);
      stream_ = &stream;
    }
    {
      absl::MutexLock lock(&mu_);
      connected_ = true;
      sync_wanted_ = true;  // a burst at every connect
      shard_ = w.has_shards() ? w.shards().shard() : "";
    }
    spdlog::info("agent {} connected to {} (coordinator {})", options_.agent_id,
                 options_.coordinator, w.coordinator_id());
    welcomed_ = true;
    // The hello carried each capture's status as it was when the session began; a capture may
    // have moved on while the coordinator was away (finished its upload, say), and its reports
    // then had no stream to go to. Send where every capture stands now.
    std::vector<v1::AgentMessage> statuses;
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [id, run] : captures_)
        *statuses.emplace_back().mutable_capture() = run->Status();
    }
    for (const v1::AgentMessage& m : statuses) Send(m);
    if (w.has_shards() && options_.on_shard_owners) options_.on_shard_owners(w.shards());
    return;
  }
  switch (message.kind_case()) {
    case v1::CoordinatorMessage::kCapture:
      OnCapture(message.capture());
      break;
    case v1::CoordinatorMessage::kCancel:
      OnCancel(message.cancel());
      break;
    case v1::CoordinatorMessage::kShards:
      if (options_.on_shard_owners) options_.on_shard_owners(message.shards());
      break;
    case v1::CoordinatorMessage::kSyncClock: {
      absl::MutexLock lock(&mu_);
      sync_wanted_ = true;
      break;
    }
    default:
      break;  // newer coordinators may send more; ignoring is the compatible choice
  }
}

bool Agent::Send(const v1::AgentMessage& message) {
  absl::MutexLock lock(&write_mu_);
  if (stream_ == nullptr) return false;
  return stream_->Enqueue(message);
}

void Agent::TimerLoop() {
  // On the host clock (a TimeSource, so tests can drive it). A wall clock stepped backwards
  // must not silence heartbeats: a wake further away than one interval is pulled in.
  const common::TimeSource& time = clock_.host_time();
  TimeNs next_heartbeat = time.Now(), next_sync = time.Now();
  absl::MutexLock lock(&mu_);
  const auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || (sync_wanted_ && connected_.load());
  };
  while (!stopping_) {
    const TimeNs before = time.Now();
    next_heartbeat = std::min(next_heartbeat, before + heartbeat_interval_ns_.load());
    next_sync = std::min(next_sync, before + clock_sync_interval_ns_.load());
    time.AwaitUntil(mu_, absl::Condition(&woken), std::min(next_heartbeat, next_sync));
    if (stopping_) return;
    if (!connected_.load()) {
      next_heartbeat = next_sync = time.Now() + 100'000'000;
      continue;
    }
    const TimeNs now = time.Now();
    if (sync_wanted_ || now >= next_sync) {
      sync_wanted_ = false;
      mu_.Unlock();
      SyncClockBurst("periodic", options_.clock_burst);
      mu_.Lock();
      next_sync = time.Now() + clock_sync_interval_ns_.load();
    }
    if (now >= next_heartbeat) {
      mu_.Unlock();
      v1::AgentMessage beat;
      beat.mutable_heartbeat()->set_agent_time_ns(clock_.Now());
      Send(beat);
      ForgetOldCaptures();
      mu_.Lock();
      next_heartbeat = now + heartbeat_interval_ns_.load();
    }
  }
}

void Agent::SyncClockBurst(std::string_view reason, int exchanges, TimeNs until) {
  v1::AgentMessage message;
  v1::ClockReport* report = message.mutable_clock();
  // Exchanges a few random milliseconds apart sample different moments of the network's and
  // the coordinator's queues; the fit keeps the fastest.
  std::mt19937_64 rng(std::hash<std::string>()(options_.agent_id) ^
                      static_cast<uint64_t>(HostNowNs()));
  for (int i = 0; i < exchanges; ++i) {
    if (i > 0 && !Sleep(std::uniform_int_distribution<int64_t>(0, 2'000'000)(rng))) break;
    int64_t timeout = options_.rpc_timeout_ns;
    if (until != 0) {
      timeout = std::min(timeout, until - clock_.Now());
      if (timeout <= 0) break;
    }
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(timeout));
    v1::SyncClockRequest request;
    v1::SyncClockResponse response;
    request.set_agent_id(options_.agent_id);
    const TimeNs t1 = clock_.Now();
    request.set_t1_ns(t1);
    const grpc::Status status = stub_->SyncClock(&context, request, &response);
    const TimeNs t4 = clock_.Now();
    if (!status.ok()) {
      spdlog::debug("agent {}: clock sync ({}) failed: {}", options_.agent_id, reason,
                    status.error_message());
      break;
    }
    v1::ClockSample* s = report->add_samples();
    s->set_t1_ns(t1);
    s->set_t2_ns(response.t2_ns());
    s->set_t3_ns(response.t3_ns());
    s->set_t4_ns(t4);
  }
  if (report->samples_size() > 0) Send(message);
}

void Agent::OnCapture(const v1::CaptureRequest& request) {
  std::optional<v1::CaptureStatus> known;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    if (auto it = captures_.find(request.capture_id()); it != captures_.end()) {
      // A repeat: a sharper start time before the window, or (after a coordinator restart) a
      // question about where we are.
      it->second->MoveStart(request.start_agent_ns());
      known = it->second->Status();
    } else {
      CaptureRunHooks hooks;
      hooks.report = [this](const v1::CaptureStatus& status) {
        v1::AgentMessage m;
        *m.mutable_capture() = status;
        Send(m);
      };
      hooks.sync_clock = [this](std::string_view reason, int exchanges, TimeNs until) {
        SyncClockBurst(reason, exchanges, until);
      };
      hooks.upload = [this](const std::vector<const std::string*>& chunks, TimeNs deadline) {
        return UploadOnce(chunks, deadline);
      };
      auto run = std::make_unique<CaptureRun>(request, CollectorsByRank(), options_.agent_id,
                                              clock_, std::move(hooks), options_.capture);
      spdlog::info("agent {}: capture {} armed for {} ranks, starts in {:.1f} ms",
                   options_.agent_id, request.capture_id(), request.ranks_size(),
                   (request.start_agent_ns() - clock_.Now()) / 1e6);
      run->Begin();
      captures_.emplace(request.capture_id(), std::move(run));
    }
  }
  if (known) {
    v1::AgentMessage m;
    *m.mutable_capture() = *known;
    Send(m);
  }
}

void Agent::OnCancel(const v1::CancelCapture& cancel) {
  absl::MutexLock lock(&mu_);
  if (auto it = captures_.find(cancel.capture_id()); it != captures_.end()) {
    it->second->Cancel(cancel.reason().empty() ? "cancelled by the coordinator" : cancel.reason());
  }
}

absl::StatusOr<v1::UploadResponse> Agent::UploadOnce(const std::vector<const std::string*>& chunks,
                                                     TimeNs deadline) {
  grpc::ClientContext context;
  context.set_deadline(
      DeadlineIn(deadline == 0 ? 300'000'000'000 : std::max<int64_t>(deadline - clock_.Now(), 0)));
  context.set_wait_for_ready(true);  // an upload resumes the moment the coordinator is back
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::CancelledError("agent stopping");
    uploads_.insert(&context);
  }
  v1::UploadResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::UploadRequest>> writer =
      stub_->Upload(&context, &response);
  // The spool keeps chunks serialized; each is parsed into one message as it is sent.
  v1::UploadRequest request;
  bool unreadable = false;
  for (const std::string* chunk : chunks) {
    if (!request.ParseFromString(*chunk)) {
      unreadable = true;
      context.TryCancel();  // the coordinator must not take the rest as the whole
      break;
    }
    if (!writer->Write(request)) break;  // Finish says why
  }
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  {
    absl::MutexLock lock(&mu_);
    uploads_.erase(&context);
  }
  if (unreadable) return absl::InternalError("upload: a spooled chunk does not parse");
  if (!status.ok())
    return absl::UnavailableError(common::StrCat("upload: ", status.error_message()));
  return response;
}

void Agent::ForgetOldCaptures() {
  std::vector<std::unique_ptr<CaptureRun>> old;
  {
    absl::MutexLock lock(&mu_);
    const TimeNs now = clock_.Now();
    for (auto it = captures_.begin(); it != captures_.end();) {
      if (!it->second->finished()) {
        ++it;
        continue;
      }
      auto [at, inserted] = finished_at_.emplace(it->first, now);
      if (now - at->second > options_.keep_finished_ns) {
        finished_at_.erase(at);
        old.push_back(std::move(it->second));
        it = captures_.erase(it);
      } else {
        ++it;
      }
    }
  }
  old.clear();  // joins outside the lock
}

}  // namespace podscope::agent
