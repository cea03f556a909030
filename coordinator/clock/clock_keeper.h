// Keeps every connected agent's clock model tight (docs/life-of-a-capture.md). Agents sync at
// connect and periodically on their own, but a burst taken while a thousand agents connect at once,
// or through a jittery network, can leave a model milliseconds wide. The keeper asks such agents
// for another burst, the widest first, a few per tick so the bursts never queue behind one
// another, and backs off per agent while the network keeps the model wide. After a few asks,
// "wide" becomes relative to what the agent's path has shown it can do (twice its best bound
// yet), so an agent behind a slow link is not asked forever for a bound it cannot reach.
//
// Thread-safe. Tick() is the whole policy; Start() runs it on its own thread.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/time_source.h"
#include "coordinator/agents/agent_registry.h"
#include "coordinator/clock/clock_aligner.h"

namespace podscope::coordinator {

struct ClockKeeperOptions {
  int64_t tick_ns = 500'000'000;
  // An agent whose model, now, is bounded wider than this is asked to sync again; after
  // asks_before_relative asks that did not bring it within, only while it is also wider than
  // twice its best bound yet.
  int64_t target_bound_ns = 50'000;
  int asks_before_relative = 3;
  // The wait before asking the same agent again, doubling while its model stays wide.
  int64_t first_retry_ns = 2'000'000'000;
  int64_t max_retry_ns = 60'000'000'000;
  size_t max_requests_per_tick = 64;
};

class ClockKeeper {
 public:
  ClockKeeper(AgentRegistry& registry, const ClockAligner& aligner, ClockKeeperOptions options,
              const common::TimeSource& time = common::RealTime());
  ~ClockKeeper();

  void Start();
  void Stop();
  // One pass over the connected agents; returns how many were asked to sync.
  size_t Tick();

 private:
  struct AgentState {
    TimeNs first_seen_ns = 0;
    TimeNs next_ask_ns = 0;
    int64_t retry_ns = 0;
    int64_t best_bound_ns = std::numeric_limits<int64_t>::max();
    int asks = 0;  // since the model was last within the target
  };

  AgentRegistry& registry_;
  const ClockAligner& aligner_;
  const ClockKeeperOptions options_;
  const common::TimeSource& time_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, AgentState> state_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace podscope::coordinator
