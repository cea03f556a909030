// The coordinator's settings and its JSON config file (docs/security.md): every key with its type
// and range in one place; an unknown key names itself and the closest known one.
#pragma once

#include <boost/json.hpp>
#include <map>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "common/tls_files.h"
#include "coordinator/api/rest_api.h"
#include "coordinator/capture/capture_scheduler.h"
#include "coordinator/clock/clock_keeper.h"
#include "coordinator/control/agent_service.h"
#include "coordinator/control/grpc_connection_gate.h"
#include "coordinator/shards/shard_membership.h"
#include "coordinator/watch/alert_notifier.h"
#include "coordinator/watch/watch_service.h"
#include "http/http_server.h"
#include "storage/retention.h"

namespace podscope::coordinator {

struct CoordinatorSettings {
  std::string http = "127.0.0.1:8080";
  std::string grpc = "127.0.0.1:50051";
  std::string data_dir = "podscope-data";
  std::string auth_tokens;    // the hashed token file; empty: no authentication (--insecure only)
  bool open_metrics = false;  // /metrics without a token (Prometheus without credentials)
  common::TlsFiles tls;
  bool insecure = false;
  SchedulerOptions scheduler;
  AgentServiceOptions agents;
  GrpcGateOptions grpc_gate;
  ClockKeeperOptions clock_keeper;
  http::HttpLimits http_limits;
  ApiLimits api_limits;
  storage::RetentionPolicy retention;
  int retention_interval_seconds = 300;
  watch::NotifierOptions notify;
  watch::WatchServiceOptions watch;
  ShardOptions shards;
};

// Applies a parsed config to `s` (flags are applied after, by main). Errors name the key and its
// range: "agents.heartbeat_interval_ms: -5 is not in 10..3600000".
absl::Status ApplyCoordinatorConfig(const boost::json::object& root, CoordinatorSettings* s);
// Reads, parses and applies the config file at `path`.
absl::Status LoadCoordinatorConfig(const std::string& path, CoordinatorSettings* s);
// Sets what follows from other settings, once the config file and the flags are applied:
//   - a live capture's bounds are the API's (api_limits.max_events_per_worker and
//     max_ranks_per_capture);
//   - with TLS, an agent's certificate must name it (agents.require_certificate_identity);
//   - sharded, capture ids end with "-" and this shard's tag, so that no two shards ever make
//     the same one (scheduler.id_suffix);
//   - uploads stream to data_dir/uploads (http_limits.upload_dir).
void DeriveCoordinatorSettings(CoordinatorSettings* s);

}  // namespace podscope::coordinator
