// The agent's notion of time. A real agent reads the host's clock as is; an agent serving
// simulated ranks can run on a deliberately skewed clock (offset and drift against the host's),
// so that clock alignment has something real to recover. Everything the agent timestamps —
// clock-sync exchanges, capture start and stop, events — goes through one AgentClock. The host
// clock underneath is a TimeSource, so tests run the agent's timers on simulated time.
#pragma once

#include "absl/synchronization/mutex.h"
#include "common/clock_model.h"
#include "common/time_source.h"

namespace podscope::agent {

using common::TimeNs;

using common::HostNowNs;

class AgentClock {
 public:
  // Identity: the host clock.
  explicit AgentClock(const common::TimeSource& host = common::RealTime()) : host_(&host) {}
  // host -> agent time: agent = host + offset + (host - reference) * drift.
  AgentClock(int64_t offset_ns, double drift_ppm, TimeNs reference_ns,
             const common::TimeSource& host = common::RealTime())
      : host_(&host),
        skew_{offset_ns, static_cast<int64_t>(drift_ppm * 1000), reference_ns, 0,
              common::ClockSource::kNone} {}

  TimeNs Now() const { return FromHost(host_->Now()); }
  TimeNs FromHost(TimeNs host) const { return skew_.ToAligned(host); }
  TimeNs ToHost(TimeNs agent) const { return skew_.ToLocal(agent); }
  // The exact host -> agent mapping (what a perfect alignment would invert).
  const common::ClockModel& skew() const { return skew_; }
  // The host clock underneath, for timers that work in host time.
  const common::TimeSource& host_time() const { return *host_; }

  // With `mu` held: waits until agent time `deadline` or until `stop` holds; returns true when
  // the deadline was reached and `stop` does not hold.
  bool SleepUntil(TimeNs deadline, absl::Mutex& mu, const absl::Condition& stop) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return !host_->AwaitUntil(mu, stop, ToHost(deadline));
  }

 private:
  const common::TimeSource* host_;
  common::ClockModel skew_;
};

}  // namespace podscope::agent
