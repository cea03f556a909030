// Fires the starts of captures at their instants, from one thread. An agent process with many
// collectors (eight GPUs on a node, or the scale benchmark's thousand simulated agents in a
// few processes) then starts them one after another in a tight loop within microseconds of
// the instant, instead of as many threads waking at once and queueing for the cores.
//
// Thread-safe. A fired callback must be quick: the next start waits for it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "agent/agent_clock.h"

namespace podscope::agent {

class StartTimer {
 public:
  using Id = uint64_t;

  StartTimer();
  ~StartTimer();  // drops what is pending, joins
  StartTimer(const StartTimer&) = delete;
  StartTimer& operator=(const StartTimer&) = delete;

  // Runs `fire` on the timer's thread at host time `at_host_ns` (at once when that has passed).
  Id Schedule(TimeNs at_host_ns, std::function<void()> fire);
  // Drops a pending callback: true when it had not fired. When it is firing right now, waits
  // for it to return first, so the caller must not hold a lock the callback takes.
  bool Cancel(Id id);

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;       // wakes the loop: new earliest entry, or stopping
  std::condition_variable done_cv_;  // wakes Cancel: a firing batch returned
  bool stopping_ = false;
  Id next_id_ = 1;
  std::map<std::pair<TimeNs, Id>, std::function<void()>> pending_;
  std::map<Id, TimeNs> at_of_;
  std::set<Id> firing_;
  std::thread thread_;
};

}  // namespace podscope::agent
