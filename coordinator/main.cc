// podscope-coordinator: the daemon people and agents talk to. Serves the REST API over the
// RocksDB trace store, and the agents' gRPC control plane (DESIGN §1, §5): agent registry,
// clock alignment, capture scheduling and upload.
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
#include "absl/synchronization/mutex.h"
#include "common/parse_number.h"
#include "common/str_util.h"
#include "common/time_source.h"
#include "common/tls_files.h"
#include "coordinator/agents/agent_certificates.h"
#include "coordinator/agents/agent_registry.h"
#include "coordinator/agents/agent_service.h"
#include "coordinator/agents/grpc_connection_gate.h"
#include "coordinator/api/live_api.h"
#include "coordinator/api/rest_api.h"
#include "coordinator/api/schedules_api.h"
#include "coordinator/api/watch_api.h"
#include "coordinator/api/watch_metrics.h"
#include "coordinator/auth/token_authorizer.h"
#include "coordinator/capture/capture_scheduler.h"
#include "coordinator/clock/clock_aligner.h"
#include "coordinator/clock/clock_keeper.h"
#include "coordinator/coordinator_config.h"
#include "coordinator/http/http_server.h"
#include "coordinator/shards/shard_router.h"
#include "coordinator/ui/ui_routes.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "storage/retention.h"
#include "storage/rocksdb_trace_store.h"

namespace {

using podscope::coordinator::CoordinatorSettings;
using Settings = CoordinatorSettings;

int64_t NowNs() { return podscope::common::RealTime().Now(); }

bool SplitHostPort(const std::string& text, std::string* host, uint16_t* port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return false;
  *host = text.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']')
    *host = host->substr(1, host->size() - 2);
  const absl::StatusOr<int64_t> p =
      podscope::common::ParseInt(std::string_view(text).substr(colon + 1));
  if (!p.ok() || *p < 0 || *p > 65535) return false;
  *port = static_cast<uint16_t>(*p);
  return !host->empty();
}

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
    spdlog::error("--role: {}", std::string(role.status().message()));
    return 2;
  }
  absl::StatusOr<std::string> line = podscope::coordinator::HashTokenLine(name, *role, token);
  if (!line.ok()) {
    spdlog::error("{}", std::string(line.status().message()));
    return 2;
  }
  std::cout << *line << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // The log, errors included, goes to stderr (stdout carries nothing a daemon's user reads).
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  CLI::App app{"podscope-coordinator: stores traces and serves podscope's REST API"};
  app.set_version_flag("--version", "podscope-coordinator 0.1.0");
  Settings settings;
  std::string config_path, http_flag, grpc_flag, data_dir_flag;
  app.add_option("--config", config_path,
                 "JSON config file (listen addresses, data dir, limits, retention)");
  app.add_option("--http", http_flag,
                 "REST listen address HOST:PORT (port 0: any free port) [127.0.0.1:8080]");
  app.add_option("--grpc", grpc_flag,
                 "agent gRPC listen address HOST:PORT (port 0: any free port) [127.0.0.1:50051]");
  app.add_option("--data-dir", data_dir_flag, "RocksDB store directory [podscope-data]");
  podscope::common::TlsFiles tls_flags;
  bool insecure_flag = false;
  app.add_option("--tls-cert", tls_flags.cert,
                 "this coordinator's certificate chain, PEM (HTTPS and the agents' port)");
  app.add_option("--tls-key", tls_flags.key, "its private key, PEM");
  app.add_option("--tls-ca", tls_flags.ca, "the CA agents' certificates must chain to, PEM");
  app.add_flag("--insecure", insecure_flag,
               "plaintext HTTP and gRPC, no client certificates: only on a network you trust (logs "
               "a warning)");
  std::string auth_tokens_flag;
  app.add_option("--auth-tokens", auth_tokens_flag,
                 "the REST API's token file (lines from hash-token; reloaded on SIGHUP)");
  std::string shard_name_flag;
  app.add_option(
      "--shard-name", shard_name_flag,
      "this replica's name among the shards (shards.members_file); in Kubernetes, its pod's name");
  bool check_config = false;
  app.add_flag("--check-config", check_config,
               "check the config file, flags, token file and TLS files, print \"config OK\" and "
               "exit (0 if good, 2 if not)");
  std::string hash_role, hash_name;
  CLI::App* hash_token = app.add_subcommand(
      "hash-token", "read a bearer token on stdin and print its line for the --auth-tokens file");
  hash_token->add_option("--role", hash_role, "read, capture or admin")->required();
  hash_token
      ->add_option("--name", hash_name, "who holds the token (shown in logs, never the token)")
      ->required();
  // Exit codes: 0 success, 1 a runtime failure, 2 a wrong command line or config.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (hash_token->parsed()) return HashToken(hash_role, hash_name);

  if (!config_path.empty()) {
    if (absl::Status s = podscope::coordinator::LoadCoordinatorConfig(config_path, &settings);
        !s.ok()) {
      spdlog::error("{}", std::string(s.message()));
      return 2;
    }
  }
  if (!http_flag.empty()) settings.http = http_flag;
  if (!grpc_flag.empty()) settings.grpc = grpc_flag;
  if (!data_dir_flag.empty()) settings.data_dir = data_dir_flag;
  if (!auth_tokens_flag.empty()) settings.auth_tokens = auth_tokens_flag;
  if (!shard_name_flag.empty()) settings.shards.self = shard_name_flag;
  if (!tls_flags.cert.empty()) settings.tls.cert = tls_flags.cert;
  if (!tls_flags.key.empty()) settings.tls.key = tls_flags.key;
  if (!tls_flags.ca.empty()) settings.tls.ca = tls_flags.ca;
  settings.insecure = settings.insecure || insecure_flag;
  if (absl::Status s =
          podscope::common::CheckTlsChoice(settings.tls, settings.insecure, "podscope-coordinator");
      !s.ok()) {
    spdlog::error("{}", std::string(s.message()));
    return 2;
  }
  if (!settings.insecure && settings.auth_tokens.empty()) {
    spdlog::error(
        "podscope-coordinator needs --auth-tokens FILE (lines from `podscope-coordinator "
        "hash-token`) unless "
        "--insecure is given");
    return 2;
  }
  if (settings.insecure) {
    spdlog::warn(
        "--insecure: the REST API and the agents' port speak plaintext and take agents without "
        "certificates; "
        "anyone who can reach them can read traces{}",
        settings.auth_tokens.empty() ? " and start captures" : "");
  }
  settings.agents.require_certificate_identity = !settings.insecure;
  std::unique_ptr<podscope::coordinator::TokenAuthorizer> authorizer;
  if (!settings.auth_tokens.empty()) {
    absl::StatusOr<podscope::coordinator::TokenStore> tokens =
        podscope::coordinator::TokenStore::Load(settings.auth_tokens);
    if (!tokens.ok()) {
      spdlog::error("--auth-tokens: {}", std::string(tokens.status().message()));
      return 2;
    }
    spdlog::info("{} bearer tokens from {}", tokens->size(), settings.auth_tokens);
    authorizer = std::make_unique<podscope::coordinator::TokenAuthorizer>(std::move(*tokens));
  }
  std::string host;
  uint16_t port = 0;
  if (!SplitHostPort(settings.http, &host, &port)) {
    spdlog::error("--http must be HOST:PORT, got \"{}\"", settings.http);
    return 2;
  }
  std::string grpc_host;
  uint16_t grpc_port = 0;
  if (!SplitHostPort(settings.grpc, &grpc_host, &grpc_port)) {
    spdlog::error("--grpc must be HOST:PORT, got \"{}\"", settings.grpc);
    return 2;
  }
  absl::StatusOr<std::unique_ptr<podscope::coordinator::ShardMembership>> shards =
      podscope::coordinator::ShardMembership::Open(settings.shards);
  if (!shards.ok()) {
    spdlog::error("{}", std::string(shards.status().message()));
    return 2;
  }
  // Everything above has been checked: the config's keys, the TLS files (CheckTlsChoice reads
  // and parses all three), the token file.
  if (check_config) {
    std::cout << "config OK" << std::endl;
    return 0;
  }
  settings.scheduler.max_events_per_worker = settings.api_limits.max_events_per_worker;
  settings.scheduler.max_workers_per_capture = settings.api_limits.max_ranks_per_capture;

  // Every connection is a descriptor: take all the hard limit allows, so that running out takes a
  // real flood (and the REST accept loop sheds and backs off when it happens).
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  // Signals are waited for on the main thread; every other thread starts with them blocked.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::error_code ec;
  std::filesystem::create_directories(settings.data_dir, ec);
  auto store = podscope::storage::RocksDbTraceStore::Open({.path = settings.data_dir});
  if (!store.ok()) {
    spdlog::error("cannot open the store: {}", std::string(store.status().message()));
    return 1;
  }
  const std::string upload_dir = settings.data_dir + "/uploads";
  std::filesystem::create_directories(upload_dir, ec);
  for (const auto& stale : std::filesystem::directory_iterator(upload_dir, ec))
    std::filesystem::remove(stale.path(), ec);
  settings.http_limits.upload_dir = upload_dir;

  // Every multi-step change to a stored capture (imports, deletes, retention) holds this lock.
  absl::Mutex capture_mutations;
  podscope::coordinator::RestApi api(**store, settings.api_limits, podscope::common::RealTime(),
                                     capture_mutations);
  // Sharded: ids end with their shard's tag, so that no two shards ever make the same one.
  const std::string id_suffix = settings.shards.members_file.empty()
                                    ? ""
                                    : "-" + podscope::coordinator::ShardTag(settings.shards.self);
  settings.scheduler.id_suffix = id_suffix;
  api.set_id_suffix(id_suffix);
  if (absl::Status s = api.RecoverInterruptedImports(); !s.ok()) {
    spdlog::error("recovering interrupted imports: {}", std::string(s.message()));
    return 1;
  }
  if (absl::Status s = api.LoadCacheIndex(); !s.ok()) {
    spdlog::error("indexing cached analyses: {}", std::string(s.message()));
    return 1;
  }
  // The live capture path: agents connect over gRPC, captures are started over REST.
  podscope::coordinator::AgentRegistry registry(
      {.heartbeat_interval_ns = int64_t{settings.agents.heartbeat_interval_ms} * 1'000'000,
       .forget_after_ns = int64_t{settings.agents.forget_disconnected_after_ms} * 1'000'000},
      NowNs);
  podscope::coordinator::ClockAligner aligner;
  podscope::coordinator::CaptureScheduler scheduler(**store, registry, aligner, settings.scheduler);
  if (absl::Status s = scheduler.Recover(); !s.ok()) {
    spdlog::error("recovering live captures: {}", std::string(s.message()));
    return 1;
  }
  scheduler.Start();
  // Agents whose clock model is wide (a burst taken in a crowd or through jitter) sync again.
  podscope::coordinator::ClockKeeper clock_keeper(registry, aligner, settings.clock_keeper);
  clock_keeper.Start();
  api.set_live_lookup([&scheduler](const std::string& id) { return scheduler.LiveRecord(id); });
  // Watching every job between captures: rules kept in the store, alerts evaluated on a timer,
  // the agents' summaries in through their Watch streams.
  absl::StatusOr<std::unique_ptr<podscope::coordinator::watch::WatchService>> watch =
      podscope::coordinator::watch::WatchService::Create(**store);
  if (!watch.ok()) {
    spdlog::error("{}", std::string(watch.status().message()));
    return 1;
  }
  // Captures nobody waits on (evidence, schedules) start a second later than the scheduler's
  // minimum lead: a busy agent then still acknowledges in time, and a second costs nothing.
  constexpr int64_t kBackgroundCaptureLeadNs = 1'000'000'000;
  // An alert that fires captures its job (rate-limited per job), so its evidence is kept.
  (*watch)->SetEvidenceStarter(
      [&scheduler](const std::string& job, int64_t duration_ns) -> absl::StatusOr<std::string> {
        absl::StatusOr<podscope::storage::CaptureRecord> capture = scheduler.StartCapture(
            {.job = job, .duration_ns = duration_ns, .delay_ns = kBackgroundCaptureLeadNs});
        if (!capture.ok()) return capture.status();
        return capture->id;
      });
  (*watch)->Start();
  podscope::coordinator::AgentService agent_service(registry, aligner, scheduler, settings.agents,
                                                    NowNs);
  podscope::coordinator::watch::WatchService& watch_service = **watch;
  podscope::coordinator::ShardMembership& membership = **shards;
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
  // Sharded: agents hear who owns each of their jobs in their welcome, and again whenever the
  // members change; the jobs this shard no longer owns stop being watched here.
  if (!settings.shards.members_file.empty()) {
    agent_service.set_shard_owners([&membership](const std::set<std::string>& jobs)
                                       -> std::optional<podscope::v1::ShardOwners> {
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
  grpc::ServerBuilder builder;
  // podscope accepts the agents' connections itself (bounded, all and per client address) and
  // hands them to gRPC.
  // With TLS, agents must present a certificate chaining to --tls-ca (checked and counted here).
  podscope::coordinator::AgentCertificates agent_certificates(settings.tls.ca);
  std::shared_ptr<grpc::ServerCredentials> grpc_credentials = grpc::InsecureServerCredentials();
  if (!settings.insecure) {
    if (absl::Status s = agent_certificates.Load(); !s.ok()) {
      spdlog::error("{}", std::string(s.message()));
      return 2;
    }
    grpc_credentials =
        podscope::coordinator::AgentServerCredentials(settings.tls, agent_certificates);
  }
  podscope::coordinator::GrpcConnectionGate grpc_gate(
      settings.grpc_gate,
      builder.experimental().AddExternalConnectionAcceptor(
          grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
          grpc_credentials));
  absl::StatusOr<uint16_t> grpc_bound = grpc_gate.Listen(grpc_host, grpc_port);
  if (!grpc_bound.ok()) {
    spdlog::error("{} (address in use?)", std::string(grpc_bound.status().message()));
    return 1;
  }
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
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             static_cast<int>(settings.agents.max_streams_per_connection));
  grpc::ResourceQuota quota("podscope-agents");
  quota.Resize(settings.agents.max_grpc_memory_bytes);
  builder.SetResourceQuota(quota);
  std::unique_ptr<grpc::Server> grpc_server = builder.BuildAndStart();
  if (!grpc_server) {
    spdlog::error("cannot start the gRPC server");
    return 1;
  }
  grpc_gate.Start();
  // The exact line tests and scripts wait for.
  spdlog::info("podscope-coordinator agents on grpc://{}:{} ({})", grpc_host, *grpc_bound,
               settings.insecure ? "plaintext" : "mutual TLS");

  podscope::coordinator::Router router;
  api.Register(router);
  podscope::coordinator::LiveApi live_api(registry, aligner, scheduler, NowNs);
  live_api.Register(router);
  // Alert transitions out to Alertmanager and webhooks, each on its own thread.
  absl::StatusOr<std::unique_ptr<podscope::coordinator::watch::AlertNotifier>> notifier =
      podscope::coordinator::watch::AlertNotifier::Create(settings.notify, [&watch_service] {
        std::vector<podscope::coordinator::watch::Alert> firing;
        for (podscope::coordinator::watch::Alert& a : watch_service.Alerts()) {
          if (a.state == podscope::coordinator::watch::AlertState::kFiring)
            firing.push_back(std::move(a));
        }
        return firing;
      });
  if (!notifier.ok()) {
    spdlog::error("{}", std::string(notifier.status().message()));
    return 2;
  }
  (*notifier)->Start();
  watch_service.OnTransition(
      [&notifier](const podscope::coordinator::watch::AlertEvent& e) { (*notifier)->Notify(e); });
  // Periodic captures, kept in the store; never over a running capture of the same job.
  podscope::coordinator::ScheduleLimits schedule_limits;
  schedule_limits.id_suffix = id_suffix;
  absl::StatusOr<std::unique_ptr<podscope::coordinator::ScheduleRunner>> schedules =
      podscope::coordinator::ScheduleRunner::Create(
          **store, NowNs,
          {.start = [&scheduler, &shards](const podscope::coordinator::ScheduleSpec& spec)
               -> absl::StatusOr<std::string> {
             // Sharded: a schedule stays with the shard that took it; once its job has moved to
             // another shard (a replica was added) the job's agents are there, not here.
             const std::shared_ptr<const podscope::coordinator::ShardMap> map =
                 (*shards)->current();
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
  if (!schedules.ok()) {
    spdlog::error("{}", std::string(schedules.status().message()));
    return 1;
  }
  (*schedules)->Start();
  podscope::coordinator::SchedulesApi schedules_api(**schedules);
  schedules_api.Register(router);
  podscope::coordinator::WatchApi watch_api(**watch);
  watch_api.Register(router);
  podscope::coordinator::RegisterUi(router);
  // Sharded: any replica answers for any job (the routes' handlers stay unaware of shards).
  podscope::coordinator::ShardRouter shard_router(**shards,
                                                  settings.insecure ? "" : settings.tls.ca);
  if (!settings.shards.members_file.empty()) {
    if (const auto unmatched =
            shard_router.Install(router, podscope::coordinator::ShardRouter::ApiRules());
        !unmatched.empty()) {
      spdlog::error("shards: no route {} {} to shard (a bug)", unmatched.front().method,
                    unmatched.front().pattern);
      return 1;
    }
  }
  api.add_metrics_source([&shard_router](std::string* out) { shard_router.AppendMetrics(out); });
  if (settings.open_metrics)
    router.SetAccess("GET", "/metrics", podscope::coordinator::Access::kOpen);
  podscope::coordinator::HttpServer server(router, settings.http_limits);
  api.set_http_counters(&server.counters());
  if (authorizer != nullptr) {
    server.set_authorizer(authorizer.get());
    api.add_metrics_source([&authorizer](std::string* out) { authorizer->AppendMetrics(out); });
  }
  api.add_metrics_source([&grpc_gate](std::string* out) { grpc_gate.AppendMetrics(out); });
  api.add_metrics_source([&agent_service](std::string* out) { agent_service.AppendMetrics(out); });
  api.add_metrics_source([&watch_service](std::string* out) {
    podscope::coordinator::AppendWatchMetrics(watch_service, out);
  });
  api.add_metrics_source([&notifier](std::string* out) { (*notifier)->AppendMetrics(out); });
  if (!settings.insecure) {
    if (absl::Status s =
            server.EnableTls({.cert_file = settings.tls.cert, .key_file = settings.tls.key});
        !s.ok()) {
      spdlog::error("{}", std::string(s.message()));
      return 2;
    }
    api.add_metrics_source(
        [&agent_certificates](std::string* out) { agent_certificates.AppendMetrics(out); });
  }
  absl::StatusOr<uint16_t> bound = server.Start(host, port);
  if (!bound.ok()) {
    spdlog::error("{}", std::string(bound.status().message()));
    return 1;
  }
  // Re-reading the members starts last: its listeners use everything above, and every early
  // return is behind us (the destructors would otherwise race the watcher).
  (*shards)->StartWatching();
  // The exact line tests and scripts wait for.
  spdlog::info("podscope-coordinator listening on {}://{}:{} (store {})",
               settings.insecure ? "http" : "https", host, *bound, settings.data_dir);

  absl::Mutex mu;
  bool stopping = false;  // under mu
  std::thread retention([&] {
    if (settings.retention.max_age_ns == 0 && settings.retention.max_total_bytes == 0) return;
    const absl::Duration interval = absl::Seconds(settings.retention_interval_seconds);
    while (true) {
      {
        absl::MutexLock lock(&mu);
        if (mu.AwaitWithTimeout(absl::Condition(&stopping), interval)) return;
      }
      auto result = podscope::storage::EnforceRetention(**store, settings.retention, NowNs(),
                                                        &capture_mutations);
      if (!result.ok())
        spdlog::warn("retention: {}", std::string(result.status().message()));
      else if (!result->deleted.empty())
        spdlog::info("retention deleted {} captures", result->deleted.size());
    }
  });

  int signal_number = 0;
  while (sigwait(&signals, &signal_number) == 0 && signal_number == SIGHUP) {
    // Rotated credentials take effect without a restart; a broken file keeps the old ones. (The
    // agents' port re-reads its certificate and key by itself, every minute.)
    if (!settings.insecure) {
      absl::Status s =
          server.EnableTls({.cert_file = settings.tls.cert, .key_file = settings.tls.key});
      if (s.ok()) s = agent_certificates.Load();
      if (s.ok())
        spdlog::info("SIGHUP: certificate, key and CA re-read");
      else
        spdlog::error("SIGHUP: keeping the old certificates: {}", std::string(s.message()));
    }
    if (authorizer != nullptr) {
      absl::StatusOr<podscope::coordinator::TokenStore> tokens =
          podscope::coordinator::TokenStore::Load(settings.auth_tokens);
      if (tokens.ok()) {
        spdlog::info("SIGHUP: {} bearer tokens from {}", tokens->size(), settings.auth_tokens);
        authorizer->Replace(std::move(*tokens));
      } else {
        spdlog::error("SIGHUP: keeping the old tokens: {}", std::string(tokens.status().message()));
      }
    }
  }
  spdlog::info("signal {}: finishing in-flight requests", signal_number);
  {
    absl::MutexLock lock(&mu);
    stopping = true;
  }
  retention.join();
  (*shards)->StopWatching();
  server.Stop(/*grace_seconds=*/20);
  grpc_gate.Stop();
  grpc_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  clock_keeper.Stop();
  (*schedules)->Stop();
  (*watch)->Stop();
  (*notifier)->Stop();
  scheduler.Stop();
  spdlog::info("stopped");
  return 0;
}
