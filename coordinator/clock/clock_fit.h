// Fitting an agent's clock to the coordinator's from NTP-style exchanges (DESIGN §4.1).
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "common/clock_model.h"

namespace podscope::coordinator {

using common::TimeNs;

// One exchange: t1 agent send, t2 coordinator receive, t3 coordinator send, t4 agent receive.
struct ClockSample {
  TimeNs t1 = 0, t2 = 0, t3 = 0, t4 = 0;
  // Coordinator minus agent, assuming symmetric paths.
  int64_t Offset() const { return ((t2 - t1) + (t3 - t4)) / 2; }
  // Round trip spent on the network (the coordinator's processing time removed).
  int64_t Delay() const { return (t4 - t1) - (t3 - t2); }
  TimeNs AgentMidpoint() const { return t1 + (t4 - t1) / 2; }
};

struct ClockFitOptions {
  // Samples closer than this on the agent's clock form one burst; each burst contributes its
  // minimum-delay sample (queueing only ever adds delay, so the fastest exchange is the truest).
  int64_t burst_gap_ns = 200'000'000;
  // A drift is fitted only over at least this much time; below it, drift is taken as zero.
  int64_t min_drift_span_ns = 500'000'000;
  // Fitted drifts beyond this are not physical (crystal clocks are within ~100 ppm).
  int64_t max_drift_ppb = 500'000;
};

struct ClockFit {
  // Maps the agent's clock onto the coordinator's: aligned = agent + offset + drift term
  // around the newest burst. Its error bound holds between the first and last chosen samples:
  // half the largest chosen round trip plus the largest fit residual.
  common::ClockModel model;
  TimeNs first_ns = 0, last_ns = 0;  // agent-clock span of the chosen samples
  bool drift_fitted = false;

  // The bound at an agent-clock instant: outside the sampled span an unknown drift error adds
  // up (a fitted drift is trusted to 20 ppm, an unfitted one to 100 ppm, crystal tolerance).
  int64_t ErrorBoundAt(TimeNs agent_ns) const;
};

// InvalidArgument when no sample is usable.
absl::StatusOr<ClockFit> FitClock(std::span<const ClockSample> samples, const ClockFitOptions& options = {});

}  // namespace podscope::coordinator
