#include "coordinator/clock/clock_fit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace podscope::coordinator {

int64_t ClockFit::ErrorBoundAt(TimeNs agent_ns) const {
  int64_t best = std::numeric_limits<int64_t>::max();
  for (const ClockAnchor& a : anchors) {
    const double distance = std::abs(static_cast<double>(agent_ns - a.x));
    const auto drift = static_cast<int64_t>(distance * static_cast<double>(drift_tolerance_ppb) / 1e9);
    best = std::min(best, a.bound + a.residual + drift);
  }
  return best;
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

  // Per burst, the exchanges within keep_within_fastest of its fastest.
  std::vector<ClockSample> kept;
  for (size_t begin = 0; begin < usable.size();) {
    size_t end = begin + 1;
    while (end < usable.size() && usable[end].AgentMidpoint() - usable[end - 1].AgentMidpoint() <= options.burst_gap_ns) ++end;
    int64_t fastest = std::numeric_limits<int64_t>::max();
    for (size_t i = begin; i < end; ++i) fastest = std::min(fastest, usable[i].Delay());
    const double limit = std::max<double>(1.0, static_cast<double>(fastest) * options.keep_within_fastest);
    for (size_t i = begin; i < end; ++i) {
      if (static_cast<double>(usable[i].Delay()) <= limit) kept.push_back(usable[i]);
    }
    begin = end;
  }

  ClockFit fit;
  fit.first_ns = kept.front().AgentMidpoint();
  fit.last_ns = kept.back().AgentMidpoint();
  common::ClockModel& model = fit.model;
  model.source = common::ClockSource::kNetwork;
  model.reference_ns = fit.last_ns;

  // Weighted least squares of offset against agent time, in doubles relative to the reference
  // so nanosecond epochs keep their precision. Weights: 1 / (round trip + 1 us)^2.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const ClockSample& s : kept) {
    const double d = static_cast<double>(s.Delay()) + 1000.0;
    const double w = 1.0 / (d * d);
    const double x = static_cast<double>(s.AgentMidpoint() - model.reference_ns);
    const double y = static_cast<double>(s.Offset());
    sw += w, sx += w * x, sy += w * y, sxx += w * x * x, sxy += w * x * y;
  }
  double slope = 0;
  double intercept = sy / sw;
  const double denominator = sw * sxx - sx * sx;
  if (fit.last_ns - fit.first_ns >= options.min_drift_span_ns && denominator > 0) {
    const double limit = static_cast<double>(options.max_drift_ppb) / 1e9;
    slope = std::clamp((sw * sxy - sx * sy) / denominator, -limit, limit);
    intercept = (sy - slope * sx) / sw;
    fit.drift_fitted = true;
  }
  model.offset_ns = std::llround(intercept);
  model.drift_ppb = std::llround(slope * 1e9);

  for (const ClockSample& s : kept) {
    const TimeNs agent = s.AgentMidpoint();
    const int64_t predicted = model.ToAligned(agent) - agent;
    fit.anchors.push_back({agent, (s.Delay() + 1) / 2, std::llabs(predicted - s.Offset())});
  }
  // How far the model's drift may be from the true one. The model misses the true offset by
  // at most e = bound + residual at every anchor, so over any two anchors the drifts differ by
  // at most (e_i + e_j) / distance: the tightest pair bounds it. Without an informative pair,
  // crystal tolerance (the true drift is within +-100 ppm).
  const double crystal = static_cast<double>(options.unfitted_drift_tolerance_ppb + std::llabs(model.drift_ppb));
  double tolerance = crystal;
  const std::vector<ClockAnchor>& a = fit.anchors;
  const size_t step = std::max<size_t>(1, a.size() / 32);  // at most ~32^2 pairs
  for (size_t i = 0; i < a.size(); i += step) {
    for (size_t j = i + step; j < a.size(); j += step) {
      const double distance = static_cast<double>(a[j].x - a[i].x);
      if (distance <= 0) continue;
      const double e = static_cast<double>(a[i].bound + a[i].residual + a[j].bound + a[j].residual);
      tolerance = std::min(tolerance, e / distance * 1e9);
    }
  }
  fit.drift_tolerance_ppb = std::max<int64_t>(options.min_drift_tolerance_ppb, static_cast<int64_t>(std::ceil(tolerance)));
  model.error_bound_ns = fit.ErrorBoundAt(fit.last_ns);
  return fit;
}

}  // namespace podscope::coordinator
