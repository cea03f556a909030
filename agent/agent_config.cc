#include "agent/agent_config.h"

#include "common/json_config.h"
#include "common/status_macros.h"

namespace podscope::agent {

absl::Status ApplyAgentConfig(const boost::json::object& root, AgentSettings* s) {
  // Every key with its type and range in one place; a wrong one names itself and its range.
  try {
    const common::ConfigSection o(
        root, "",
        {"coordinator", "agent_id", "host", "simulate", "log_level", "chunk_events",
         "max_spool_bytes", "clock_burst", "probe_socket", "proc_root", "probe_allowed_uids",
         "host_sample_interval_ms", "stream_interval_ms", "tls", "insecure", "watch", "health"});
    const common::ConfigSection tls = o.Section("tls", {"cert", "key", "ca", "server_name"});
    tls.String("cert", &s->agent.tls.cert);
    tls.String("key", &s->agent.tls.key);
    tls.String("ca", &s->agent.tls.ca);
    tls.String("server_name", &s->agent.tls_server_name, 256);
    o.Bool("insecure", &s->insecure);
    o.String("coordinator", &s->agent.coordinator, 512);
    o.String("agent_id", &s->agent.agent_id, 128);
    o.String("host", &s->agent.host, 256);
    o.String("simulate", &s->simulate);
    o.String("health", &s->health, 256);
    o.String("log_level", &s->log_level, 16);
    o.Integer("chunk_events", &s->agent.capture.chunk_events, 1, 100'000'000);
    o.Integer("max_spool_bytes", &s->agent.capture.max_spool_bytes, 1 << 20, int64_t{1} << 44);
    o.Integer("clock_burst", &s->agent.clock_burst, 1, 1'000);
    o.String("probe_socket", &s->collectors.probe_socket, 107);  // sun_path
    o.String("proc_root", &s->collectors.proc_root);
    if (const boost::json::value* uids = o.Raw("probe_allowed_uids")) {
      if (!uids->is_array() || uids->get_array().size() > 1024)
        throw o.Bad("probe_allowed_uids", "is not a list of at most 1024 uids");
      for (const boost::json::value& uid : uids->get_array()) {
        if (!uid.is_int64() || uid.get_int64() < 0 || uid.get_int64() > UINT32_MAX) {
          throw o.Bad("probe_allowed_uids", boost::json::serialize(uid) + " is not a uid");
        }
        s->collectors.probe_allowed_uids.push_back(static_cast<uint32_t>(uid.get_int64()));
      }
    }
    if (o.Has("watch")) {
      const common::ConfigSection watch = o.Section(
          "watch", {"enabled", "max_queued_steps", "flush_interval_ms", "max_batch_steps"});
      watch.Bool("enabled", &s->agent.watch);
      int64_t n = 0;
      if (watch.Has("max_queued_steps")) {
        watch.Integer("max_queued_steps", &n, 1, 10'000'000);
        s->agent.watch_queue.max_steps = static_cast<size_t>(n);
      }
      if (watch.Has("flush_interval_ms")) {
        watch.Integer("flush_interval_ms", &n, 10, 60'000);
        s->agent.watch_sender.flush_interval = absl::Milliseconds(n);
      }
      if (watch.Has("max_batch_steps")) {
        watch.Integer("max_batch_steps", &n, 1, 65'536);
        s->agent.watch_sender.max_batch_steps = static_cast<size_t>(n);
      }
    }
    if (o.Has("stream_interval_ms")) {
      int64_t ms = 0;
      o.Integer("stream_interval_ms", &ms, 0, 60'000);
      s->agent.capture.stream_interval_ns = ms * 1'000'000;
    }
    int64_t sample_ms = 0;
    if (o.Has("host_sample_interval_ms")) {
      o.Integer("host_sample_interval_ms", &sample_ms, 10, 60'000);
      s->collectors.host_sample_interval_ns = sample_ms * 1'000'000;
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(e.what());
  }
  return absl::OkStatus();
}

absl::Status LoadAgentConfig(const std::string& path, AgentSettings* s) {
  ASSIGN_OR_RETURN(boost::json::object root, common::ReadJsonConfig(path));
  if (absl::Status status = ApplyAgentConfig(root, s); !status.ok()) {
    return absl::InvalidArgumentError("config " + path + ": " + std::string(status.message()));
  }
  return absl::OkStatus();
}

}  // namespace podscope::agent
