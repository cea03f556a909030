#include "common/time_source.h"

#include "absl/time/time.h"

namespace podscope::common {
namespace {

class RealTimeSource final : public TimeSource {
 public:
  TimeNs Now() const override { return HostNowNs(); }

  bool AwaitUntil(absl::Mutex& mu, const absl::Condition& cond, TimeNs deadline) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    // absl's deadlines are on the same clock (absl::Now() reads CLOCK_REALTIME).
    return mu.AwaitWithDeadline(cond, absl::FromUnixNanos(deadline));
  }
};

// How often a simulated waiter re-reads the simulated clock: the delay between a test advancing
// time and a waiter noticing, never a condition of correctness.
constexpr absl::Duration kSimulatedPoll = absl::Milliseconds(1);

}  // namespace

const TimeSource& RealTime() {
  static const RealTimeSource* const kRealTime = new RealTimeSource();
  return *kRealTime;
}

bool SimulatedTimeSource::AwaitUntil(absl::Mutex& mu, const absl::Condition& cond,
                                     TimeNs deadline) const {
  const auto due_or_met = [&] { return cond.Eval() || Now() >= deadline; };
  if (due_or_met()) return cond.Eval();
  std::multiset<TimeNs>::iterator entry;
  {
    absl::MutexLock lock(&sleepers_mu_);
    entry = sleeping_until_.insert(deadline);
  }
  while (!due_or_met()) {
    mu.AwaitWithTimeout(absl::Condition(&due_or_met), kSimulatedPoll);
  }
  {
    absl::MutexLock lock(&sleepers_mu_);
    sleeping_until_.erase(entry);
  }
  return cond.Eval();
}

size_t SimulatedTimeSource::Sleepers() const {
  absl::MutexLock lock(&sleepers_mu_);
  const TimeNs now = Now();
  size_t n = 0;
  for (auto it = sleeping_until_.upper_bound(now); it != sleeping_until_.end(); ++it) ++n;
  return n;
}

bool SimulatedTimeSource::AdvanceToNextSleeper() {
  TimeNs next = 0;
  {
    absl::MutexLock lock(&sleepers_mu_);
    const auto it = sleeping_until_.upper_bound(Now());
    if (it == sleeping_until_.end()) return false;
    next = *it;
  }
  AdvanceTo(next);
  return true;
}

void SimulatedTimeSource::AdvanceTo(TimeNs at_ns) {
  TimeNs now = now_.load(std::memory_order_acquire);
  while (now < at_ns && !now_.compare_exchange_weak(now, at_ns, std::memory_order_acq_rel)) {
  }
}

}  // namespace podscope::common
