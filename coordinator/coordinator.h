// The coordinator daemon as one object: every part it runs, built in order and stopped in
// reverse (docs/design.md names the parts; docs/life-of-a-capture.md follows a capture through
// them).
//
// Create reads and checks what the settings name: the token file, the shard members, the
// agents' CA and the alert destinations. Its errors are the config's (the daemon exits 2), and
// it starts nothing, so `--check-config` is Create alone.
//
// Start opens the store, recovers what the last run left (interrupted imports, live captures),
// starts each part and listens on both ports. Its errors are the machine's: a store in use, a
// port taken (the daemon exits 1).
//
// Each part that runs a thread registers how to stop it as it starts. The destructor stops
// them, the last started first, before any part is destroyed: the REST server and the shard
// watcher stop before the parts they call, and a Start that fails half-way stops what it
// started. Parts are members declared in the order they are built, so they are destroyed in
// reverse too.
#pragma once

#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/host_port.h"
#include "common/time_source.h"
#include "coordinator/agents/agent_registry.h"
#include "coordinator/api/live_api.h"
#include "coordinator/api/rest_api.h"
#include "coordinator/api/schedules_api.h"
#include "coordinator/api/watch_api.h"
#include "coordinator/auth/token_authorizer.h"
#include "coordinator/capture/capture_scheduler.h"
#include "coordinator/capture/schedule_runner.h"
#include "coordinator/clock/clock_aligner.h"
#include "coordinator/clock/clock_keeper.h"
#include "coordinator/control/agent_certificates.h"
#include "coordinator/control/agent_service.h"
#include "coordinator/control/grpc_connection_gate.h"
#include "coordinator/coordinator_config.h"
#include "coordinator/shards/shard_membership.h"
#include "coordinator/shards/shard_router.h"
#include "coordinator/watch/alert_notifier.h"
#include "coordinator/watch/watch_service.h"
#include "http/http_server.h"
#include "http/http_types.h"
#include "storage/rocksdb_trace_store.h"

namespace podscope::coordinator {

class RetentionLoop;  // coordinator.cc

class Coordinator {
 public:
  static absl::StatusOr<std::unique_ptr<Coordinator>> Create(CoordinatorSettings settings,
                                                             const common::TimeSource& time);
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // Once. On an error the parts started so far are stopped again (by the destructor).
  absl::Status Start();
  // Re-reads the certificate, key, CA and token file (SIGHUP): rotated credentials take effect
  // without a restart; a broken file keeps the old ones. The agents' port also re-reads its
  // certificate and key by itself, every minute.
  void ReloadCredentials();

  // The bound ports, once started (port 0 in the settings: the kernel's choice).
  uint16_t http_port() const { return http_port_; }
  uint16_t grpc_port() const { return grpc_port_; }

 private:
  Coordinator(CoordinatorSettings settings, const common::TimeSource& time);

  absl::Status CheckConfig();
  absl::Status OpenStore();
  absl::Status StartControlPlane();
  absl::Status StartWatch();
  absl::Status StartAgentServer();
  absl::Status StartSchedules();
  absl::Status StartRestServer();
  // The agents' watch summaries go to the watch service; sharded, only those of this shard's
  // jobs, and agents hear who owns each of their jobs.
  void RouteWatchAndShards();
  void AddMetricsSources();
  // Registers how to stop a part that has just started.
  void Started(std::function<void()> stop);

  const CoordinatorSettings settings_;
  const common::TimeSource& time_;
  std::vector<std::function<void()>> stops_;  // in start order; run backwards

  // Checked by Create.
  common::HostPort http_address_;
  common::HostPort grpc_address_;
  std::unique_ptr<TokenAuthorizer> authorizer_;  // null without a token file
  std::unique_ptr<ShardMembership> membership_;
  std::unique_ptr<AgentCertificates> agent_certificates_;
  std::unique_ptr<watch::AlertNotifier> notifier_;
  // Built by Start, in this order.
  std::unique_ptr<storage::RocksDbTraceStore> store_;
  // Every multi-step change to a stored capture (imports, deletes, retention) holds this lock.
  absl::Mutex capture_mutations_;
  std::unique_ptr<RestApi> api_;
  std::unique_ptr<AgentRegistry> registry_;
  std::unique_ptr<ClockAligner> aligner_;
  std::unique_ptr<CaptureScheduler> scheduler_;
  std::unique_ptr<ClockKeeper> clock_keeper_;
  std::unique_ptr<watch::WatchService> watch_service_;
  std::unique_ptr<AgentService> agent_service_;
  std::unique_ptr<grpc::ServerBuilder> grpc_builder_;
  std::unique_ptr<GrpcConnectionGate> grpc_gate_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<ScheduleRunner> schedules_;
  http::Router router_;
  std::unique_ptr<LiveApi> live_api_;
  std::unique_ptr<SchedulesApi> schedules_api_;
  std::unique_ptr<WatchApi> watch_api_;
  std::unique_ptr<ShardRouter> shard_router_;
  std::unique_ptr<http::HttpServer> http_server_;
  std::unique_ptr<RetentionLoop> retention_;
  uint16_t http_port_ = 0;
  uint16_t grpc_port_ = 0;
};

}  // namespace podscope::coordinator
