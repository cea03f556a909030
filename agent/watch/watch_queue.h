// The agent's bounded queue of watch data (docs/watch.md), between the collectors that push it and
// the sender that streams it to the coordinator. Steps queue in order up to a bound, past which
// the oldest are dropped and counted (fresh data is worth more to a detector than old); progress
// keeps only the newest record per (job, rank, communicator), since each supersedes the last.
// Thread-safe; Push never blocks.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/collector.h"
#include "podscope/v1/agent.pb.h"

namespace podscope::agent {

struct WatchQueueLimits {
  // A node's 8 ranks at 2 steps/s fill this in about 17 minutes of coordinator outage.
  size_t max_steps = 16'384;
  size_t max_progress = 4'096;
};

struct WatchQueueCounters {
  uint64_t pushed_steps = 0;
  uint64_t dropped_steps =
      0;  // the oldest, pushed out of a full queue (and what a lost batch held)
  uint64_t dropped_progress = 0;
};

class WatchQueue : public WatchSink {
 public:
  explicit WatchQueue(WatchQueueLimits limits = {}) : limits_(limits) {}

  void Step(std::string_view job, const common::StepSummary& step) override;
  void Progress(std::string_view job, const common::RankProgress& progress) override;

  // Up to `max_steps` of the oldest steps and every pending progress record, as one batch of
  // `agent_id` carrying the drop count so far; the queue keeps the rest. Empty batch: nothing.
  v1::WatchBatch Take(std::string_view agent_id, size_t max_steps);
  // A batch taken but not delivered (the stream broke under it) is lost: counted as dropped.
  void Lost(const v1::WatchBatch& batch);

  size_t queued_steps() const;
  WatchQueueCounters counters() const;

 private:
  using ProgressKey = std::tuple<std::string, int32_t, uint64_t>;  // job, rank, communicator

  const WatchQueueLimits limits_;
  mutable absl::Mutex mu_;
  std::deque<std::pair<std::string, common::StepSummary>> steps_ ABSL_GUARDED_BY(mu_);
  std::map<ProgressKey, common::RankProgress> progress_ ABSL_GUARDED_BY(mu_);
  WatchQueueCounters counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podscope::agent
