// podscope-coordinator: the daemon people and agents talk to. Serves the REST API over the
// RocksDB trace store, and the agents' gRPC control plane (docs/life-of-a-capture.md): agent
// registry, clock alignment, capture scheduling and upload.
#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <set>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/escaping.h"
#include "absl/synchronization/mutex.h"
#include "common/host_port.h"
#include "common/status_format.h"
#include "common/str_util.h"
#include "common/time_source.h"
#include "common/tls_files.h"
#include "coordinator/agents/agent_registry.h"
#include "coordinator/api/live_api.h"
#include "coordinator/api/rest_api.h"
#include "coordinator/api/schedules_api.h"
#include "coordinator/api/watch_api.h"
#include "coordinator/api/watch_metrics.h"
#include "coordinator/auth/token_authorizer.h"
#include "coordinator/capture/capture_scheduler.h"
#include "coordinator/clock/clock_aligner.h"
#include "coordinator/clock/clock_keeper.h"
#include "coordinator/control/agent_certificates.h"
#include "coordinator/control/agent_service.h"
#include "coordinator/control/grpc_connection_gate.h"
#include "coordinator/coordinator_config.h"
#include "coordinator/http/http_server.h"
#include "coordinator/shards/shard_router.h"
#include "coordinator/ui/ui_routes.h"
#include "podscope/version.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "storage/retention.h"
#include "storage/rocksdb_trace_store.h"
#include "storage/set_aside.h"

namespace {

using podscope::coordinator::CoordinatorSettings;
using Settings = CoordinatorSettings;

// `podscope-coordinator hash-token --role ROLE --name NAME`: reads a token on stdin, prints
// the line for the token file. The token itself is never printed nor stored.
int HashToken(const std::string& role_text, const std::string& name) {
  std::string token;
  if (isatty(STDIN_FILENO))
    std::cerr << "token to hash (the line printed holds only its salted hash): " << std::flush;
  std::getline(std::cin, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == '\n')) token.pop_back();
  absl::StatusOr<podscope::coordinator::Access> role = podscope::coordinator::ParseRole(role_text);
  if (!role.ok()) {
    spdlog::error("--role: {}", role.status());
    return 2;
  }
  absl::StatusOr<std::string> line = podscope::coordinator::HashTokenLine(name, *role, token);
  if (!line.ok()) {
    spdlog::error("{}", line.status());
    return 2;
  }
  std::cout << *line << "\n";
  return 0;
}

// The command line: flags override the config file's keys.
struct CommandLine {
  std::string config_path, http, grpc, data_dir, auth_tokens, shard_name;
  podscope::common::TlsFiles tls;
  bool insecure = false;
  bool check_config = false;
  CLI::App* hash_token = nullptr;
  std::string hash_role, hash_name;
};

void AddFlags(CLI::App& app, CommandLine& c) {
  app.set_version_flag("--version", std::string("podscope-coordinator ") + podscope::kVersion);
  app.add_option("--config", c.config_path,
                 "JSON config file (listen addresses, data dir, limits, retention)");
  app.add_option("--http", c.http,
                 "REST listen address HOST:PORT (port 0: any free port) [127.0.0.1:8080]");
  app.add_option("--grpc", c.grpc,
                 "agent gRPC listen address HOST:PORT (port 0: any free port) [127.0.0.1:50051]");
  app.add_option("--data-dir", c.data_dir, "RocksDB store directory [podscope-data]");
  app.add_option("--tls-cert", c.tls.cert,
                 "this coordinator's certificate chain, PEM (HTTPS and the agents' port)");
  app.add_option("--tls-key", c.tls.key, "its private key, PEM");
  app.add_option("--tls-ca", c.tls.ca, "the CA agents' certificates must chain to, PEM");
  app.add_flag("--insecure", c.insecure,
               "plaintext HTTP and gRPC, no client certificates: only on a network you trust (logs "
               "a warning)");
  app.add_option("--auth-tokens", c.auth_tokens,
                 "the REST API's token file (lines from hash-token; reloaded on SIGHUP)");
  app.add_option(
      "--shard-name", c.shard_name,
      "this replica's name among the shards (shards.members_file); in Kubernetes, its pod's name");
  app.add_flag("--check-config", c.check_config,
               "check the config file, flags, token file and TLS files, print \"config OK\" and "
               "exit (0 if good, 2 if not)");
  c.hash_token = app.add_subcommand(
      "hash-token", "read a bearer token on stdin and print its line for the --auth-tokens file");
  c.hash_token->add_option("--role", c.hash_role, "read, capture or admin")->required();
  c.hash_token
      ->add_option("--name", c.hash_name, "who holds the token (shown in logs, never the token)")
      ->required();
}

// The config file, then the flags over it.
absl::Status LoadSettings(const CommandLine& c, Settings* settings) {
  if (!c.config_path.empty()) {
    if (absl::Status s = podscope::coordinator::LoadCoordinatorConfig(c.config_path, settings);
        !s.ok())
      return s;
  }
  if (!c.http.empty()) settings->http = c.http;
  if (!c.grpc.empty()) settings->grpc = c.grpc;
  if (!c.data_dir.empty()) settings->data_dir = c.data_dir;
  if (!c.auth_tokens.empty()) settings->auth_tokens = c.auth_tokens;
  if (!c.shard_name.empty()) settings->shards.self = c.shard_name;
  if (!c.tls.cert.empty()) settings->tls.cert = c.tls.cert;
  if (!c.tls.key.empty()) settings->tls.key = c.tls.key;
  if (!c.tls.ca.empty()) settings->tls.ca = c.tls.ca;
  settings->insecure = settings->insecure || c.insecure;
  return podscope::common::CheckTlsChoice(settings->tls, settings->insecure,
                                          "podscope-coordinator");
}

// Without TLS and tokens only by --insecure, said loudly; the token file read and checked.
absl::StatusOr<std::unique_ptr<podscope::coordinator::TokenAuthorizer>> LoadAuthorizer(
    const Settings& settings) {
  if (!settings.insecure && settings.auth_tokens.empty()) {
    return absl::InvalidArgumentError(
        "podscope-coordinator needs --auth-tokens FILE (lines from `podscope-coordinator "
        "hash-token`) unless "
        "--insecure is given");
  }
  if (settings.insecure) {
    spdlog::warn(
        "--insecure: the REST API and the agents' port speak plaintext and take agents without "
        "certificates; "
        "anyone who can reach them can read traces{}",
        settings.auth_tokens.empty() ? " and start captures" : "");
  }
  if (settings.auth_tokens.empty()) return nullptr;
  absl::StatusOr<podscope::coordinator::TokenStore> tokens =
      podscope::coordinator::TokenStore::Load(settings.auth_tokens);
  if (!tokens.ok()) {
    return absl::InvalidArgumentError(
        podscope::common::StrCat("--auth-tokens: ", tokens.status().message()));
  }
  spdlog::info("{} bearer tokens from {}", tokens->size(), settings.auth_tokens);
  return std::make_unique<podscope::coordinator::TokenAuthorizer>(std::move(*tokens));
}

// Every connection is a descriptor: take all the hard limit allows, so that running out takes a
// real flood (and the REST accept loop sheds and backs off when it happens).
void RaiseDescriptorLimit() {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
}

// Signals are waited for on the main thread; every other thread starts with them blocked.
sigset_t BlockShutdownSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// Uploads in flight when the coordinator last stopped are gone with their agents' streams.
std::string EmptyUploadDir(const Settings& settings) {
  std::error_code ec;
  const std::string upload_dir = settings.data_dir + "/uploads";
  std::filesystem::create_directories(upload_dir, ec);
  for (const auto& stale : std::filesystem::directory_iterator(upload_dir, ec))
    std::filesystem::remove(stale.path(), ec);
  return upload_dir;
}

// The agents' watch summaries go to the watch service; sharded, only the steps of the jobs this
// shard owns.
void RouteWatchIngest(podscope::coordinator::AgentService& agent_service,
                      podscope::coordinator::watch::WatchService& watch_service,
                      podscope::coordinator::ShardMembership& membership) {
  agent_service.set_watch_ingest(
      {.ingest =
           [&watch_service, &membership](const std::string& agent,
                                         const podscope::common::DecodedWatch& data) {
             const std::shared_ptr<const podscope::coordinator::ShardMap> map =
                 membership.current();
             if (!map->sharded()) {
               watch_service.Ingest(agent, data);
               return;
             }
             // Sharded: only the owner watches a job (an agent that has not yet heard who owns it
             // may send here; its steps of another shard's job are not this shard's to judge).
             podscope::common::DecodedWatch mine;
             mine.dropped_steps = data.dropped_steps;
             for (const auto& step : data.steps) {
               if (map->Owns(step.first)) mine.steps.push_back(step);
             }
             for (const auto& progress : data.progress) {
               if (map->Owns(progress.first)) mine.progress.push_back(progress);
             }
             watch_service.Ingest(agent, mine);
           },
       .set_host = [&watch_service](
                       const std::string& job, int32_t rank,
                       const std::string& host) { watch_service.SetHost(job, rank, host); }});
}

// Sharded: agents hear who owns each of their jobs in their welcome, and again whenever the
// members change; the jobs this shard no longer owns stop being watched here.
void TellAgentsTheOwners(podscope::coordinator::AgentService& agent_service,
                         podscope::coordinator::watch::WatchService& watch_service,
                         podscope::coordinator::ShardMembership& membership,
                         const Settings& settings) {
  agent_service.set_shard_owners(
      [&membership](const std::set<std::string>& jobs) -> std::optional<podscope::v1::ShardOwners> {
        const std::shared_ptr<const podscope::coordinator::ShardMap> map = membership.current();
        podscope::v1::ShardOwners owners;
        owners.set_shard(map->self().name);
        for (const std::string& job : jobs) {
          const podscope::coordinator::ShardMember& owner = map->OwnerOf(job);
          podscope::v1::JobOwner* o = owners.add_owners();
          o->set_job(job);
          o->set_shard(owner.name);
          o->set_grpc(owner.grpc);
        }
        return owners;
      });
  membership.OnChange(
      [&agent_service, &watch_service](const podscope::coordinator::ShardMap&,
                                       const podscope::coordinator::ShardMap& after) {
        agent_service.PushShardOwners();
        watch_service.ForgetJobs([&after](const std::string& job) { return after.Owns(job); });
      });
  const std::shared_ptr<const podscope::coordinator::ShardMap> map = membership.current();
  spdlog::info(
      "shards: this is {} of {} members (members re-read from {} every {} ms; REST calls {})",
      map->self().name, map->members().size(), settings.shards.members_file,
      settings.shards.reload_interval_ms, settings.shards.redirect ? "redirected" : "proxied");
}

// The agents' gRPC server on connections `gate` accepts. Its channel arguments bound what one
// agent, or all of them, can hold.
std::unique_ptr<grpc::Server> BuildAgentServer(grpc::ServerBuilder& builder,
                                               podscope::coordinator::AgentService& agent_service,
                                               const Settings& settings) {
  builder.RegisterService(&agent_service);
  builder.SetMaxReceiveMessageSize(64 << 20);
  // Agents ping every 20 s even when idle; allow it rather than answering with GOAWAY.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Two coordinators on one port would split the agents between them silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Connections that hold no call are closed; all connections share a memory bound.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             static_cast<int>(settings.agents.max_idle_connection_ms));
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             static_cast<int>(settings.agents.tls_handshake_timeout_ms));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             static_cast<int>(settings.agents.max_streams_per_connection));
  grpc::ResourceQuota quota("podscope-agents");
  quota.Resize(settings.agents.max_grpc_memory_bytes);
  builder.SetResourceQuota(quota);
  return builder.BuildAndStart();
}

// Captures nobody waits on (evidence, schedules) start a second later than the scheduler's
// minimum lead: a busy agent then still acknowledges in time, and a second costs nothing.
constexpr int64_t kBackgroundCaptureLeadNs = 1'000'000'000;

// Periodic captures, kept in the store; never over a running capture of the same job.
absl::StatusOr<std::unique_ptr<podscope::coordinator::ScheduleRunner>> MakeScheduleRunner(
    podscope::storage::TraceStore& store, podscope::coordinator::CaptureScheduler& scheduler,
    podscope::coordinator::ShardMembership& shards, const std::string& id_suffix) {
  podscope::coordinator::ScheduleLimits schedule_limits;
  schedule_limits.id_suffix = id_suffix;
  return podscope::coordinator::ScheduleRunner::Create(
      store, podscope::common::RealTime(),
      {.start = [&scheduler, &shards](const podscope::coordinator::ScheduleSpec& spec)
           -> absl::StatusOr<std::string> {
         // Sharded: a schedule stays with the shard that took it; once its job has moved to
         // another shard (a replica was added) the job's agents are there, not here.
         const std::shared_ptr<const podscope::coordinator::ShardMap> map = shards.current();
         if (!map->Owns(spec.job)) {
           return absl::FailedPreconditionError(podscope::common::StrCat(
               "job ", spec.job, " is owned by shard ", map->OwnerOf(spec.job).name,
               " now; delete this schedule and create it again (through any shard)"));
         }
         absl::StatusOr<podscope::storage::CaptureRecord> capture =
             scheduler.StartCapture({.job = spec.job,
                                     .ranks = spec.ranks,
                                     .duration_ns = spec.duration_ns,
                                     .delay_ns = kBackgroundCaptureLeadNs});
         if (!capture.ok()) return capture.status();
         return capture->id;
       },
       .busy = [&scheduler](const std::string& job) { return scheduler.HasLiveCapture(job); }},
      schedule_limits);
}

// Deletes what the retention policy says, every retention_interval_seconds, until stopped.
class RetentionLoop {
 public:
  RetentionLoop(podscope::storage::TraceStore& store, const Settings& settings,
                absl::Mutex& capture_mutations)
      : thread_([this, &store, &settings, &capture_mutations] {
          Run(store, settings, capture_mutations);
        }) {}
  ~RetentionLoop() { Stop(); }

  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Run(podscope::storage::TraceStore& store, const Settings& settings,
           absl::Mutex& capture_mutations) {
    if (settings.retention.max_age_ns == 0 && settings.retention.max_total_bytes == 0) return;
    const absl::Duration interval = absl::Seconds(settings.retention_interval_seconds);
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval)) return;
      }
      auto result = podscope::storage::EnforceRetention(
          store, settings.retention, podscope::common::RealTime().Now(), &capture_mutations);
      if (!result.ok())
        spdlog::warn("retention: {}", result.status());
      else if (!result->deleted.empty())
        spdlog::info("retention deleted {} captures", result->deleted.size());
    }
  }

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the members above exist
};

// Waits for SIGINT or SIGTERM and returns it; on SIGHUP re-reads the credentials. Rotated
// credentials take effect without a restart; a broken file keeps the old ones. (The agents' port
// re-reads its certificate and key by itself, every minute.)
int WaitForStop(const sigset_t& signals, const Settings& settings,
                podscope::coordinator::HttpServer& server,
                podscope::coordinator::AgentCertificates& agent_certificates,
                podscope::coordinator::TokenAuthorizer* authorizer) {
  int signal_number = 0;
  while (sigwait(&signals, &signal_number) == 0 && signal_number == SIGHUP) {
    if (!settings.insecure) {
      absl::Status s =
          server.EnableTls({.cert_file = settings.tls.cert, .key_file = settings.tls.key});
      if (s.ok()) s = agent_certificates.Load();
      if (s.ok())
        spdlog::info("SIGHUP: certificate, key and CA re-read");
      else
        spdlog::error("SIGHUP: keeping the old certificates: {}", s);
    }
    if (authorizer != nullptr) {
      absl::StatusOr<podscope::coordinator::TokenStore> tokens =
          podscope::coordinator::TokenStore::Load(settings.auth_tokens);
      if (tokens.ok()) {
        spdlog::info("SIGHUP: {} bearer tokens from {}", tokens->size(), settings.auth_tokens);
        authorizer->Replace(std::move(*tokens));
      } else {
        spdlog::error("SIGHUP: keeping the old tokens: {}", tokens.status());
      }
    }
  }
  return signal_number;
}

// Logs `s` and returns the exit code: 1 a runtime failure, 2 a wrong command line or config.
int Fail(const absl::Status& s, int code) {
  spdlog::error("{}", s);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace podscope::coordinator;  // main wires its parts together
  // The log, errors included, goes to stderr (stdout carries nothing a daemon's user reads).
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  CLI::App app{"podscope-coordinator: stores traces and serves podscope's REST API"};
  CommandLine command_line;
  AddFlags(app, command_line);
  // Exit codes: 0 success, 1 a runtime failure, 2 a wrong command line or config.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (command_line.hash_token->parsed())
    return HashToken(command_line.hash_role, command_line.hash_name);
  Settings settings;
  if (absl::Status s = LoadSettings(command_line, &settings); !s.ok()) return Fail(s, 2);
  settings.agents.require_certificate_identity = !settings.insecure;
  absl::StatusOr<std::unique_ptr<TokenAuthorizer>> authorizer = LoadAuthorizer(settings);
  if (!authorizer.ok()) return Fail(authorizer.status(), 2);
  const podscope::common::HostPortRules listen{.allow_port_zero = true};
  const absl::StatusOr<podscope::common::HostPort> http_address =
      podscope::common::ParseHostPort(settings.http, listen);
  if (!http_address.ok())
    return Fail(absl::InvalidArgumentError(
                    podscope::common::StrCat("--http: ", http_address.status().message())),
                2);
  const absl::StatusOr<podscope::common::HostPort> grpc_address =
      podscope::common::ParseHostPort(settings.grpc, listen);
  if (!grpc_address.ok())
    return Fail(absl::InvalidArgumentError(
                    podscope::common::StrCat("--grpc: ", grpc_address.status().message())),
                2);
  const std::string& host = http_address->host;
  const uint16_t port = http_address->port;
  const std::string& grpc_host = grpc_address->host;
  const uint16_t grpc_port = grpc_address->port;
  absl::StatusOr<std::unique_ptr<ShardMembership>> shards = ShardMembership::Open(settings.shards);
  if (!shards.ok()) return Fail(shards.status(), 2);
  // Everything above has been checked: the config's keys, the TLS files (CheckTlsChoice reads
  // and parses all three), the token file.
  if (command_line.check_config) {
    std::cout << "config OK" << std::endl;
    return 0;
  }
  settings.scheduler.max_events_per_worker = settings.api_limits.max_events_per_worker;
  settings.scheduler.max_workers_per_capture = settings.api_limits.max_ranks_per_capture;
  RaiseDescriptorLimit();
  const sigset_t signals = BlockShutdownSignals();

  std::error_code ec;
  std::filesystem::create_directories(settings.data_dir, ec);
  auto store = podscope::storage::RocksDbTraceStore::Open({.path = settings.data_dir});
  if (!store.ok()) {
    spdlog::error("cannot open the store: {}", store.status());
    return 1;
  }
  settings.http_limits.upload_dir = EmptyUploadDir(settings);

  // Every multi-step change to a stored capture (imports, deletes, retention) holds this lock.
  absl::Mutex capture_mutations;
  RestApi api(**store, settings.api_limits, podscope::common::RealTime(), capture_mutations);
  // Sharded: ids end with their shard's tag, so that no two shards ever make the same one.
  const std::string id_suffix =
      settings.shards.members_file.empty() ? "" : "-" + ShardTag(settings.shards.self);
  settings.scheduler.id_suffix = id_suffix;
  api.set_id_suffix(id_suffix);
  if (absl::Status s = api.RecoverInterruptedImports(); !s.ok()) {
    spdlog::error("recovering interrupted imports: {}", s);
    return 1;
  }
  // That listed every record: those that do not decode are kept, skipped, and said here once.
  for (const auto& [id, why] : (*store)->UnreadableCaptures()) {
    // The key as stored, escaped and cut: a damaged one may hold any bytes.
    const std::string shown = absl::CHexEscape(id.substr(0, 80));
    if (podscope::storage::ValidateCaptureId(id).ok()) {
      spdlog::warn("stored capture {}: {}; skipped and kept (DELETE /v1/captures/{} drops it)",
                   shown, why, shown);
    } else {
      spdlog::warn("stored capture record under a key that is no capture id (\"{}\"): {}; skipped",
                   shown, why);
    }
  }
  if (absl::Status s = api.LoadCacheIndex(); !s.ok()) {
    spdlog::error("indexing cached analyses: {}", s);
    return 1;
  }
  // The live capture path: agents connect over gRPC, captures are started over REST.
  AgentRegistry registry(
      {.heartbeat_interval_ns = int64_t{settings.agents.heartbeat_interval_ms} * 1'000'000,
       .forget_after_ns = int64_t{settings.agents.forget_disconnected_after_ms} * 1'000'000},
      podscope::common::RealTime());
  ClockAligner aligner;
  CaptureScheduler scheduler(**store, registry, aligner, settings.scheduler);
  if (absl::Status s = scheduler.Recover(); !s.ok()) {
    spdlog::error("recovering live captures: {}", s);
    return 1;
  }
  scheduler.Start();
  // Agents whose clock model is wide (a burst taken in a crowd or through jitter) sync again.
  ClockKeeper clock_keeper(registry, aligner, settings.clock_keeper);
  clock_keeper.Start();
  api.set_live_lookup([&scheduler](const std::string& id) { return scheduler.LiveRecord(id); });
  // Watching every job between captures: rules kept in the store, alerts evaluated on a timer,
  // the agents' summaries in through their Watch streams.
  absl::StatusOr<std::unique_ptr<watch::WatchService>> watch =
      watch::WatchService::Create(**store, podscope::common::RealTime(), settings.watch);
  if (!watch.ok()) return Fail(watch.status(), 1);
  watch::WatchService& watch_service = **watch;
  // An alert that fires captures its job (rate-limited per job), so its evidence is kept.
  watch_service.SetEvidenceStarter(
      [&scheduler](const std::string& job, int64_t duration_ns) -> absl::StatusOr<std::string> {
        absl::StatusOr<podscope::storage::CaptureRecord> capture = scheduler.StartCapture(
            {.job = job, .duration_ns = duration_ns, .delay_ns = kBackgroundCaptureLeadNs});
        if (!capture.ok()) return capture.status();
        return capture->id;
      });
  watch_service.Start();
  AgentService agent_service(registry, aligner, scheduler, settings.agents,
                             podscope::common::RealTime());
  ShardMembership& membership = **shards;
  RouteWatchIngest(agent_service, watch_service, membership);
  if (!settings.shards.members_file.empty())
    TellAgentsTheOwners(agent_service, watch_service, membership, settings);

  grpc::ServerBuilder builder;
  // podscope accepts the agents' connections itself (bounded, all and per client address) and
  // hands them to gRPC.
  // With TLS, agents must present a certificate chaining to --tls-ca (checked and counted here).
  AgentCertificates agent_certificates(settings.tls.ca);
  std::shared_ptr<grpc::ServerCredentials> grpc_credentials = grpc::InsecureServerCredentials();
  if (!settings.insecure) {
    if (absl::Status s = agent_certificates.Load(); !s.ok()) return Fail(s, 2);
    grpc_credentials = AgentServerCredentials(settings.tls, agent_certificates);
  }
  GrpcConnectionGate grpc_gate(
      settings.grpc_gate,
      builder.experimental().AddExternalConnectionAcceptor(
          grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
          grpc_credentials));
  // A call that reaches the service proves its connection (handshake and certificate done).
  agent_service.set_call_observer(
      [&grpc_gate](const std::string& peer) { grpc_gate.Authenticated(peer); });
  absl::StatusOr<uint16_t> grpc_bound = grpc_gate.Listen(grpc_host, grpc_port);
  if (!grpc_bound.ok()) {
    spdlog::error("{}", grpc_bound.status());
    return 1;
  }
  std::unique_ptr<grpc::Server> grpc_server = BuildAgentServer(builder, agent_service, settings);
  if (!grpc_server) {
    spdlog::error("cannot start the gRPC server");
    return 1;
  }
  grpc_gate.Start();
  // The exact line tests and scripts wait for.
  spdlog::info("podscope-coordinator agents on grpc://{}:{} ({})", grpc_host, *grpc_bound,
               settings.insecure ? "plaintext" : "mutual TLS");

  Router router;
  api.Register(router);
  LiveApi live_api(registry, aligner, scheduler, podscope::common::RealTime());
  live_api.Register(router);
  // Alert transitions out to Alertmanager and webhooks, each on its own thread.
  absl::StatusOr<std::unique_ptr<watch::AlertNotifier>> notifier =
      watch::AlertNotifier::Create(settings.notify, [&watch_service] {
        std::vector<watch::Alert> firing;
        for (watch::Alert& a : watch_service.Alerts()) {
          if (a.state == watch::AlertState::kFiring) firing.push_back(std::move(a));
        }
        return firing;
      });
  if (!notifier.ok()) return Fail(notifier.status(), 2);
  (*notifier)->Start();
  watch_service.OnTransition([&notifier](const watch::AlertEvent& e) { (*notifier)->Notify(e); });
  absl::StatusOr<std::unique_ptr<ScheduleRunner>> schedules =
      MakeScheduleRunner(**store, scheduler, membership, id_suffix);
  if (!schedules.ok()) return Fail(schedules.status(), 1);
  (*schedules)->Start();
  SchedulesApi schedules_api(**schedules, [&registry](const ScheduleSpec& spec) {
    return registry.SelectTargets(spec.job, spec.ranks).ok();
  });
  schedules_api.Register(router);
  WatchApi watch_api(watch_service);
  watch_api.Register(router);
  RegisterUi(router);
  // Sharded: any replica answers for any job (the routes' handlers stay unaware of shards).
  ShardRouter shard_router(membership, settings.insecure ? "" : settings.tls.ca);
  if (!settings.shards.members_file.empty()) {
    if (const auto unmatched = shard_router.Install(router, ShardRouter::ApiRules());
        !unmatched.empty()) {
      spdlog::error("shards: no route {} {} to shard (a bug)", unmatched.front().method,
                    unmatched.front().pattern);
      return 1;
    }
  }
  if (settings.open_metrics) router.SetAccess("GET", "/metrics", Access::kOpen);
  HttpServer server(router, settings.http_limits);
  api.set_http_counters(&server.counters());
  if (*authorizer != nullptr) server.set_authorizer(authorizer->get());
  if (!settings.insecure) {
    if (absl::Status s =
            server.EnableTls({.cert_file = settings.tls.cert, .key_file = settings.tls.key});
        !s.ok())
      return Fail(s, 2);
  }
  // /metrics: every part's counters.
  api.add_metrics_source([&shard_router](std::string* out) { shard_router.AppendMetrics(out); });
  if (*authorizer != nullptr) {
    api.add_metrics_source([&authorizer](std::string* out) { (*authorizer)->AppendMetrics(out); });
  }
  api.add_metrics_source([&grpc_gate](std::string* out) { grpc_gate.AppendMetrics(out); });
  api.add_metrics_source([&agent_service](std::string* out) { agent_service.AppendMetrics(out); });
  api.add_metrics_source(
      [&watch_service](std::string* out) { AppendWatchMetrics(watch_service, out); });
  api.add_metrics_source([&notifier](std::string* out) { (*notifier)->AppendMetrics(out); });
  api.add_metrics_source([&schedules, &watch_service](std::string* out) {
    podscope::storage::AppendSetAsideMetrics(
        out, {{kSchedulesSetting, (*schedules)->SetAside().size()},
              {watch::kRulesSetting, watch_service.SetAside().size()}});
  });
  if (!settings.insecure) {
    api.add_metrics_source(
        [&agent_certificates](std::string* out) { agent_certificates.AppendMetrics(out); });
  }
  absl::StatusOr<uint16_t> bound = server.Start(host, port);
  if (!bound.ok()) return Fail(bound.status(), 1);
  // Re-reading the members starts last: its listeners use everything above, and every early
  // return is behind us (the destructors would otherwise race the watcher).
  membership.StartWatching();
  // The exact line tests and scripts wait for.
  spdlog::info("podscope-coordinator listening on {}://{}:{} (store {})",
               settings.insecure ? "http" : "https", host, *bound, settings.data_dir);

  RetentionLoop retention(**store, settings, capture_mutations);
  const int signal_number =
      WaitForStop(signals, settings, server, agent_certificates, authorizer->get());
  spdlog::info("signal {}: finishing in-flight requests", signal_number);
  retention.Stop();
  membership.StopWatching();
  server.Stop(/*grace_seconds=*/20);
  grpc_gate.Stop();
  grpc_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  clock_keeper.Stop();
  (*schedules)->Stop();
  watch_service.Stop();
  (*notifier)->Stop();
  scheduler.Stop();
  spdlog::info("stopped");
  return 0;
}
