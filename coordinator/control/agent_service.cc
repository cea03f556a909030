#include "coordinator/control/agent_service.h"

#include <deque>
#include <map>
#include <set>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/protocol_version.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "spdlog/spdlog.h"

namespace podscope::coordinator {

namespace {

std::set<std::string> JobsOf(
    const google::protobuf::RepeatedPtrField<v1::WorkerDescriptor>& workers) {
  std::set<std::string> jobs;
  for (const v1::WorkerDescriptor& w : workers) jobs.insert(w.job());
  return jobs;
}

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

// What an agent says of its workers is kept in the registry and shown to people: bounded in
// count (an agent over it is refused), and each worker's fields bounded and printable. A worker
// described badly (a training process with a garbled PODSCOPE_JOB, say) is dropped with a
// warning naming it, so that one process cannot cut its whole node off.
absl::Status ValidateWorkers(google::protobuf::RepeatedPtrField<v1::WorkerDescriptor>* workers,
                             const AgentServiceOptions& options, std::string_view agent) {
  if (workers->size() > options.max_workers_per_agent) {
    return absl::InvalidArgumentError(
        common::StrCat("an agent may serve at most ", options.max_workers_per_agent, " workers"));
  }
  for (int i = workers->size() - 1; i >= 0; --i) {
    const v1::WorkerDescriptor& w = workers->Get(i);
    absl::Status s = storage::ValidateJobName(w.job());
    if (s.ok() && w.rank() < 0) s = absl::InvalidArgumentError("ranks are non-negative");
    if (s.ok()) {
      // Jobs listed in agents.jobs may be served by their listed agents only.
      const auto allowed = options.job_agents.find(w.job());
      if (allowed != options.job_agents.end() && !allowed->second.contains(std::string(agent))) {
        s = absl::PermissionDeniedError(
            common::StrCat("agent ", agent, " may not serve job ", w.job(), " (agents.jobs)"));
      }
    }
    if (s.ok() && (w.host().size() > 256 || w.device().size() > 256 || w.collector().size() > 64)) {
      s = absl::InvalidArgumentError(
          "a worker's host and device are at most 256 bytes, its collector 64");
    }
    if (s.ok()) continue;
    spdlog::warn("agent {}: worker rank {} pid {} ignored: {}", agent, w.rank(), w.pid(),
                 std::string(s.message()));
    workers->DeleteSubrange(i, 1);
  }
  return absl::OkStatus();
}

// The identity the agent's TLS certificate states (its CN), or "" on a plaintext connection.
std::string CertificateIdentity(const grpc::CallbackServerContext& context) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr) return "";
  const std::vector<grpc::string_ref> names = auth->FindPropertyValues("x509_common_name");
  return names.empty() ? "" : std::string(names.front().data(), names.front().size());
}

// With mutual TLS an agent is who its certificate says: it may not claim another agent's id
// (and so take over its ranks, or upload into them).
absl::Status CheckIdentity(const AgentServiceOptions& options,
                           std::string_view certificate_identity, std::string_view agent_id) {
  if (!options.require_certificate_identity) return absl::OkStatus();
  if (certificate_identity.empty()) {
    return absl::UnauthenticatedError(
        "this coordinator takes agents over mutual TLS only (no client certificate)");
  }
  if (agent_id != certificate_identity) {
    return absl::PermissionDeniedError(common::StrCat(
        "agent id \"", agent_id,
        "\" is not the identity of its certificate (CN=", certificate_identity,
        "); start the agent with --agent-id ", certificate_identity, " or without --agent-id"));
  }
  return absl::OkStatus();
}

absl::Status ValidateHello(const v1::AgentHello& hello, const AgentServiceOptions& options) {
  if (hello.protocol_major() != common::kAgentProtocolMajor) {
    return absl::FailedPreconditionError(common::StrCat(
        "agent protocol ", hello.protocol_major(), ".", hello.protocol_minor(),
        " is not supported by this coordinator (protocol ", common::kAgentProtocolMajor, ".",
        common::kAgentProtocolMinor, "); run agents and coordinator of the same major version"));
  }
  if (hello.agent_id().empty() || hello.agent_id().size() > 256)
    return absl::InvalidArgumentError("agent_id must be 1-256 bytes");
  if (hello.host().size() > 256)
    return absl::InvalidArgumentError("host must be at most 256 bytes");
  for (const char c : hello.agent_id() + hello.host()) {
    if (c < 0x20 || c > 0x7e)
      return absl::InvalidArgumentError("agent_id and host must be printable ASCII");
  }
  return absl::OkStatus();
}

}  // namespace

// One agent's control stream. Owns itself: deleted in OnDone. The registry reaches it through
// a Link, which outlives it and turns into a no-op once the stream is done.
class ControlSession : public grpc::ServerBidiReactor<v1::AgentMessage, v1::CoordinatorMessage> {
 public:
  class Link : public AgentControlStream {
   public:
    explicit Link(ControlSession* session) : session_(session) {}
    bool Send(const v1::CoordinatorMessage& message) override {
      absl::MutexLock lock(&mu_);
      return session_ != nullptr && session_->Enqueue(message);
    }
    void Close() override {
      absl::MutexLock lock(&mu_);
      if (session_ != nullptr)
        session_->End(grpc::Status(grpc::StatusCode::ABORTED,
                                   "replaced by a newer connection of this agent"));
    }
    void Detach() {
      absl::MutexLock lock(&mu_);
      session_ = nullptr;
    }

   private:
    absl::Mutex mu_;
    ControlSession* session_ ABSL_GUARDED_BY(mu_);
  };

  ControlSession(AgentService& service, grpc::CallbackServerContext* context)
      : service_(service),
        peer_(context->peer()),
        certificate_identity_(CertificateIdentity(*context)),
        link_(std::make_shared<Link>(this)) {
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      End(grpc::Status::OK);  // the agent closed its side, or the connection broke
      return;
    }
    if (absl::Status s = Handle(in_); !s.ok()) {
      spdlog::warn("agent {} ({}): {}", agent_id_.empty() ? "?" : agent_id_, peer_,
                   std::string(s.message()));
      End(ToGrpc(s));
      return;
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    out_.pop_front();
    if (ok && !out_.empty() && !finished_) {
      StartWrite(&out_.front());
      return;
    }
    writing_ = false;
    // A broken write leaves ending to OnReadDone(false); a pending End finishes now.
    if (finished_ && !finish_sent_) {
      finish_sent_ = true;
      Finish(final_status_);
    }
  }

  void OnDone() override {
    link_->Detach();
    if (!agent_id_.empty()) {
      service_.registry_.Disconnected(agent_id_, link_.get());
      spdlog::info("agent {} disconnected", agent_id_);
    }
    delete this;
  }

  bool Enqueue(const v1::CoordinatorMessage& message) {
    absl::MutexLock lock(&mu_);
    if (finished_ || out_.size() + held_.size() >= service_.options_.max_queued_messages)
      return false;
    // The welcome goes first: what reaches the session through the registry before it (a
    // capture request, say) waits for it.
    if (!welcomed_ && !message.has_welcome()) {
      held_.push_back(message);
      return true;
    }
    out_.push_back(message);
    if (message.has_welcome()) {
      welcomed_ = true;
      for (v1::CoordinatorMessage& m : held_) out_.push_back(std::move(m));
      held_.clear();
    }
    if (!writing_) {
      writing_ = true;
      StartWrite(&out_.front());
    }
    return true;
  }

  // Finishes the stream, after the write in flight if there is one.
  void End(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    finished_ = true;
    final_status_ = status;
    if (!writing_) {
      finish_sent_ = true;
      Finish(status);
    }
  }

 private:
  absl::Status Handle(const v1::AgentMessage& m) {
    if (agent_id_.empty()) {
      if (!m.has_hello())
        return absl::InvalidArgumentError(
            "the first message on the control stream must be a hello");
      RETURN_IF_ERROR(ValidateHello(m.hello(), service_.options_));
      if (absl::Status s =
              CheckIdentity(service_.options_, certificate_identity_, m.hello().agent_id());
          !s.ok()) {
        return s;
      }
      v1::AgentHello hello = m.hello();
      if (absl::Status s =
              ValidateWorkers(hello.mutable_workers(), service_.options_, hello.agent_id());
          !s.ok())
        return s;
      v1::CoordinatorMessage welcome;
      v1::Welcome* w = welcome.mutable_welcome();
      w->set_coordinator_id(service_.options_.coordinator_id);
      w->set_protocol_major(common::kAgentProtocolMajor);
      w->set_protocol_minor(common::kAgentProtocolMinor);
      w->set_heartbeat_interval_ms(service_.options_.heartbeat_interval_ms);
      w->set_clock_sync_interval_ms(service_.options_.clock_sync_interval_ms);
      if (service_.shard_owners_) {
        if (std::optional<v1::ShardOwners> owners =
                service_.shard_owners_(JobsOf(hello.workers()))) {
          *w->mutable_shards() = *std::move(owners);
        }
      }
      // Registered before it is welcomed: a session the registry refuses (another process
      // under a live agent's id) is never told it is welcome.
      absl::StatusOr<bool> new_instance = service_.registry_.Connected(hello, peer_, link_);
      if (!new_instance.ok()) {
        spdlog::warn("agent session from {} refused: {}", peer_,
                     std::string(new_instance.status().message()));
        return new_instance.status();
      }
      Enqueue(welcome);
      agent_id_ = m.hello().agent_id();
      // Another process under this id (restarted, or moved): its clock is not the old one's.
      if (*new_instance) service_.aligner_.Forget(agent_id_);
      spdlog::info("agent {} connected from {} ({} workers, protocol {}.{}, version {})", agent_id_,
                   peer_, hello.workers_size(), m.hello().protocol_major(),
                   m.hello().protocol_minor(), m.hello().version());
      for (const v1::CaptureStatus& c : m.hello().captures())
        service_.scheduler_.OnCaptureStatus(agent_id_, c);
      return absl::OkStatus();
    }
    service_.registry_.Seen(agent_id_);
    switch (m.kind_case()) {
      case v1::AgentMessage::kHeartbeat:
        break;
      case v1::AgentMessage::kWorkers: {
        v1::WorkersChanged workers = m.workers();
        if (absl::Status s =
                ValidateWorkers(workers.mutable_workers(), service_.options_, agent_id_);
            !s.ok())
          return s;
        if (!service_.registry_.IsCurrent(agent_id_, link_.get())) break;
        service_.registry_.WorkersChanged(agent_id_, workers);
        if (service_.shard_owners_) {
          if (std::optional<v1::ShardOwners> owners =
                  service_.shard_owners_(JobsOf(workers.workers()))) {
            v1::CoordinatorMessage update;
            *update.mutable_shards() = *std::move(owners);
            Enqueue(update);
          }
        }
        break;
      }
      case v1::AgentMessage::kClock: {
        if (m.clock().samples_size() > service_.options_.max_samples_per_report) {
          return absl::InvalidArgumentError("too many clock samples in one report");
        }
        // Samples belong to the session that took them: a replaced session's late ones are dropped.
        if (!service_.registry_.IsCurrent(agent_id_, link_.get())) break;
        std::vector<ClockSample> samples;
        for (const v1::ClockSample& s : m.clock().samples())
          samples.push_back({s.t1_ns(), s.t2_ns(), s.t3_ns(), s.t4_ns()});
        service_.aligner_.AddSamples(agent_id_, samples);
        service_.scheduler_.OnClockUpdated(agent_id_);
        break;
      }
      case v1::AgentMessage::kCapture:
        service_.scheduler_.OnCaptureStatus(agent_id_, m.capture());
        break;
      case v1::AgentMessage::kHello:
        return absl::InvalidArgumentError("hello sent twice on one stream");
      default:
        break;  // newer agents may send more; ignoring is the compatible choice
    }
    return absl::OkStatus();
  }

  AgentService& service_;
  const std::string peer_;
  const std::string certificate_identity_;  // empty without TLS
  std::shared_ptr<Link> link_;
  std::string agent_id_;  // set by the hello; only the reactor's read path touches it
  v1::AgentMessage in_;
  absl::Mutex mu_;
  // front() is being written while writing_.
  std::deque<v1::CoordinatorMessage> out_ ABSL_GUARDED_BY(mu_);
  bool welcomed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<v1::CoordinatorMessage> held_ ABSL_GUARDED_BY(mu_);  // until the welcome is queued
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // no more writes; Finish sent or pending
  bool finish_sent_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
};

// One Upload call: stores each chunk as it arrives, answers with the ranks now complete.
class UploadSession : public grpc::ServerReadReactor<v1::UploadRequest> {
 public:
  UploadSession(AgentService& service, grpc::CallbackServerContext* context,
                v1::UploadResponse* response)
      : service_(service),
        certificate_identity_(CertificateIdentity(*context)),
        response_(response) {
    StartRead(&chunk_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      for (int32_t rank : ranks_) {
        if (service_.scheduler_.WorkerComplete(capture_id_, rank))
          response_->add_ranks_complete(rank);
      }
      Finish(grpc::Status::OK);
      return;
    }
    if (!capture_id_.empty() && chunk_.capture_id() != capture_id_) {
      Finish(
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "one Upload call carries one capture"));
      return;
    }
    capture_id_ = chunk_.capture_id();
    // An agent uploads as itself only: the scheduler checks the rank is this agent's.
    if (absl::Status s = CheckIdentity(service_.options_, certificate_identity_, chunk_.agent_id());
        !s.ok()) {
      Finish(ToGrpc(s));
      return;
    }
    if (absl::Status s = service_.scheduler_.OnChunk(chunk_); !s.ok()) {
      Finish(ToGrpc(s));
      return;
    }
    ranks_.insert(chunk_.rank());
    response_->set_chunks_stored(response_->chunks_stored() + 1);
    StartRead(&chunk_);
  }

  void OnDone() override { delete this; }

 private:
  AgentService& service_;
  const std::string certificate_identity_;
  v1::UploadResponse* response_;
  v1::UploadRequest chunk_;
  std::string capture_id_;
  std::set<int32_t> ranks_;
};

// One agent's Watch stream: batches of step summaries and progress, for as long as the agent
// runs. Each batch is checked (identity, bounds, which ranks the agent serves), moved onto the
// coordinator's clock and handed to the sink before the next is read, so gRPC's flow control
// is the backpressure: an agent that sends faster than the coordinator takes queues at home,
// where its bounded queue drops the oldest and counts them.
class WatchSession : public grpc::ServerReadReactor<v1::WatchBatch> {
 public:
  WatchSession(AgentService& service, grpc::CallbackServerContext* context, v1::WatchAck* response)
      : service_(service),
        certificate_identity_(CertificateIdentity(*context)),
        response_(response) {
    if (!service_.watch_ingest_.ingest) {
      Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                          "this coordinator does not take watch data"));
      return;
    }
    StartRead(&batch_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      response_->set_batches(batches_);
      Finish(grpc::Status::OK);
      return;
    }
    if (absl::Status s = Take(); !s.ok()) {
      ++service_.watch_counters_.refused_batches;
      // Named by its certificate, never only by what it claims (an impostor's claim would put
      // another agent's name in the log); under --insecure the claim is all there is.
      const std::string& claimed = agent_id_.empty() ? batch_.agent_id() : agent_id_;
      service_.watch_log_.Warn(
          "agent {}: watch stream refused: {}",
          certificate_identity_.empty() ? claimed
          : claimed == certificate_identity_
              ? certificate_identity_
              : common::StrCat(certificate_identity_, " (claiming to be ", claimed, ")"),
          std::string(s.message()));
      Finish(ToGrpc(s));
      return;
    }
    StartRead(&batch_);
  }

  void OnDone() override { delete this; }

 private:
  absl::Status Take() {
    if (agent_id_.empty()) {
      if (absl::Status s =
              CheckIdentity(service_.options_, certificate_identity_, batch_.agent_id());
          !s.ok())
        return s;
      agent_id_ = batch_.agent_id();
    } else if (batch_.agent_id() != agent_id_) {
      return absl::InvalidArgumentError("one Watch call carries one agent's data");
    }
    // Ranks are the registry's word, so an agent must hold its control stream to be heard.
    if (!service_.registry_.IsConnected(agent_id_)) {
      return absl::FailedPreconditionError(common::StrCat(
          "agent ", agent_id_, " has no control stream: connect before sending watch data"));
    }
    ASSIGN_OR_RETURN(common::DecodedWatch data, common::DecodeWatchBatch(batch_));
    ++batches_;
    ++service_.watch_counters_.batches;
    service_.watch_counters_.bytes += batch_.ByteSizeLong();
    absl::StatusOr<common::ClockModel> model = service_.aligner_.Model(agent_id_);
    if (!model.ok()) {
      // Only until the agent's first clock burst lands: summaries on an unknown clock would be
      // matched against other agents' and name the wrong rank.
      ++service_.watch_counters_.unaligned_batches;
      return absl::OkStatus();
    }
    // A rank the agent does not serve is another agent's to report (or nobody's).
    const std::map<std::pair<std::string, int32_t>, std::string> served =
        service_.registry_.ServedRanks(agent_id_);
    uint64_t foreign = 0;
    auto serves = [&](const std::string& job, int32_t rank) {
      const auto it = served.find({job, rank});
      if (it == served.end()) {
        ++foreign;
        return false;
      }
      auto [known, inserted] = hosts_.try_emplace(it->first, it->second);
      if (inserted || known->second != it->second) {
        known->second = it->second;
        if (service_.watch_ingest_.set_host) service_.watch_ingest_.set_host(job, rank, it->second);
      }
      return true;
    };
    std::erase_if(data.steps, [&](const auto& s) { return !serves(s.first, s.second.rank); });
    std::erase_if(data.progress, [&](const auto& p) { return !serves(p.first, p.second.rank); });
    if (foreign > 0) {
      service_.watch_counters_.foreign_records += foreign;
      service_.watch_log_.Warn(
          "agent {}: {} watch records for ranks it does not serve were dropped", agent_id_,
          foreign);
    }
    common::AlignWatch(*model, &data);
    service_.watch_ingest_.ingest(agent_id_, data);
    return absl::OkStatus();
  }

  AgentService& service_;
  const std::string certificate_identity_;
  v1::WatchAck* response_;
  v1::WatchBatch batch_;
  std::string agent_id_;
  uint64_t batches_ = 0;
  std::map<std::pair<std::string, int32_t>, std::string> hosts_;  // as last given to the sink
};

AgentService::AgentService(AgentRegistry& registry, ClockAligner& aligner,
                           CaptureScheduler& scheduler, AgentServiceOptions options,
                           const common::TimeSource& time)
    : registry_(registry),
      aligner_(aligner),
      scheduler_(scheduler),
      options_(std::move(options)),
      time_(time) {}

grpc::ServerBidiReactor<v1::AgentMessage, v1::CoordinatorMessage>* AgentService::Connect(
    grpc::CallbackServerContext* context) {
  ObserveCall(context);
  return new ControlSession(*this, context);
}

grpc::ServerUnaryReactor* AgentService::SyncClock(grpc::CallbackServerContext* context,
                                                  const v1::SyncClockRequest*,
                                                  v1::SyncClockResponse* response) {
  // t2 as early and t3 as late as this handler can take them; the gap between is subtracted.
  response->set_t2_ns(time_.Now());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  response->set_t3_ns(time_.Now());
  reactor->Finish(grpc::Status::OK);
  // Not observed: nothing may come before t2, and an agent's control stream (observed) opens
  // its connection first.
  return reactor;
}

grpc::ServerReadReactor<v1::UploadRequest>* AgentService::Upload(
    grpc::CallbackServerContext* context, v1::UploadResponse* response) {
  ObserveCall(context);
  return new UploadSession(*this, context, response);
}

grpc::ServerReadReactor<v1::WatchBatch>* AgentService::Watch(grpc::CallbackServerContext* context,
                                                             v1::WatchAck* response) {
  ObserveCall(context);
  return new WatchSession(*this, context, response);
}

void AgentService::PushShardOwners() {
  if (!shard_owners_) return;
  for (const AgentSnapshot& a : registry_.Snapshot()) {
    if (!a.connected) continue;
    std::set<std::string> jobs;
    for (const v1::WorkerDescriptor& w : a.workers) jobs.insert(w.job());
    if (std::optional<v1::ShardOwners> owners = shard_owners_(jobs)) {
      v1::CoordinatorMessage update;
      *update.mutable_shards() = *std::move(owners);
      registry_.Send(a.agent_id, update);
    }
  }
}

void AgentService::AppendMetrics(std::string* out) const {
  const auto counter = [out](std::string_view name, std::string_view help, uint64_t value) {
    common::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " counter\n", name, " ",
                      value, "\n");
  };
  counter("podscope_watch_batches_total", "Watch batches taken from agents.",
          watch_counters_.batches.load());
  counter("podscope_watch_bytes_total",
          "Bytes of the watch batches taken (protobuf, before gRPC's framing).",
          watch_counters_.bytes.load());
  counter("podscope_watch_refused_batches_total",
          "Watch batches refused (malformed, an agent not who it says, or one without a control "
          "stream).",
          watch_counters_.refused_batches.load());
  counter("podscope_watch_unaligned_batches_total",
          "Watch batches dropped because the agent's clock had no model yet.",
          watch_counters_.unaligned_batches.load());
  counter("podscope_watch_foreign_records_total",
          "Watch records dropped for ranks their agent does not serve.",
          watch_counters_.foreign_records.load());
  // The agents this coordinator knows, by health, and the workers the connected ones serve: the
  // dashboard's "agents" panel, and an alert when a node goes quiet.
  std::map<std::string_view, uint64_t> agents = {{AgentHealthName(AgentHealth::kHealthy), 0},
                                                 {AgentHealthName(AgentHealth::kStale), 0},
                                                 {AgentHealthName(AgentHealth::kDisconnected), 0}};
  uint64_t workers = 0;
  for (const AgentSnapshot& a : registry_.Snapshot()) {
    ++agents[AgentHealthName(a.health)];
    if (a.connected) workers += a.workers.size();
  }
  common::StrAppend(out,
                    "# HELP podscope_agents Agents this coordinator knows, by health.\n# TYPE "
                    "podscope_agents gauge\n");
  for (const auto& [health, n] : agents)
    common::StrAppend(out, "podscope_agents{health=\"", health, "\"} ", n, "\n");
  common::StrAppend(out,
                    "# HELP podscope_workers Workers (ranks) served by the connected agents.\n# "
                    "TYPE podscope_workers gauge\n",
                    "podscope_workers ", workers, "\n");
}

}  // namespace podscope::coordinator
