// The agents the coordinator knows (docs/life-of-a-capture.md): who is connected, which workers
// each serves, and how healthy each is by its heartbeats. Thread-safe; the gRPC service updates it,
// the scheduler and the REST API read it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/time_source.h"
#include "common/time_types.h"
#include "podscope/v1/agent.pb.h"

namespace podscope::coordinator {

using common::TimeNs;

// Delivers messages to one connected agent (its control stream).
class AgentControlStream {
 public:
  virtual ~AgentControlStream() = default;
  // Queues the message for sending; false when the link is gone or its queue is full.
  virtual bool Send(const v1::CoordinatorMessage& message) = 0;
  // Ends the stream (e.g. the agent reconnected on a new one).
  virtual void Close() = 0;
};

enum class AgentHealth { kHealthy, kStale, kDisconnected };
std::string_view AgentHealthName(AgentHealth health);

struct AgentSnapshot {
  std::string agent_id, host, version, peer;
  bool connected = false;
  TimeNs connected_ns = 0, last_seen_ns = 0;
  AgentHealth health = AgentHealth::kDisconnected;
  std::vector<v1::WorkerDescriptor> workers;
};

// Where a capture's workers live: one agent and the ranks it serves.
struct CaptureTarget {
  std::string agent_id, host;
  std::vector<v1::WorkerDescriptor> workers;
};

// A rank of a job that several connected agents claim. Neither is trusted with it: which one
// really serves the rank cannot be told, and silently taking one could capture the wrong
// process (or an impostor's data).
struct RankConflict {
  int32_t rank = 0;
  std::vector<std::string> claimants;  // "agent-id (host, peer)", by agent id
  std::string Reason(const std::string& job) const;
};

struct TargetSelection {
  std::vector<CaptureTarget> targets;
  std::vector<RankConflict> conflicts;  // by rank
};

struct AgentRegistryOptions {
  int64_t heartbeat_interval_ns = 1'000'000'000;
  // An agent silent for this many heartbeat intervals is stale.
  int stale_after_heartbeats = 3;
  // Disconnected agents are forgotten after this long.
  int64_t forget_after_ns = 600'000'000'000;
  size_t max_agents = 100'000;
};

class AgentRegistry {
 public:
  AgentRegistry(AgentRegistryOptions options, const common::TimeSource& time);

  // A new control stream from `hello`. An older stream of the same agent process (same
  // instance_id) is closed; a live stream of another process with the same agent_id refuses
  // this one (AlreadyExists, naming both peers). Returns true when this stream belongs to another
  // process than the last one known under the id (its clock samples must not be merged with
  // the old ones). ResourceExhausted when the registry is full.
  absl::StatusOr<bool> Connected(const v1::AgentHello& hello, std::string peer,
                                 std::shared_ptr<AgentControlStream> link);
  // Whether `link` is the agent's current stream (messages of a replaced one are ignored).
  bool IsCurrent(const std::string& agent_id, const AgentControlStream* link) const;
  void Seen(const std::string& agent_id);
  void WorkersChanged(const std::string& agent_id, const v1::WorkersChanged& workers);
  // Only when `link` is still the agent's current one (a replaced stream ending is ignored).
  void Disconnected(const std::string& agent_id, const AgentControlStream* link);

  bool Send(const std::string& agent_id, const v1::CoordinatorMessage& message);
  bool IsConnected(const std::string& agent_id) const;
  std::vector<AgentSnapshot> Snapshot() const;
  std::vector<std::string> ConnectedIds() const;
  size_t ConnectedCount() const;

  // The connected agents serving `job`, with the requested ranks (all when `ranks` is empty);
  // ranks claimed by several agents are conflicts, given to none. NotFound when no connected
  // agent serves the job, or when a requested rank is not served.
  absl::StatusOr<TargetSelection> SelectTargets(const std::string& job,
                                                const std::vector<int32_t>& ranks) const;

  // The (job, rank) pairs a connected agent serves now, each with its host (the worker's, else
  // the agent's); empty when the agent is not connected. Watch data is taken for these only.
  std::map<std::pair<std::string, int32_t>, std::string> ServedRanks(
      const std::string& agent_id) const;

  const AgentRegistryOptions& options() const { return options_; }

 private:
  struct Entry {
    AgentSnapshot info;
    std::string instance_id;
    std::shared_ptr<AgentControlStream> link;
  };
  AgentHealth HealthOf(const Entry& e, TimeNs now) const;
  void ForgetOld(TimeNs now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AgentRegistryOptions options_;
  const common::TimeSource& time_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> agents_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podscope::coordinator
