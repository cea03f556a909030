#include "coordinator/coordinator.h"

#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/strings/escaping.h"
#include "common/host_port.h"
#include "common/status_format.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "coordinator/api/watch_metrics.h"
#include "coordinator/auth/token_store.h"
#include "coordinator/shards/shard_map.h"
#include "coordinator/ui/ui_routes.h"
#include "spdlog/spdlog.h"
#include "storage/retention.h"
#include "storage/set_aside.h"

namespace podscope::coordinator {

// Deletes what the retention policy says, every retention_interval_seconds, until destroyed.
class RetentionLoop {
 public:
  RetentionLoop(storage::TraceStore& store, const CoordinatorSettings& settings,
                const common::TimeSource& time, absl::Mutex& capture_mutations)
      : store_(store),
        settings_(settings),
        time_(time),
        capture_mutations_(capture_mutations),
        thread_([this] { Run(); }) {}
  ~RetentionLoop() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    thread_.join();
  }

 private:
  void Run() {
    if (settings_.retention.max_age_ns == 0 && settings_.retention.max_total_bytes == 0) return;
    const absl::Duration interval = absl::Seconds(settings_.retention_interval_seconds);
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval)) return;
      }
      auto result =
          storage::EnforceRetention(store_, settings_.retention, time_.Now(), &capture_mutations_);
      if (!result.ok())
        spdlog::warn("retention: {}", result.status());
      else if (!result->deleted.empty())
        spdlog::info("retention deleted {} captures", result->deleted.size());
    }
  }

  storage::TraceStore& store_;
  const CoordinatorSettings& settings_;
  const common::TimeSource& time_;
  absl::Mutex& capture_mutations_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the members above exist
};

namespace {

// Without TLS and tokens only by --insecure, said loudly; the token file read and checked.
absl::StatusOr<std::unique_ptr<TokenAuthorizer>> LoadAuthorizer(
    const CoordinatorSettings& settings) {
  if (!settings.insecure && settings.auth_tokens.empty()) {
    return absl::InvalidArgumentError(
        "podscope-coordinator needs --auth-tokens FILE (lines from `podscope-coordinator "
        "hash-token`) unless --insecure is given");
  }
  if (settings.insecure) {
    spdlog::warn(
        "--insecure: the REST API and the agents' port speak plaintext and take agents without "
        "certificates; anyone who can reach them can read traces{}",
        settings.auth_tokens.empty() ? " and start captures" : "");
  }
  if (settings.auth_tokens.empty()) return nullptr;
  absl::StatusOr<TokenStore> tokens = TokenStore::Load(settings.auth_tokens);
  if (!tokens.ok()) {
    return absl::InvalidArgumentError(common::StrCat("--auth-tokens: ", tokens.status().message()));
  }
  spdlog::info("{} bearer tokens from {}", tokens->size(), settings.auth_tokens);
  return std::make_unique<TokenAuthorizer>(std::move(*tokens));
}

// Uploads in flight when the coordinator last stopped are gone with their agents' streams. A
// folder the daemon cannot write would fail every import later: it fails the start instead.
absl::Status EmptyUploadDir(const std::string& upload_dir) {
  std::error_code ec;
  std::filesystem::create_directories(upload_dir, ec);
  if (!ec) {
    for (const auto& stale : std::filesystem::directory_iterator(upload_dir, ec))
      std::filesystem::remove(stale.path(), ec);
  }
  if (ec || access(upload_dir.c_str(), W_OK | X_OK) != 0) {
    return absl::FailedPreconditionError(
        common::StrCat("cannot use the upload folder ", upload_dir, ": ",
                       ec ? ec.message() : std::generic_category().message(errno)));
  }
  return absl::OkStatus();
}

// Listing every record on open skipped those that do not decode: said here once.
void LogUnreadableCaptures(const storage::RocksDbTraceStore& store) {
  for (const auto& [id, why] : store.UnreadableCaptures()) {
    // The key as stored, escaped and cut: a damaged one may hold any bytes.
    const std::string shown = absl::CHexEscape(id.substr(0, 80));
    if (storage::ValidateCaptureId(id).ok()) {
      spdlog::warn("stored capture {}: {}; skipped and kept (DELETE /v1/captures/{} drops it)",
                   shown, why, shown);
    } else {
      spdlog::warn("stored capture record under a key that is no capture id (\"{}\"): {}; skipped",
                   shown, why);
    }
  }
}

// Bounds on what one agent, or all of them, can hold on the agents' gRPC server.
void BoundAgentServer(grpc::ServerBuilder& builder, const AgentServiceOptions& agents) {
  builder.SetMaxReceiveMessageSize(64 << 20);
  // Agents ping every 20 s even when idle; allow it rather than answering with GOAWAY.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Two coordinators on one port would split the agents between them silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Connections that hold no call are closed; all connections share a memory bound.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             static_cast<int>(agents.max_idle_connection_ms));
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             static_cast<int>(agents.tls_handshake_timeout_ms));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             static_cast<int>(agents.max_streams_per_connection));
  grpc::ResourceQuota quota("podscope-agents");
  quota.Resize(agents.max_grpc_memory_bytes);
  builder.SetResourceQuota(quota);
}

}  // namespace

Coordinator::Coordinator(CoordinatorSettings settings, const common::TimeSource& time)
    : settings_(std::move(settings)), time_(time) {}

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(CoordinatorSettings settings,
                                                                 const common::TimeSource& time) {
  std::unique_ptr<Coordinator> coordinator(new Coordinator(std::move(settings), time));
  RETURN_IF_ERROR(coordinator->CheckConfig());
  return coordinator;
}

absl::Status Coordinator::CheckConfig() {
  const common::HostPortRules listen{.allow_port_zero = true};
  for (const auto& [flag, text, address] :
       {std::tuple{"--http", &settings_.http, &http_address_},
        std::tuple{"--grpc", &settings_.grpc, &grpc_address_}}) {
    absl::StatusOr<common::HostPort> parsed = common::ParseHostPort(*text, listen);
    if (!parsed.ok())
      return absl::InvalidArgumentError(common::StrCat(flag, ": ", parsed.status().message()));
    *address = *std::move(parsed);
  }
  // The REST server binds an address, not a name (the agents' port resolves one).
  if (!common::IsIpAddress(http_address_.host)) {
    return absl::InvalidArgumentError(
        common::StrCat("--http: \"", http_address_.host,
                       "\" is not an IP address (0.0.0.0 or :: listens on all)"));
  }
  ASSIGN_OR_RETURN(authorizer_, LoadAuthorizer(settings_));
  ASSIGN_OR_RETURN(membership_, ShardMembership::Open(settings_.shards));
  // With TLS, agents must present a certificate chaining to --tls-ca (checked and counted by
  // the gRPC server's credentials).
  agent_certificates_ = std::make_unique<AgentCertificates>(settings_.tls.ca);
  if (!settings_.insecure) RETURN_IF_ERROR(agent_certificates_->Load());
  // Alert transitions out to Alertmanager and webhooks. Its resends read the firing alerts
  // from the watch service, which exists before the notifier starts.
  ASSIGN_OR_RETURN(notifier_, watch::AlertNotifier::Create(settings_.notify, [this] {
                     std::vector<watch::Alert> firing;
                     for (watch::Alert& a : watch_service_->Alerts()) {
                       if (a.state == watch::AlertState::kFiring) firing.push_back(std::move(a));
                     }
                     return firing;
                   }));
  return absl::OkStatus();
}

Coordinator::~Coordinator() {
  for (auto stop = stops_.rbegin(); stop != stops_.rend(); ++stop) (*stop)();
}

void Coordinator::Started(std::function<void()> stop) { stops_.push_back(std::move(stop)); }

absl::Status Coordinator::Start() {
  RETURN_IF_ERROR(OpenStore());
  RETURN_IF_ERROR(StartControlPlane());
  RETURN_IF_ERROR(StartWatch());
  RETURN_IF_ERROR(StartAgentServer());
  RETURN_IF_ERROR(StartSchedules());
  RETURN_IF_ERROR(StartRestServer());
  // Re-reading the members starts last, and so stops first: its listeners use every part.
  membership_->StartWatching();
  Started([this] { membership_->StopWatching(); });
  retention_ = std::make_unique<RetentionLoop>(*store_, settings_, time_, capture_mutations_);
  Started([this] { retention_.reset(); });
  return absl::OkStatus();
}

absl::Status Coordinator::OpenStore() {
  std::error_code ec;
  std::filesystem::create_directories(settings_.data_dir, ec);
  absl::StatusOr<std::unique_ptr<storage::RocksDbTraceStore>> store =
      storage::RocksDbTraceStore::Open({.path = settings_.data_dir});
  if (!store.ok())
    return absl::Status(store.status().code(),
                        common::StrCat("cannot open the store: ", store.status().message()));
  store_ = *std::move(store);
  RETURN_IF_ERROR(EmptyUploadDir(settings_.http_limits.upload_dir));
  api_ = std::make_unique<RestApi>(*store_, settings_.api_limits, time_, capture_mutations_);
  api_->set_id_suffix(settings_.scheduler.id_suffix);
  if (absl::Status s = api_->RecoverInterruptedImports(); !s.ok())
    return absl::Status(s.code(), common::StrCat("recovering interrupted imports: ", s.message()));
  LogUnreadableCaptures(*store_);
  if (absl::Status s = api_->LoadCacheIndex(); !s.ok())
    return absl::Status(s.code(), common::StrCat("indexing cached analyses: ", s.message()));
  return absl::OkStatus();
}

// The live capture path: agents connect over gRPC, captures are started over REST.
absl::Status Coordinator::StartControlPlane() {
  registry_ = std::make_unique<AgentRegistry>(
      AgentRegistryOptions{
          .heartbeat_interval_ns = int64_t{settings_.agents.heartbeat_interval_ms} * 1'000'000,
          .forget_after_ns = int64_t{settings_.agents.forget_disconnected_after_ms} * 1'000'000},
      time_);
  aligner_ = std::make_unique<ClockAligner>();
  scheduler_ = std::make_unique<CaptureScheduler>(*store_, *registry_, *aligner_,
                                                  settings_.scheduler, time_);
  if (absl::Status s = scheduler_->Recover(); !s.ok())
    return absl::Status(s.code(), common::StrCat("recovering live captures: ", s.message()));
  scheduler_->Start();
  Started([this] { scheduler_->Stop(); });
  // Agents whose clock model is wide (a burst taken in a crowd or through jitter) sync again.
  clock_keeper_ =
      std::make_unique<ClockKeeper>(*registry_, *aligner_, settings_.clock_keeper, time_);
  clock_keeper_->Start();
  Started([this] { clock_keeper_->Stop(); });
  api_->set_live_lookup([this](const std::string& id) { return scheduler_->LiveRecord(id); });
  return absl::OkStatus();
}

// Watching every job between captures: rules kept in the store, alerts evaluated on a timer,
// the agents' summaries in through their Watch streams.
absl::Status Coordinator::StartWatch() {
  ASSIGN_OR_RETURN(watch_service_, watch::WatchService::Create(*store_, time_, settings_.watch));
  // An alert that fires captures its job (rate-limited per job), so its evidence is kept.
  watch_service_->SetEvidenceStarter([this](const std::string& job, int64_t duration_ns) {
    return scheduler_->StartBackgroundCapture({.job = job, .duration_ns = duration_ns});
  });
  notifier_->Start();
  Started([this] { notifier_->Stop(); });
  watch_service_->OnTransition([this](const watch::AlertEvent& e) { notifier_->Notify(e); });
  watch_service_->Start();
  Started([this] { watch_service_->Stop(); });
  return absl::OkStatus();
}

// The agents' gRPC server. podscope accepts the agents' connections itself (bounded, all and
// per client address) and hands them to gRPC.
absl::Status Coordinator::StartAgentServer() {
  agent_service_ =
      std::make_unique<AgentService>(*registry_, *aligner_, *scheduler_, settings_.agents, time_);
  RouteWatchAndShards();
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!settings_.insecure)
    credentials = AgentServerCredentials(settings_.tls, *agent_certificates_);
  grpc_builder_ = std::make_unique<grpc::ServerBuilder>();
  grpc_gate_ = std::make_unique<GrpcConnectionGate>(
      settings_.grpc_gate,
      grpc_builder_->experimental().AddExternalConnectionAcceptor(
          grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, credentials));
  // A call that reaches the service proves its connection (handshake and certificate done).
  agent_service_->set_call_observer(
      [this](const std::string& peer) { grpc_gate_->Authenticated(peer); });
  ASSIGN_OR_RETURN(grpc_port_, grpc_gate_->Listen(grpc_address_.host, grpc_address_.port));
  grpc_builder_->RegisterService(agent_service_.get());
  BoundAgentServer(*grpc_builder_, settings_.agents);
  grpc_server_ = grpc_builder_->BuildAndStart();
  if (grpc_server_ == nullptr) return absl::InternalError("cannot start the gRPC server");
  grpc_gate_->Start();
  Started([this] {
    grpc_gate_->Stop();
    grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  });
  // The exact line tests and scripts wait for.
  spdlog::info("podscope-coordinator agents on grpc://{}:{} ({})", grpc_address_.host, grpc_port_,
               settings_.insecure ? "plaintext" : "mutual TLS");
  return absl::OkStatus();
}

void Coordinator::RouteWatchAndShards() {
  agent_service_->set_watch_ingest(
      {.ingest =
           [this](const std::string& agent, const common::DecodedWatch& data) {
             const std::shared_ptr<const ShardMap> map = membership_->current();
             if (!map->sharded()) {
               watch_service_->Ingest(agent, data);
               return;
             }
             // Sharded: only the owner watches a job (an agent that has not yet heard who owns
             // it may send here; its steps of another shard's job are not this shard's to judge).
             common::DecodedWatch mine;
             mine.dropped_steps = data.dropped_steps;
             for (const auto& step : data.steps) {
               if (map->Owns(step.first)) mine.steps.push_back(step);
             }
             for (const auto& progress : data.progress) {
               if (map->Owns(progress.first)) mine.progress.push_back(progress);
             }
             watch_service_->Ingest(agent, mine);
           },
       .set_host = [this](const std::string& job, int32_t rank,
                          const std::string& host) { watch_service_->SetHost(job, rank, host); }});
  if (settings_.shards.members_file.empty()) return;
  // Sharded: agents hear who owns each of their jobs in their welcome, and again whenever the
  // members change; the jobs this shard no longer owns stop being watched here.
  agent_service_->set_shard_owners(
      [this](const std::set<std::string>& jobs) -> std::optional<v1::ShardOwners> {
        const std::shared_ptr<const ShardMap> map = membership_->current();
        v1::ShardOwners owners;
        owners.set_shard(map->self().name);
        for (const std::string& job : jobs) {
          const ShardMember& owner = map->OwnerOf(job);
          v1::JobOwner* o = owners.add_owners();
          o->set_job(job);
          o->set_shard(owner.name);
          o->set_grpc(owner.grpc);
        }
        return owners;
      });
  membership_->OnChange([this](const ShardMap&, const ShardMap& after) {
    agent_service_->PushShardOwners();
    watch_service_->ForgetJobs([&after](const std::string& job) { return after.Owns(job); });
  });
  const std::shared_ptr<const ShardMap> map = membership_->current();
  spdlog::info(
      "shards: this is {} of {} members (members re-read from {} every {} ms; REST calls {})",
      map->self().name, map->members().size(), settings_.shards.members_file,
      settings_.shards.reload_interval_ms, settings_.shards.redirect ? "redirected" : "proxied");
}

// Periodic captures, kept in the store; never over a running capture of the same job.
absl::Status Coordinator::StartSchedules() {
  ASSIGN_OR_RETURN(
      schedules_,
      ScheduleRunner::Create(
          *store_, time_,
          {.start = [this](const ScheduleSpec& spec) -> absl::StatusOr<std::string> {
             // Sharded: a schedule stays with the shard that took it; once its job has moved to
             // another shard (a replica was added) the job's agents are there, not here.
             const std::shared_ptr<const ShardMap> map = membership_->current();
             if (!map->Owns(spec.job)) {
               return absl::FailedPreconditionError(common::StrCat(
                   "job ", spec.job, " is owned by shard ", map->OwnerOf(spec.job).name,
                   " now; delete this schedule and create it again (through any shard)"));
             }
             return scheduler_->StartBackgroundCapture(
                 {.job = spec.job, .ranks = spec.ranks, .duration_ns = spec.duration_ns});
           },
           .busy = [this](const std::string& job) { return scheduler_->HasLiveCapture(job); }},
          {.id_suffix = settings_.scheduler.id_suffix}));
  schedules_->Start();
  Started([this] { schedules_->Stop(); });
  return absl::OkStatus();
}

absl::Status Coordinator::StartRestServer() {
  api_->Register(router_);
  live_api_ = std::make_unique<LiveApi>(*registry_, *aligner_, *scheduler_, time_);
  live_api_->Register(router_);
  schedules_api_ = std::make_unique<SchedulesApi>(*schedules_, [this](const ScheduleSpec& spec) {
    return registry_->SelectTargets(spec.job, spec.ranks).ok();
  });
  schedules_api_->Register(router_);
  watch_api_ = std::make_unique<WatchApi>(*watch_service_);
  watch_api_->Register(router_);
  RegisterUi(router_);
  // Sharded: any replica answers for any job (the routes' handlers stay unaware of shards).
  shard_router_ = std::make_unique<ShardRouter>(*membership_,
                                                settings_.insecure ? "" : settings_.tls.ca, time_);
  if (!settings_.shards.members_file.empty()) {
    const std::vector<ShardRouteRule> unmatched =
        shard_router_->Install(router_, ShardRouter::ApiRules());
    if (!unmatched.empty()) {
      return absl::InternalError(common::StrCat("shards: no route ", unmatched.front().method, " ",
                                                unmatched.front().pattern, " to shard (a bug)"));
    }
  }
  if (settings_.open_metrics) router_.SetAccess("GET", "/metrics", http::Access::kOpen);
  http_server_ = std::make_unique<http::HttpServer>(router_, settings_.http_limits);
  api_->set_http_counters(&http_server_->counters());
  if (authorizer_ != nullptr) http_server_->set_authorizer(authorizer_.get());
  if (!settings_.insecure) {
    RETURN_IF_ERROR(
        http_server_->EnableTls({.cert_file = settings_.tls.cert, .key_file = settings_.tls.key}));
  }
  AddMetricsSources();
  ASSIGN_OR_RETURN(http_port_, http_server_->Start(http_address_.host, http_address_.port));
  Started([this] {
    // Reports in progress end now: the grace is for answers that are nearly done.
    api_->CancelAnalyses();
    http_server_->Stop(/*grace_seconds=*/20);
  });
  // The exact line tests and scripts wait for.
  spdlog::info("podscope-coordinator listening on {}://{}:{} (store {})",
               settings_.insecure ? "http" : "https", http_address_.host, http_port_,
               settings_.data_dir);
  return absl::OkStatus();
}

// /metrics: every part's counters.
void Coordinator::AddMetricsSources() {
  api_->add_metrics_source([this](std::string* out) { shard_router_->AppendMetrics(out); });
  if (authorizer_ != nullptr)
    api_->add_metrics_source([this](std::string* out) { authorizer_->AppendMetrics(out); });
  api_->add_metrics_source([this](std::string* out) { grpc_gate_->AppendMetrics(out); });
  api_->add_metrics_source([this](std::string* out) { agent_service_->AppendMetrics(out); });
  api_->add_metrics_source([this](std::string* out) { AppendWatchMetrics(*watch_service_, out); });
  api_->add_metrics_source([this](std::string* out) { notifier_->AppendMetrics(out); });
  api_->add_metrics_source([this](std::string* out) {
    storage::AppendSetAsideMetrics(out,
                                   {{kSchedulesSetting, schedules_->SetAside().size()},
                                    {watch::kRulesSetting, watch_service_->SetAside().size()}});
  });
  if (!settings_.insecure) {
    api_->add_metrics_source([this](std::string* out) { agent_certificates_->AppendMetrics(out); });
  }
}

void Coordinator::ReloadCredentials() {
  if (!settings_.insecure) {
    // The CA first: when it is broken nothing changes, and the log says so truly.
    if (absl::Status ca = agent_certificates_->Load(); !ca.ok()) {
      spdlog::error("SIGHUP: keeping the old certificate, key and CA: {}", ca);
    } else if (absl::Status s = http_server_->EnableTls(
                   {.cert_file = settings_.tls.cert, .key_file = settings_.tls.key});
               !s.ok()) {
      spdlog::error("SIGHUP: CA re-read; keeping the old certificate and key: {}", s);
    } else {
      spdlog::info("SIGHUP: certificate, key and CA re-read");
    }
  }
  if (authorizer_ != nullptr) {
    absl::StatusOr<TokenStore> tokens = TokenStore::Load(settings_.auth_tokens);
    if (tokens.ok()) {
      spdlog::info("SIGHUP: {} bearer tokens from {}", tokens->size(), settings_.auth_tokens);
      authorizer_->Replace(std::move(*tokens));
    } else {
      spdlog::error("SIGHUP: keeping the old tokens: {}", tokens.status());
    }
  }
}

}  // namespace podscope::coordinator
