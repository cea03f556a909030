// Fitting an agent's clock to the coordinator's from NTP-style exchanges
// (docs/life-of-a-capture.md).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

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
  // Samples closer than this on the agent's clock form one burst. Queueing only ever adds
  // delay, so within a burst only the fastest exchanges are kept: those within
  // keep_within_fastest times the burst's minimum round trip.
  int64_t burst_gap_ns = 200'000'000;
  double keep_within_fastest = 1.5;
  // A drift is fitted only over at least this much time; below it, drift is taken as zero.
  int64_t min_drift_span_ns = 500'000'000;
  // Fitted drifts beyond this are not physical (crystal clocks are within ~100 ppm).
  int64_t max_drift_ppb = 500'000;
  // The true drift is within this (crystal tolerance): the prior of the feasible-lines fit,
  // and the least-squares fit's drift error when its anchors say nothing tighter. Never trust
  // a least-squares drift to better than min_drift_tolerance_ppb.
  int64_t unfitted_drift_tolerance_ppb = 100'000;
  int64_t min_drift_tolerance_ppb = 1'000;
};

// One kept exchange, as the bound sees it: at agent time x the true offset was measured
// within `bound` (half its round trip), and the model misses that measurement by `residual`.
struct ClockAnchor {
  TimeNs x = 0;
  int64_t bound = 0;
  int64_t residual = 0;
};

// One corner of the set of clock lines every exchange allows: offset `a` (ns, coordinator
// minus agent, at the model's reference instant) and slope `b` (ns per ns of agent time).
struct ClockLine {
  double a = 0;
  double b = 0;
};

enum class ClockFitMethod {
  // The lines no exchange rules out (each exchange's request cannot arrive before it was
  // sent, nor its reply): the model is the middle of that set, the bound its exact extent.
  kFeasibleLines,
  // The exchanges contradict every line (a stepped or wandering clock): weighted least
  // squares over the fastest exchanges of each burst, bounded through anchors.
  kLeastSquares,
};

struct ClockFit {
  // Maps the agent's clock onto the coordinator's: aligned = agent + offset + drift term
  // around the newest sample.
  common::ClockModel model;  // error_bound_ns: the bound at the newest sample
  ClockFitMethod method = ClockFitMethod::kFeasibleLines;
  TimeNs first_ns = 0, last_ns = 0;  // agent-clock span of the samples used
  bool drift_fitted = false;
  int64_t drift_tolerance_ppb = 0;   // how far the true drift may be from the model's
  std::vector<ClockLine> corners;    // kFeasibleLines: the corners of the feasible set
  std::vector<ClockAnchor> anchors;  // kLeastSquares

  // The bound at an agent-clock instant. kFeasibleLines: the farthest any allowed line is
  // from the model there (exact, given the clock is linear over the samples' span).
  // kLeastSquares: the best anchor's measurement bound plus the model's miss there, plus what
  // the drift tolerance allows between the anchor and the instant.
  int64_t ErrorBoundAt(TimeNs agent_ns) const;
};

// The feasible-lines fit, falling back to least squares when the exchanges admit no line.
// InvalidArgument when no sample is usable.
absl::StatusOr<ClockFit> FitClock(std::span<const ClockSample> samples,
                                  const ClockFitOptions& options = {});
// The two fits on their own. FitFeasibleLines: FailedPrecondition when no line fits.
absl::StatusOr<ClockFit> FitFeasibleLines(std::span<const ClockSample> samples,
                                          const ClockFitOptions& options = {});
absl::StatusOr<ClockFit> FitLeastSquares(std::span<const ClockSample> samples,
                                         const ClockFitOptions& options = {});

}  // namespace podscope::coordinator
