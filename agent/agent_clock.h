// The agent's notion of time. A real agent reads the host's clock as is; an agent serving
// simulated ranks can run on a deliberately skewed clock (offset and drift against the host's),
// so that clock alignment has something real to recover. Everything the agent timestamps —
// clock-sync exchanges, capture start and stop, events — goes through one AgentClock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "common/clock_model.h"

namespace podscope::agent {

using common::TimeNs;

using common::HostNowNs;

class AgentClock {
 public:
  // Identity: the host clock.
  AgentClock() = default;
  // host -> agent time: agent = host + offset + (host - reference) * drift.
  AgentClock(int64_t offset_ns, double drift_ppm, TimeNs reference_ns)
      : skew_{offset_ns, static_cast<int64_t>(drift_ppm * 1000), reference_ns, 0, common::ClockSource::kNone} {}

  TimeNs Now() const { return FromHost(HostNowNs()); }
  TimeNs FromHost(TimeNs host) const { return skew_.ToAligned(host); }
  TimeNs ToHost(TimeNs agent) const { return skew_.ToLocal(agent); }
  // The exact host -> agent mapping (what a perfect alignment would invert).
  const common::ClockModel& skew() const { return skew_; }

  // Waits on `cv` until Now() >= deadline or `stop()` holds; returns true when the deadline
  // was reached. Wakes up within tens of microseconds of the deadline (timed waits, no spinning).
  template <typename Predicate>
  bool SleepUntil(TimeNs deadline, std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                  Predicate stop) const {
    while (!stop()) {
      const TimeNs left = deadline - Now();
      if (left <= 0) return true;
      cv.wait_for(lock, std::chrono::nanoseconds(left));
    }
    return false;
  }

 private:
  common::ClockModel skew_;
};

}  // namespace podscope::agent
