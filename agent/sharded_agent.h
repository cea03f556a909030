// The node agent in front of coordinators sharded by job (docs/deploy.md). It dials the configured
// coordinator (in Kubernetes, the Service: any replica), which tells it who owns each of the
// node's jobs; it then keeps one Agent (control stream, clock sync, captures, uploads, watch
// stream) per owning replica, each advertising only the workers of the jobs that replica owns.
//
//   - A job whose owner is not known yet (a probe of a new job just registered) is served on the
//     first link, whose coordinator answers with its owner.
//   - When the owners change (a replica was added), the job's workers move to the new owner's
//     link; a link left without jobs closes once no capture it started is still running
//     (captures in flight finish where they started). The last link is never closed.
//   - Watch data of a job goes to its owner's link.
// Against an unsharded coordinator (no owners in its welcome) this is exactly one Agent.
//
// Threads: each link's Agent has its own; the reconcile thread applies owner news (which
// arrive on gRPC threads) and worker changes. Everything else is guarded by mu_.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent.h"

namespace podscope::agent {

class ShardedAgent {
 public:
  ShardedAgent(AgentOptions options, const AgentClock& clock,
               std::vector<std::unique_ptr<Collector>> collectors);
  ~ShardedAgent();

  void Start();
  void Stop();
  // A coordinator refused this agent (another protocol major): the reason, "" while none has.
  std::string refusal() const;
  // Every link is connected (at least one exists).
  bool connected() const;
  const std::string& agent_id() const { return options_.agent_id; }

 private:
  class JobView;
  class WatchRouter;
  struct Link;

  void ReconcileLoop();
  void Reconcile();
  Link* OpenLink(const std::string& address, const std::string& shard)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::set<std::string> CurrentJobs() const;

  AgentOptions options_;
  const AgentClock& clock_;
  std::vector<std::unique_ptr<Collector>> collectors_;
  std::unique_ptr<WatchRouter> watch_router_;
  std::unique_ptr<StartTimer> own_start_timer_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Their worker-change reports are taken until destruction.
  bool collectors_alive_ ABSL_GUARDED_BY(mu_) = true;
  bool dirty_ ABSL_GUARDED_BY(mu_) = false;  // owners or workers changed: reconcile
  // job -> (shard, grpc address), from the latest owner news of any link.
  std::map<std::string, std::pair<std::string, std::string>> owners_ ABSL_GUARDED_BY(mu_);
  // links_[0] first opened: the default for unknown jobs. A Link's fields are under mu_ too.
  std::vector<std::unique_ptr<Link>> links_ ABSL_GUARDED_BY(mu_);
  // Stopped and destroyed on the reconcile thread.
  std::vector<std::unique_ptr<Link>> closing_ ABSL_GUARDED_BY(mu_);
  std::thread reconcile_thread_;
};

}  // namespace podscope::agent
