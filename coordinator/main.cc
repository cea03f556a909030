// podscope-coordinator: the daemon people and agents talk to. Serves the REST API over the
// RocksDB trace store, and the agents' gRPC control plane (DESIGN §1, §5): agent registry,
// clock alignment, capture scheduling and upload.
#include <signal.h>
#include <sys/resource.h>

#include <boost/json.hpp>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>

#include "CLI/CLI.hpp"
#include "common/json_config.h"
#include "common/parse_number.h"
#include "coordinator/agents/agent_registry.h"
#include "coordinator/agents/agent_service.h"
#include "coordinator/agents/clock_keeper.h"
#include "coordinator/agents/grpc_connection_gate.h"
#include "coordinator/api/live_api.h"
#include "coordinator/api/rest_api.h"
#include "coordinator/capture/capture_scheduler.h"
#include "coordinator/clock/clock_aligner.h"
#include "coordinator/http/http_server.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "storage/retention.h"
#include "storage/rocksdb_trace_store.h"

namespace {

using podscope::coordinator::ApiLimits;
using podscope::coordinator::HttpLimits;

struct Settings {
  std::string http = "127.0.0.1:8080";
  std::string grpc = "127.0.0.1:50051";
  std::string data_dir = "podscope-data";
  podscope::coordinator::SchedulerOptions scheduler;
  podscope::coordinator::AgentServiceOptions agents;
  podscope::coordinator::GrpcGateOptions grpc_gate;
  podscope::coordinator::ClockKeeperOptions clock_keeper;
  HttpLimits http_limits;
  ApiLimits api_limits;
  podscope::storage::RetentionPolicy retention;
  int retention_interval_seconds = 300;
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Reads the JSON config file; flags given on the command line win over it.
bool LoadConfig(const std::string& path, Settings* s, std::string* error) {
  absl::StatusOr<boost::json::object> root = podscope::common::ReadJsonConfig(path);
  if (!root.ok()) {
    *error = std::string(root.status().message());
    return false;
  }
  // Every key with its type and range in one place; a wrong one names itself and its range.
  try {
    using podscope::common::ConfigSection;
    constexpr int64_t kTiB = int64_t{1} << 40;
    const ConfigSection root_section(*root, "", {"http", "grpc", "data_dir", "limits", "capture", "agents", "retention"});
    root_section.String("http", &s->http, 512);
    root_section.String("grpc", &s->grpc, 512);
    root_section.String("data_dir", &s->data_dir);
    const ConfigSection l = root_section.Section(
        "limits", {"max_body_bytes", "max_upload_bytes", "max_document_bytes", "max_inflate_ratio", "max_connections",
                   "max_connections_per_client", "idle_timeout_seconds", "header_timeout_seconds",
                   "progress_interval_seconds", "min_progress_bytes", "max_ranks_per_capture", "max_events_per_worker",
                   "max_string_bytes", "max_header_bytes", "max_analysis_cache_bytes"});
    l.Integer("max_analysis_cache_bytes", &s->api_limits.max_analysis_cache_bytes, 0, kTiB);
    l.Integer("max_connections_per_client", &s->http_limits.max_connections_per_client, 1, 1'000'000);
    l.Integer("idle_timeout_seconds", &s->http_limits.idle_timeout_seconds, 1, 86'400);
    l.Integer("header_timeout_seconds", &s->http_limits.header_timeout_seconds, 1, 3'600);
    l.Integer("progress_interval_seconds", &s->http_limits.progress_interval_seconds, 1, 3'600);
    l.Integer("min_progress_bytes", &s->http_limits.min_progress_bytes, 1, 1 << 30);
    l.Integer("max_document_bytes", &s->api_limits.max_document_bytes, 1, kTiB);
    l.Integer("max_inflate_ratio", &s->api_limits.max_inflate_ratio, 1, 1'000'000);
    l.Integer("max_body_bytes", &s->http_limits.max_body_bytes, 1, kTiB);
    l.Integer("max_upload_bytes", &s->http_limits.max_upload_bytes, 1, kTiB);
    l.Integer("max_connections", &s->http_limits.max_connections, 1, 10'000'000);
    l.Integer("max_ranks_per_capture", &s->api_limits.max_ranks_per_capture, 1, 10'000'000);
    l.Integer("max_events_per_worker", &s->api_limits.max_events_per_worker, 1, kTiB);
    l.Integer("max_string_bytes", &s->api_limits.max_string_bytes, 1, 1 << 30);
    l.Integer("max_header_bytes", &s->http_limits.max_header_bytes, 1'024, 1 << 24);
    const ConfigSection c = root_section.Section(
        "capture", {"min_lead_ms", "lead_per_agent_ms", "capture_grace_ms", "upload_timeout_ms", "max_duration_ms",
                    "max_live_captures", "refine_clocks_with_collectives", "max_upload_bytes_per_worker"});
    c.Millis("min_lead_ms", &s->scheduler.min_lead_ns, 0, 3'600'000);
    c.Millis("lead_per_agent_ms", &s->scheduler.lead_per_agent_ns, 0, 60'000);
    c.Millis("capture_grace_ms", &s->scheduler.capture_grace_ns, 0, 3'600'000);
    c.Millis("upload_timeout_ms", &s->scheduler.upload_timeout_ns, 1, 86'400'000);
    c.Millis("max_duration_ms", &s->scheduler.max_duration_ns, 1, 86'400'000);
    c.Integer("max_live_captures", &s->scheduler.max_live_captures, 1, 1'000'000);
    c.Bool("refine_clocks_with_collectives", &s->scheduler.refine_with_collectives);
    c.Integer("max_upload_bytes_per_worker", &s->scheduler.max_upload_bytes_per_worker, 1, kTiB);
    const ConfigSection a = root_section.Section(
        "agents", {"heartbeat_interval_ms", "clock_sync_interval_ms", "clock_target_bound_us", "max_idle_connection_ms",
                   "max_grpc_memory_bytes", "max_streams_per_connection", "max_connections",
                   "max_connections_per_client", "forget_disconnected_after_ms"});
    a.Integer("forget_disconnected_after_ms", &s->agents.forget_disconnected_after_ms, 1, 7 * 86'400'000);
    a.Integer("max_connections", &s->grpc_gate.max_connections, 1, 10'000'000);
    a.Integer("max_connections_per_client", &s->grpc_gate.max_connections_per_client, 1, 10'000'000);
    a.Integer("max_idle_connection_ms", &s->agents.max_idle_connection_ms, 1, 86'400'000);
    a.Integer("max_grpc_memory_bytes", &s->agents.max_grpc_memory_bytes, 1 << 20, kTiB);
    a.Integer("max_streams_per_connection", &s->agents.max_streams_per_connection, 1, 1'000'000);
    a.Integer("heartbeat_interval_ms", &s->agents.heartbeat_interval_ms, 10, 3'600'000);
    a.Integer("clock_sync_interval_ms", &s->agents.clock_sync_interval_ms, 100, 86'400'000);
    double bound_us = 0;
    if (a.Has("clock_target_bound_us")) {
      a.Number("clock_target_bound_us", &bound_us, 0.001, 1e9);
      s->clock_keeper.target_bound_ns = static_cast<int64_t>(bound_us * 1e3);
    }
    const ConfigSection r = root_section.Section("retention", {"max_age_hours", "max_total_bytes", "interval_seconds"});
    double hours = 0;
    if (r.Has("max_age_hours")) {
      r.Number("max_age_hours", &hours, 0, 24.0 * 3650);
      s->retention.max_age_ns = static_cast<int64_t>(hours * 3.6e12);
    }
    r.Integer("max_total_bytes", &s->retention.max_total_bytes, 0, int64_t{1} << 50);
    r.Integer("interval_seconds", &s->retention_interval_seconds, 1, 86'400);
  } catch (const std::exception& e) {
    *error = "config " + path + ": " + e.what();
    return false;
  }
  return true;
}

bool SplitHostPort(const std::string& text, std::string* host, uint16_t* port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return false;
  *host = text.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  const absl::StatusOr<int64_t> p = podscope::common::ParseInt(std::string_view(text).substr(colon + 1));
  if (!p.ok() || *p < 0 || *p > 65535) return false;
  *port = static_cast<uint16_t>(*p);
  return !host->empty();
}

}  // namespace

int main(int argc, char** argv) {
  // The log, errors included, goes to stderr (stdout carries nothing a daemon's user reads).
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  CLI::App app{"podscope-coordinator: stores traces and serves podscope's REST API"};
  app.set_version_flag("--version", "podscope-coordinator 0.1.0");
  Settings settings;
  std::string config_path, http_flag, grpc_flag, data_dir_flag;
  app.add_option("--config", config_path, "JSON config file (listen addresses, data dir, limits, retention)");
  app.add_option("--http", http_flag, "REST listen address HOST:PORT (port 0: any free port) [127.0.0.1:8080]");
  app.add_option("--grpc", grpc_flag, "agent gRPC listen address HOST:PORT (port 0: any free port) [127.0.0.1:50051]");
  app.add_option("--data-dir", data_dir_flag, "RocksDB store directory [podscope-data]");
  // Exit codes: 0 success, 1 a runtime failure, 2 a wrong command line or config.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  std::string error;
  if (!config_path.empty() && !LoadConfig(config_path, &settings, &error)) {
    spdlog::error("{}", error);
    return 2;
  }
  if (!http_flag.empty()) settings.http = http_flag;
  if (!grpc_flag.empty()) settings.grpc = grpc_flag;
  if (!data_dir_flag.empty()) settings.data_dir = data_dir_flag;
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
  for (const auto& stale : std::filesystem::directory_iterator(upload_dir, ec)) std::filesystem::remove(stale.path(), ec);
  settings.http_limits.upload_dir = upload_dir;

  // Every multi-step change to a stored capture (imports, deletes, retention) holds this lock.
  absl::Mutex capture_mutations;
  podscope::coordinator::RestApi api(**store, settings.api_limits, NowNs, capture_mutations);
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
  podscope::coordinator::CaptureScheduler scheduler(**store, registry, aligner, settings.scheduler, NowNs);
  if (absl::Status s = scheduler.Recover(); !s.ok()) {
    spdlog::error("recovering live captures: {}", std::string(s.message()));
    return 1;
  }
  scheduler.Start();
  // Agents whose clock model is wide (a burst taken in a crowd or through jitter) sync again.
  podscope::coordinator::ClockKeeper clock_keeper(registry, aligner, settings.clock_keeper, NowNs);
  clock_keeper.Start();
  api.set_live_lookup([&scheduler](const std::string& id) { return scheduler.LiveRecord(id); });
  podscope::coordinator::AgentService agent_service(registry, aligner, scheduler, settings.agents, NowNs);
  grpc::ServerBuilder builder;
  // podscope accepts the agents' connections itself (bounded, all and per client address) and
  // hands them to gRPC.
  podscope::coordinator::GrpcConnectionGate grpc_gate(
      settings.grpc_gate, builder.experimental().AddExternalConnectionAcceptor(
                              grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
                              grpc::InsecureServerCredentials()));
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
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, static_cast<int>(settings.agents.max_idle_connection_ms));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, static_cast<int>(settings.agents.max_streams_per_connection));
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
  spdlog::info("podscope-coordinator agents on grpc://{}:{}", grpc_host, *grpc_bound);

  podscope::coordinator::Router router;
  api.Register(router);
  podscope::coordinator::LiveApi live_api(registry, aligner, scheduler, NowNs);
  live_api.Register(router);
  podscope::coordinator::HttpServer server(router, settings.http_limits);
  api.set_http_counters(&server.counters());
  api.add_metrics_source([&grpc_gate](std::string* out) { grpc_gate.AppendMetrics(out); });
  absl::StatusOr<uint16_t> bound = server.Start(host, port);
  if (!bound.ok()) {
    spdlog::error("{}", std::string(bound.status().message()));
    return 1;
  }
  // The exact line tests and scripts wait for.
  spdlog::info("podscope-coordinator listening on http://{}:{} (store {})", host, *bound, settings.data_dir);

  std::mutex mu;
  std::condition_variable stop_cv;
  bool stopping = false;
  std::thread retention([&] {
    if (settings.retention.max_age_ns == 0 && settings.retention.max_total_bytes == 0) return;
    std::unique_lock<std::mutex> lock(mu);
    while (!stop_cv.wait_for(lock, std::chrono::seconds(settings.retention_interval_seconds), [&] { return stopping; })) {
      lock.unlock();
      auto result = podscope::storage::EnforceRetention(**store, settings.retention, NowNs(), &capture_mutations);
      if (!result.ok()) spdlog::warn("retention: {}", std::string(result.status().message()));
      else if (!result->deleted.empty()) spdlog::info("retention deleted {} captures", result->deleted.size());
      lock.lock();
    }
  });

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  spdlog::info("signal {}: finishing in-flight requests", signal_number);
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
  }
  stop_cv.notify_all();
  retention.join();
  server.Stop(/*grace_seconds=*/20);
  grpc_gate.Stop();
  grpc_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  clock_keeper.Stop();
  scheduler.Stop();
  spdlog::info("stopped");
  return 0;
}
