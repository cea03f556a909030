// The coordinator's side of the agent protocol (common/proto/podscope/v1/agent.proto), on
// gRPC's callback API: no thread is parked per agent, so thousands of control streams cost
// memory, not threads. Handlers hand everything to the registry, the clock aligner and the
// capture scheduler.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>

#include "coordinator/agents/agent_registry.h"
#include "coordinator/capture/capture_scheduler.h"
#include "coordinator/clock/clock_aligner.h"
#include "podscope/v1/agent.grpc.pb.h"

namespace podscope::coordinator {

struct AgentServiceOptions {
  std::string coordinator_id = "podscope-coordinator";
  uint32_t heartbeat_interval_ms = 5'000;
  // A fallback: the coordinator's clock keeper asks for a burst whenever a model widens, and
  // captures sync before and after anyway.
  uint32_t clock_sync_interval_ms = 300'000;
  size_t max_queued_messages = 1024;  // per agent; a stream that falls this far behind is closed
  // A node runs a few dozen ranks at most; the registry keeps every agent's list in memory.
  int max_workers_per_agent = 256;
  int max_samples_per_report = 256;
  // gRPC connections with no call open this long are closed (agents always hold their control
  // stream open, so only connections that do nothing are), and memory for all connections
  // together is bounded.
  uint32_t max_idle_connection_ms = 30'000;
  // An agent gone this long is no longer listed (nor its workers).
  uint32_t forget_disconnected_after_ms = 600'000;
  uint64_t max_grpc_memory_bytes = 1ull << 30;
  uint32_t max_streams_per_connection = 32;
  // Mutual TLS: an agent's id must be its certificate's common name.
  bool require_certificate_identity = false;
  // Jobs that only some agents may serve: job -> agent ids. A worker of a listed job reported by
  // another agent is dropped, with a warning. Jobs not listed: any agent.
  std::map<std::string, std::set<std::string>> job_agents;
};

class AgentService final : public v1::AgentService::CallbackService {
 public:
  AgentService(AgentRegistry& registry, ClockAligner& aligner, CaptureScheduler& scheduler, AgentServiceOptions options,
               std::function<TimeNs()> now);

  grpc::ServerBidiReactor<v1::AgentMessage, v1::CoordinatorMessage>* Connect(grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* SyncClock(grpc::CallbackServerContext* context, const v1::SyncClockRequest* request,
                                      v1::SyncClockResponse* response) override;
  grpc::ServerReadReactor<v1::UploadRequest>* Upload(grpc::CallbackServerContext* context,
                                                     v1::UploadResponse* response) override;

 private:
  friend class ControlSession;
  friend class UploadSession;
  AgentRegistry& registry_;
  ClockAligner& aligner_;
  CaptureScheduler& scheduler_;
  const AgentServiceOptions options_;
  const std::function<TimeNs()> now_;
};

}  // namespace podscope::coordinator
