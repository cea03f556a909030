#include "coordinator/coordinator_config.h"

#include "common/json_config.h"
#include "common/status_macros.h"
#include "coordinator/shards/shard_map.h"

namespace podscope::coordinator {
namespace {

using common::ConfigSection;
constexpr int64_t kTiB = int64_t{1} << 40;

// Each section's keys with their types and ranges; a wrong one throws, naming itself and its
// range.
void ApplyLimits(const ConfigSection& root, CoordinatorSettings* s) {
  const ConfigSection l = root.Section("limits", {"max_body_bytes",
                                                  "max_upload_bytes",
                                                  "max_document_bytes",
                                                  "max_inflate_ratio",
                                                  "max_connections",
                                                  "max_connections_per_client",
                                                  "idle_timeout_seconds",
                                                  "header_timeout_seconds",
                                                  "progress_interval_seconds",
                                                  "min_progress_bytes",
                                                  "max_ranks_per_capture",
                                                  "max_events_per_worker",
                                                  "max_string_bytes",
                                                  "max_header_bytes",
                                                  "max_analysis_cache_bytes",
                                                  "max_unauthenticated_connections",
                                                  "max_unauthenticated_per_client",
                                                  "tls_handshake_timeout_seconds",
                                                  "min_eviction_age_ms",
                                                  "proven_client_seconds",
                                                  "max_connections_per_token",
                                                  "max_export_bytes"});
  l.Integer("max_export_bytes", &s->api_limits.max_export_bytes, 0, int64_t{1} << 50);
  l.Integer("max_connections_per_token", &s->http_limits.max_connections_per_token, 1, 10'000'000);
  l.Integer("min_eviction_age_ms", &s->http_limits.min_eviction_age_ms, 0, 600'000);
  l.Integer("proven_client_seconds", &s->http_limits.proven_client_seconds, 0, 7 * 86'400);
  l.Integer("max_unauthenticated_connections", &s->http_limits.max_unauthenticated_connections, 1,
            10'000'000);
  l.Integer("max_unauthenticated_per_client", &s->http_limits.max_unauthenticated_per_client, 1,
            1'000'000);
  l.Integer("tls_handshake_timeout_seconds", &s->http_limits.tls_handshake_timeout_seconds, 1, 600);
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
}

void ApplyCapture(const ConfigSection& root, CoordinatorSettings* s) {
  const ConfigSection c =
      root.Section("capture", {"min_lead_ms", "lead_per_agent_ms", "capture_grace_ms",
                               "upload_timeout_ms", "max_duration_ms", "max_live_captures",
                               "refine_clocks_with_collectives", "max_upload_bytes_per_worker"});
  c.Millis("min_lead_ms", &s->scheduler.min_lead_ns, 0, 3'600'000);
  c.Millis("lead_per_agent_ms", &s->scheduler.lead_per_agent_ns, 0, 60'000);
  c.Millis("capture_grace_ms", &s->scheduler.capture_grace_ns, 0, 3'600'000);
  c.Millis("upload_timeout_ms", &s->scheduler.upload_timeout_ns, 1, 86'400'000);
  c.Millis("max_duration_ms", &s->scheduler.max_duration_ns, 1, 86'400'000);
  c.Integer("max_live_captures", &s->scheduler.max_live_captures, 1, 1'000'000);
  c.Bool("refine_clocks_with_collectives", &s->scheduler.refine_with_collectives);
  c.Integer("max_upload_bytes_per_worker", &s->scheduler.max_upload_bytes_per_worker, 1, kTiB);
}

// agents.jobs, {"JOB": ["agent-id", ...]}: only these agents may serve JOB.
void ApplyJobAgents(const ConfigSection& a, CoordinatorSettings* s) {
  const boost::json::value* jobs = a.Raw("jobs");
  if (jobs == nullptr) return;
  if (!jobs->is_object() || jobs->get_object().size() > 100'000) {
    throw a.Bad("jobs", "is not an object of job name to a list of agent ids");
  }
  for (const auto& [job, agents] : jobs->get_object()) {
    if (!agents.is_array() || agents.get_array().size() > 100'000) {
      throw a.Bad("jobs", "." + std::string(job) + " is not a list of agent ids");
    }
    std::set<std::string>& allowed = s->agents.job_agents[std::string(job)];
    for (const boost::json::value& id : agents.get_array()) {
      if (!id.is_string() || id.get_string().empty() || id.get_string().size() > 256) {
        throw a.Bad("jobs", "." + std::string(job) + ": " + boost::json::serialize(id) +
                                " is not an agent id");
      }
      allowed.insert(std::string(id.get_string()));
    }
  }
}

void ApplyAgents(const ConfigSection& root, CoordinatorSettings* s) {
  const ConfigSection a = root.Section(
      "agents",
      {"heartbeat_interval_ms", "clock_sync_interval_ms", "clock_target_bound_us",
       "max_idle_connection_ms", "max_grpc_memory_bytes", "max_streams_per_connection",
       "max_connections", "max_connections_per_client", "max_unauthenticated_connections",
       "max_unauthenticated_per_client", "tls_handshake_timeout_ms", "min_eviction_age_ms",
       "proven_client_seconds", "forget_disconnected_after_ms", "jobs"});
  a.Integer("min_eviction_age_ms", &s->grpc_gate.min_eviction_age_ms, 0, 600'000);
  a.Integer("proven_client_seconds", &s->grpc_gate.proven_client_seconds, 0, 7 * 86'400);
  ApplyJobAgents(a, s);
  a.Integer("forget_disconnected_after_ms", &s->agents.forget_disconnected_after_ms, 1,
            7 * 86'400'000);
  a.Integer("max_connections", &s->grpc_gate.max_connections, 1, 10'000'000);
  a.Integer("max_connections_per_client", &s->grpc_gate.max_connections_per_client, 1, 10'000'000);
  a.Integer("max_unauthenticated_connections", &s->grpc_gate.max_unauthenticated_connections, 1,
            10'000'000);
  a.Integer("max_unauthenticated_per_client", &s->grpc_gate.max_unauthenticated_per_client, 1,
            10'000'000);
  a.Integer("tls_handshake_timeout_ms", &s->agents.tls_handshake_timeout_ms, 100, 600'000);
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
}

void ApplyNotify(const ConfigSection& root, CoordinatorSettings* s) {
  const ConfigSection n =
      root.Section("notify", {"alertmanagers", "webhooks", "slack_webhooks", "ca_file",
                              "external_url", "timeout_ms", "max_attempts", "max_queued"});
  for (const auto& [key, list] : {std::pair<const char*, std::vector<std::string>*>{
                                      "alertmanagers", &s->notify.alertmanagers},
                                  {"webhooks", &s->notify.webhooks},
                                  {"slack_webhooks", &s->notify.slack_webhooks}}) {
    const boost::json::value* urls = n.Raw(key);
    if (urls == nullptr) continue;
    if (!urls->is_array() || urls->get_array().size() > 16)
      throw n.Bad(key, "is not a list of at most 16 URLs");
    for (const boost::json::value& url : urls->get_array()) {
      if (!url.is_string() || url.get_string().empty() || url.get_string().size() > 2048) {
        throw n.Bad(key, boost::json::serialize(url) + " is not a URL");
      }
      list->push_back(std::string(url.get_string()));
    }
  }
  n.String("ca_file", &s->notify.ca_file);
  n.String("external_url", &s->notify.external_url, 2048);
  int64_t timeout_ns = 0;
  if (n.Has("timeout_ms")) {
    n.Millis("timeout_ms", &timeout_ns, 1'000, 600'000);
    s->notify.timeout = absl::Nanoseconds(timeout_ns);
  }
  n.Integer("max_attempts", &s->notify.max_attempts, 1, 100);
  n.Integer("max_queued", &s->notify.max_queued, 1, 1'000'000);
}

void ApplyWatch(const ConfigSection& root, CoordinatorSettings* s) {
  const ConfigSection w =
      root.Section("watch", {"max_jobs", "max_jobs_per_agent", "forget_quiet_jobs_after_s",
                             "max_job_bytes", "max_agent_bytes", "max_total_bytes"});
  w.Integer("max_jobs", &s->watch.engine.max_jobs, 1, 1'000'000);
  w.Integer("max_job_bytes", &s->watch.engine.job.max_bytes, 1 << 20, kTiB);
  w.Integer("max_agent_bytes", &s->watch.max_agent_bytes, 1 << 20, kTiB);
  w.Integer("max_total_bytes", &s->watch.engine.max_total_bytes, 1 << 20, kTiB);
  w.Integer("max_jobs_per_agent", &s->watch.max_jobs_per_agent, 1, 1'000'000);
  w.Seconds("forget_quiet_jobs_after_s", &s->watch.engine.forget_quiet_after_ns, 1, 30 * 86'400);
}

void ApplyShards(const ConfigSection& root, CoordinatorSettings* s) {
  const ConfigSection sh =
      root.Section("shards", {"self", "members_file", "forward", "reload_interval_ms",
                              "max_proxy_bytes", "peer_timeout_ms", "lookup_timeout_ms",
                              "max_calls_per_peer", "peer_retry_after_ms"});
  sh.String("self", &s->shards.self, 253);
  sh.String("members_file", &s->shards.members_file);
  if (sh.Has("forward")) {
    std::string forward;
    sh.String("forward", &forward, 16);
    if (forward != "proxy" && forward != "redirect")
      throw sh.Bad("forward", "\"" + forward + "\" is not proxy or redirect");
    s->shards.redirect = forward == "redirect";
  }
  sh.Integer("reload_interval_ms", &s->shards.reload_interval_ms, 100, 3'600'000);
  sh.Integer("max_proxy_bytes", &s->shards.max_proxy_bytes, 1 << 20, kTiB);
  sh.Integer("peer_timeout_ms", &s->shards.peer_timeout_ms, 1'000, 3'600'000);
  sh.Integer("lookup_timeout_ms", &s->shards.lookup_timeout_ms, 100, 3'600'000);
  sh.Integer("max_calls_per_peer", &s->shards.max_calls_per_peer, 1, 1'000);
  sh.Integer("peer_retry_after_ms", &s->shards.peer_retry_after_ms, 0, 3'600'000);
}

void ApplyAnalysis(const ConfigSection& root, CoordinatorSettings* s) {
  const ConfigSection a = root.Section("analysis", {"memory_budget_mb", "max_queued"});
  int64_t budget_mb = static_cast<int64_t>(s->api_limits.analysis_memory_budget_bytes >> 20);
  a.Integer("memory_budget_mb", &budget_mb, 64, int64_t{1} << 24);
  s->api_limits.analysis_memory_budget_bytes = static_cast<uint64_t>(budget_mb) << 20;
  a.Integer("max_queued", &s->api_limits.max_queued_analyses, 0, 10'000);
}

void ApplyRetention(const ConfigSection& root, CoordinatorSettings* s) {
  const ConfigSection r =
      root.Section("retention", {"max_age_hours", "max_total_bytes", "interval_seconds"});
  double hours = 0;
  if (r.Has("max_age_hours")) {
    r.Number("max_age_hours", &hours, 0, 24.0 * 3650);
    s->retention.max_age_ns = static_cast<int64_t>(hours * 3.6e12);
  }
  r.Integer("max_total_bytes", &s->retention.max_total_bytes, 0, int64_t{1} << 50);
  r.Integer("interval_seconds", &s->retention_interval_seconds, 1, 86'400);
}

}  // namespace

absl::Status ApplyCoordinatorConfig(const boost::json::object& root, CoordinatorSettings* s) {
  // Every key with its type and range in one place per section; the first wrong one names itself.
  try {
    const ConfigSection root_section(
        root, "",
        {"http", "grpc", "data_dir", "limits", "capture", "agents", "retention", "auth", "tls",
         "insecure", "notify", "watch", "shards", "analysis"});
    const ConfigSection tls = root_section.Section("tls", {"cert", "key", "ca"});
    tls.String("cert", &s->tls.cert);
    tls.String("key", &s->tls.key);
    tls.String("ca", &s->tls.ca);
    root_section.Bool("insecure", &s->insecure);
    root_section.String("http", &s->http, 512);
    const ConfigSection auth = root_section.Section("auth", {"tokens_file", "open_metrics"});
    auth.String("tokens_file", &s->auth_tokens);
    auth.Bool("open_metrics", &s->open_metrics);
    root_section.String("grpc", &s->grpc, 512);
    root_section.String("data_dir", &s->data_dir);
    ApplyLimits(root_section, s);
    ApplyCapture(root_section, s);
    ApplyAgents(root_section, s);
    ApplyNotify(root_section, s);
    ApplyWatch(root_section, s);
    ApplyShards(root_section, s);
    ApplyRetention(root_section, s);
    ApplyAnalysis(root_section, s);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(e.what());
  }
  return absl::OkStatus();
}

absl::Status LoadCoordinatorConfig(const std::string& path, CoordinatorSettings* s) {
  ASSIGN_OR_RETURN(boost::json::object root, common::ReadJsonConfig(path));
  if (absl::Status status = ApplyCoordinatorConfig(root, s); !status.ok()) {
    return absl::InvalidArgumentError("config " + path + ": " + std::string(status.message()));
  }
  return absl::OkStatus();
}

void DeriveCoordinatorSettings(CoordinatorSettings* s) {
  s->scheduler.max_events_per_worker = s->api_limits.max_events_per_worker;
  s->scheduler.max_workers_per_capture = s->api_limits.max_ranks_per_capture;
  s->agents.require_certificate_identity = !s->insecure;
  s->scheduler.id_suffix = s->shards.members_file.empty() ? "" : "-" + ShardTag(s->shards.self);
  s->http_limits.upload_dir = s->data_dir + "/uploads";
}

}  // namespace podscope::coordinator
