#include "coordinator/clock/clock_fit.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace podscope::coordinator {

int64_t ClockFit::ErrorBoundAt(TimeNs agent_ns) const {
  const int64_t outside = agent_ns < first_ns ? first_ns - agent_ns : agent_ns > last_ns ? agent_ns - last_ns : 0;
  const int64_t ppm = drift_fitted ? 20 : 100;
  return model.error_bound_ns + outside / 1'000'000 * ppm;
}

absl::StatusOr<ClockFit> FitClock(std::span<const ClockSample> samples, const ClockFitOptions& options) {
  std::vector<ClockSample> usable;
  usable.reserve(samples.size());
  for (const ClockSample& s : samples) {
    // A negative round trip or a reply "sent" before it was received is a broken sample.
    if (s.t4 >= s.t1 && s.t3 >= s.t2 && s.Delay() >= 0) usable.push_back(s);
  }
  if (usable.empty()) return absl::InvalidArgumentError("no usable clock samples");
  std::sort(usable.begin(), usable.end(),
            [](const ClockSample& a, const ClockSample& b) { return a.AgentMidpoint() < b.AgentMidpoint(); });

  // The minimum-delay sample of every burst.
  std::vector<ClockSample> best;
  for (size_t i = 0; i < usable.size(); ++i) {
    const bool new_burst =
        best.empty() || usable[i].AgentMidpoint() - usable[i - 1].AgentMidpoint() > options.burst_gap_ns;
    if (new_burst) {
      best.push_back(usable[i]);
    } else if (usable[i].Delay() < best.back().Delay()) {
      best.back() = usable[i];
    }
  }

  ClockFit fit;
  fit.first_ns = best.front().AgentMidpoint();
  fit.last_ns = best.back().AgentMidpoint();
  common::ClockModel& model = fit.model;
  model.source = common::ClockSource::kNetwork;
  model.reference_ns = best.back().AgentMidpoint();
  double slope = 0;
  double intercept = static_cast<double>(best.back().Offset());
  const int64_t span = best.back().AgentMidpoint() - best.front().AgentMidpoint();
  if (best.size() >= 2 && span >= options.min_drift_span_ns) {
    // Least squares of offset against agent time, in doubles relative to the reference so
    // nanosecond epochs do not lose precision.
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const ClockSample& s : best) {
      const double x = static_cast<double>(s.AgentMidpoint() - model.reference_ns);
      const double y = static_cast<double>(s.Offset());
      sx += x, sy += y, sxx += x * x, sxy += x * y;
    }
    const double n = static_cast<double>(best.size());
    const double denominator = n * sxx - sx * sx;
    if (denominator > 0) {
      slope = (n * sxy - sx * sy) / denominator;
      const double limit = static_cast<double>(options.max_drift_ppb) / 1e9;
      slope = std::clamp(slope, -limit, limit);
      intercept = (sy - slope * sx) / n;
      fit.drift_fitted = true;
    }
  }
  model.offset_ns = std::llround(intercept);
  model.drift_ppb = std::llround(slope * 1e9);

  int64_t half_round_trip = 0;
  int64_t residual = 0;
  for (const ClockSample& s : best) {
    half_round_trip = std::max(half_round_trip, (s.Delay() + 1) / 2);
    const TimeNs agent = s.AgentMidpoint();
    const int64_t predicted = model.ToAligned(agent) - agent;
    residual = std::max<int64_t>(residual, std::llabs(predicted - s.Offset()));
  }
  model.error_bound_ns = half_round_trip + residual;
  return fit;
}

}  // namespace podscope::coordinator
