// Where a component reads the time and waits for it. Daemons run on the host's clock
// (RealTime()); tests hand a component a SimulatedTimeSource and move time by hand, so a test
// of a timer or a deadline says exactly when something falls due instead of sleeping and
// hoping the machine kept up.
#pragma once

#include <atomic>
#include <cstddef>
#include <set>

#include "absl/synchronization/mutex.h"
#include "common/time_types.h"

namespace podscope::common {

class TimeSource {
 public:
  virtual ~TimeSource() = default;

  // The host's wall clock (CLOCK_REALTIME), nanoseconds since the Unix epoch.
  virtual TimeNs Now() const = 0;

  // With `mu` held: releases it until `cond` holds or Now() >= `deadline`, then takes it back.
  // Returns whether `cond` holds. `cond` is evaluated with `mu` held, like absl's Await.
  virtual bool AwaitUntil(absl::Mutex& mu, const absl::Condition& cond, TimeNs deadline) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;
};

// The host's clock; waits are absl's timed waits, so they end within microseconds of the
// deadline without spinning. One object for the whole process.
const TimeSource& RealTime();

// Time that moves only when a test moves it. Waiters re-check their deadline against it at
// least every millisecond of real time, so a test advances the clock and then waits on the
// condition it expects, never on a wall-clock window.
class SimulatedTimeSource final : public TimeSource {
 public:
  explicit SimulatedTimeSource(TimeNs start_ns) : now_(start_ns) {}

  TimeNs Now() const override { return now_.load(std::memory_order_acquire); }
  bool AwaitUntil(absl::Mutex& mu, const absl::Condition& cond, TimeNs deadline) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  void AdvanceBy(TimeNs delta_ns) { now_.fetch_add(delta_ns, std::memory_order_acq_rel); }
  // Moves time forward to `at_ns`; never backwards.
  void AdvanceTo(TimeNs at_ns);

  // How many threads wait in AwaitUntil for a deadline still ahead: the "run until idle" step
  // of a test. A test that advances time by a component's relative delay first waits until the
  // component sleeps on it; otherwise the delay could start after the advance.
  size_t Sleepers() const;
  // Moves time to the earliest deadline a sleeper waits for; false when none sleeps. With
  // Sleepers(), a test steps a component through its waits without knowing their lengths.
  bool AdvanceToNextSleeper();

 private:
  std::atomic<TimeNs> now_;
  // Deadlines of the threads in AwaitUntil. Taken inside the waiter's own mutex, never around
  // another lock.
  mutable absl::Mutex sleepers_mu_;
  mutable std::multiset<TimeNs> sleeping_until_ ABSL_GUARDED_BY(sleepers_mu_);
};

}  // namespace podscope::common
