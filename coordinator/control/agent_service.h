// The coordinator's side of the agent protocol (common/proto/podscope/v1/agent.proto), on
// gRPC's callback API: no thread is parked per agent, so thousands of control streams cost
// memory, not threads. Handlers hand everything to the registry, the clock aligner and the
// capture scheduler.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "common/time_source.h"
#include "common/watch_wire.h"
#include "coordinator/agents/agent_registry.h"
#include "coordinator/capture/capture_scheduler.h"
#include "coordinator/clock/clock_aligner.h"
#include "http/rate_limited_log.h"
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
  // A connection's TLS handshake must be done this soon after it is accepted (gRPC's own default
  // is 120 s, in which a stalled connection holds its memory and its slot).
  uint32_t tls_handshake_timeout_ms = 5'000;
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

// Where the agents' watch data goes once checked and moved onto the coordinator's clock: the
// watch service, wired in main.cc (this folder does not depend on it).
struct WatchIngest {
  std::function<void(const std::string& agent_id, const common::DecodedWatch& data)> ingest;
  // Called once per (job, rank) a Watch stream first reports, and again when its host changes.
  std::function<void(const std::string& job, int32_t rank, const std::string& host)> set_host;
};

// What the Watch streams took and refused, for /metrics.
struct WatchStreamCounters {
  std::atomic<uint64_t> batches{0};
  std::atomic<uint64_t> bytes{0};  // of the batches taken, as serialised on the wire
  // malformed, from an agent that is not who it says, or from one without a control stream
  std::atomic<uint64_t> refused_batches{0};
  std::atomic<uint64_t> unaligned_batches{0};  // the agent's clock had no model yet: dropped
  std::atomic<uint64_t> foreign_records{0};  // for a (job, rank) the agent does not serve: dropped
};

class AgentService final : public v1::AgentService::CallbackService {
 public:
  AgentService(AgentRegistry& registry, ClockAligner& aligner, CaptureScheduler& scheduler,
               AgentServiceOptions options, const common::TimeSource& time);

  grpc::ServerBidiReactor<v1::AgentMessage, v1::CoordinatorMessage>* Connect(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* SyncClock(grpc::CallbackServerContext* context,
                                      const v1::SyncClockRequest* request,
                                      v1::SyncClockResponse* response) override;
  grpc::ServerReadReactor<v1::UploadRequest>* Upload(grpc::CallbackServerContext* context,
                                                     v1::UploadResponse* response) override;
  grpc::ServerReadReactor<v1::WatchBatch>* Watch(grpc::CallbackServerContext* context,
                                                 v1::WatchAck* response) override;

  // Told the peer (gRPC's "ipv4:ADDRESS:PORT") of every call: a call that reaches the service
  // came over a connection whose handshake (and certificate, with TLS) was accepted. Before the
  // server starts.
  void set_call_observer(std::function<void(const std::string& peer)> observer) {
    call_observer_ = std::move(observer);
  }
  // Before the server starts. Without a sink, Watch calls are refused (UNIMPLEMENTED).
  void set_watch_ingest(WatchIngest ingest) { watch_ingest_ = std::move(ingest); }
  // Sharded coordinators (docs/deploy.md): who owns each of `jobs`, sent in every welcome and again
  // whenever an agent's jobs change; nullopt when not sharded. Before the server starts.
  using ShardOwnersFn =
      std::function<std::optional<v1::ShardOwners>(const std::set<std::string>& jobs)>;
  void set_shard_owners(ShardOwnersFn owners) { shard_owners_ = std::move(owners); }
  // Tells every connected agent who owns its jobs now (the shards' members changed).
  void PushShardOwners();
  const WatchStreamCounters& watch_counters() const { return watch_counters_; }
  void AppendMetrics(std::string* out) const;

 private:
  friend class ControlSession;
  friend class UploadSession;
  friend class WatchSession;
  void ObserveCall(grpc::CallbackServerContext* context) const {
    if (call_observer_) call_observer_(context->peer());
  }
  AgentRegistry& registry_;
  std::function<void(const std::string&)> call_observer_;
  ClockAligner& aligner_;
  CaptureScheduler& scheduler_;
  const AgentServiceOptions options_;
  const common::TimeSource& time_;
  WatchIngest watch_ingest_;
  ShardOwnersFn shard_owners_;
  WatchStreamCounters watch_counters_;
  http::RateLimitedLog watch_log_{
      "watch"};  // shared by all streams: many streams cannot flood the log
};

}  // namespace podscope::coordinator
