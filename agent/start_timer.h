// Fires the starts of captures at their instants, from one thread. An agent process with many
// collectors (eight GPUs on a node, or the scale benchmark's thousand simulated agents in a
// few processes) then starts them one after another in a tight loop within microseconds of
// the instant, instead of as many threads waking at once and queueing for the cores.
//
// Thread-safe. A fired callback must be quick: the next start waits for it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/time_source.h"

namespace podscope::agent {

class StartTimer {
 public:
  using Id = uint64_t;

  // `time` is the host clock the instants are on; it must outlive the timer.
  explicit StartTimer(const common::TimeSource& time = common::RealTime());
  ~StartTimer();  // drops what is pending, joins
  StartTimer(const StartTimer&) = delete;
  StartTimer& operator=(const StartTimer&) = delete;

  // Runs `fire` on the timer's thread at host time `at_host_ns` (at once when that has passed).
  Id Schedule(common::TimeNs at_host_ns, std::function<void()> fire);
  // Drops a pending callback: true when it had not fired. When it is firing right now, waits
  // for it to return first, so the caller must not hold a lock the callback takes.
  bool Cancel(Id id);

 private:
  void Loop();

  const common::TimeSource& time_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Id next_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Bumped when a new entry becomes the earliest: the loop's wait then starts over.
  uint64_t earliest_changes_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::pair<common::TimeNs, Id>, std::function<void()>> pending_ ABSL_GUARDED_BY(mu_);
  std::map<Id, common::TimeNs> at_of_ ABSL_GUARDED_BY(mu_);
  std::set<Id> firing_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace podscope::agent
