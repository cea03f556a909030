// Fuzz target for the daemons' config loader: any text is parsed (bounded depth and size,
// duplicate keys refused) and applied to both the coordinator's and the agent's settings. A
// config is taken or refused with a sentence; nothing crashes, hangs or throws past the loader.
#include <string>

#include "agent/agent_config.h"
#include "common/json_config.h"
#include "coordinator/coordinator_config.h"
#include "tests/fuzz/fuzz_seeds.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<boost::json::object> root = podscope::common::ParseJsonConfig(text, "config fuzz");
  if (!root.ok()) {
    if (root.status().message().empty()) __builtin_trap();  // every refusal says why
    return 0;
  }
  podscope::coordinator::CoordinatorSettings coordinator;
  const absl::Status c = podscope::coordinator::ApplyCoordinatorConfig(*root, &coordinator);
  if (!c.ok() && c.message().empty()) __builtin_trap();
  podscope::agent::AgentSettings agent;
  const absl::Status a = podscope::agent::ApplyAgentConfig(*root, &agent);
  if (!a.ok() && a.message().empty()) __builtin_trap();
  // What is taken is within its range.
  if (c.ok() && (coordinator.agents.heartbeat_interval_ms < 10 ||
                 coordinator.http_limits.max_header_bytes < 1024)) {
    __builtin_trap();
  }
  return 0;
}

namespace podscope::fuzz {

std::vector<std::string> Seeds(const std::vector<std::string>&) {
  return {
      R"({"http": "0.0.0.0:8080", "grpc": "0.0.0.0:50051", "data_dir": "/var/lib/podscope",
          "tls": {"cert": "c.pem", "key": "c.key", "ca": "ca.pem"}, "auth": {"tokens_file": "t", "open_metrics": true},
          "limits": {"max_body_bytes": 1048576, "max_header_bytes": 16384, "max_connections_per_client": 64},
          "capture": {"min_lead_ms": 500, "refine_clocks_with_collectives": false},
          "agents": {"heartbeat_interval_ms": 5000, "clock_target_bound_us": 50.5,
                     "jobs": {"secret": ["node-1", "node-2"]}},
          "retention": {"max_age_hours": 72.5, "max_total_bytes": 1000000}})",
      R"({"coordinator": "c:50051", "agent_id": "node-1", "tls": {"cert": "a.pem", "key": "a.key", "ca": "ca.pem",
          "server_name": "coordinator.internal"}, "probe_allowed_uids": [0, 1000], "host_sample_interval_ms": 100,
          "chunk_events": 65536, "insecure": false})",
      R"({"limits": {"max_bdy_bytes": 5}})",
      R"({"agents": {"heartbeat_interval_ms": -5, "jobs": {"j": [1, null, ""]}}})",
      R"({"limits": {"max_body_bytes": 1e400}, "retention": {"max_age_hours": -1}})",
      R"({"a": 1, "a": 2})",
      std::string(40, '[') + std::string(40, ']'),
      R"({"probe_allowed_uids": [4294967296, -1, "x"], "tls": []})",
  };
}

}  // namespace podscope::fuzz
