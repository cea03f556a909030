#include "coordinator/clock/clock_fit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace podscope::coordinator {

namespace {

// A sample whose reply was "sent" before its request arrived, or that came back before it
// left, is broken.
std::vector<ClockSample> UsableSamples(std::span<const ClockSample> samples) {
  std::vector<ClockSample> usable;
  usable.reserve(samples.size());
  for (const ClockSample& s : samples) {
    if (s.t4 >= s.t1 && s.t3 >= s.t2 && s.Delay() >= 0) usable.push_back(s);
  }
  std::sort(usable.begin(), usable.end(), [](const ClockSample& a, const ClockSample& b) {
    return a.AgentMidpoint() < b.AgentMidpoint();
  });
  return usable;
}

// Keeps the part of a convex polygon where p*a + q*b <= r (Sutherland-Hodgman, one edge).
std::vector<ClockLine> Clip(const std::vector<ClockLine>& polygon, double p, double q, double r) {
  std::vector<ClockLine> out;
  const size_t n = polygon.size();
  out.reserve(n + 1);
  for (size_t i = 0; i < n; ++i) {
    const ClockLine& u = polygon[i];
    const ClockLine& v = polygon[(i + 1) % n];
    const double su = p * u.a + q * u.b - r, sv = p * v.a + q * v.b - r;
    if (su <= 0) out.push_back(u);
    if ((su < 0 && sv > 0) || (su > 0 && sv < 0)) {
      const double t = su / (su - sv);
      out.push_back({u.a + t * (v.a - u.a), u.b + t * (v.b - u.b)});
    }
  }
  return out;
}

}  // namespace

int64_t ClockFit::ErrorBoundAt(TimeNs agent_ns) const {
  if (method == ClockFitMethod::kFeasibleLines) {
    // The model is a line too; its distance from the farthest corner's line, at agent_ns.
    const double x = static_cast<double>(agent_ns - model.reference_ns);
    const double model_offset =
        static_cast<double>(model.offset_ns) + static_cast<double>(model.drift_ppb) * 1e-9 * x;
    double worst = 0;
    for (const ClockLine& c : corners)
      worst = std::max(worst, std::abs(model_offset - (c.a + c.b * x)));
    return static_cast<int64_t>(std::ceil(worst)) +
           1;  // +1: the model's integer rounding at ToAligned
  }
  int64_t best = std::numeric_limits<int64_t>::max();
  for (const ClockAnchor& a : anchors) {
    const double distance = std::abs(static_cast<double>(agent_ns - a.x));
    const auto drift =
        static_cast<int64_t>(distance * static_cast<double>(drift_tolerance_ppb) / 1e9);
    best = std::min(best, a.bound + a.residual + drift);
  }
  return best;
}

absl::StatusOr<ClockFit> FitClock(std::span<const ClockSample> samples,
                                  const ClockFitOptions& options) {
  absl::StatusOr<ClockFit> fit = FitFeasibleLines(samples, options);
  if (fit.ok() || fit.status().code() != absl::StatusCode::kFailedPrecondition) return fit;
  return FitLeastSquares(samples, options);
}

absl::StatusOr<ClockFit> FitFeasibleLines(std::span<const ClockSample> samples,
                                          const ClockFitOptions& options) {
  const std::vector<ClockSample> usable = UsableSamples(samples);
  if (usable.empty()) return absl::InvalidArgumentError("no usable clock samples");
  ClockFit fit;
  fit.method = ClockFitMethod::kFeasibleLines;
  fit.first_ns = usable.front().AgentMidpoint();
  fit.last_ns = usable.back().AgentMidpoint();
  const TimeNs reference = fit.last_ns;
  // With the true offset a line a + b * x over agent time x (relative to the reference), each
  // exchange says: its request arrived after it was sent, a + b * x(t1) <= t2 - t1, and its
  // reply after it was sent, a + b * x(t4) >= t3 - t4. Each direction is bounded by its own
  // fastest exchanges, so jitter that spares one direction of one exchange and the other of
  // another still yields a tight set. Offsets are taken relative to the newest exchange's
  // midpoint estimate, so the doubles stay small and exact.
  const double base = static_cast<double>(usable.back().Offset());
  const double prior = static_cast<double>(options.unfitted_drift_tolerance_ppb) * 1e-9;
  double a_low = -std::numeric_limits<double>::infinity(),
         a_high = std::numeric_limits<double>::infinity();
  for (const ClockSample& s : usable) {
    const double x1 = static_cast<double>(s.t1 - reference),
                 x4 = static_cast<double>(s.t4 - reference);
    a_high = std::min(a_high, static_cast<double>(s.t2 - s.t1) - base + prior * std::abs(x1));
    a_low = std::max(a_low, static_cast<double>(s.t3 - s.t4) - base - prior * std::abs(x4));
  }
  // Half a nanosecond of slack keeps exact measurements (a zero-delay exchange) feasible
  // through rounding.
  constexpr double kSlack = 0.5;
  std::vector<ClockLine> polygon = {{a_low - kSlack, -prior},
                                    {a_high + kSlack, -prior},
                                    {a_high + kSlack, prior},
                                    {a_low - kSlack, prior}};
  if (a_low > a_high + 2 * kSlack) polygon.clear();
  for (const ClockSample& s : usable) {
    if (polygon.empty()) break;
    const double x1 = static_cast<double>(s.t1 - reference),
                 x4 = static_cast<double>(s.t4 - reference);
    polygon = Clip(polygon, 1, x1, static_cast<double>(s.t2 - s.t1) - base + kSlack);
    if (!polygon.empty())
      polygon = Clip(polygon, -1, -x4, -(static_cast<double>(s.t3 - s.t4) - base) + kSlack);
  }
  if (polygon.empty()) {
    return absl::FailedPreconditionError(
        "the clock exchanges admit no line within the crystal tolerance");
  }
  double a_min = std::numeric_limits<double>::infinity(), a_max = -a_min, b_min = a_min,
         b_max = -a_min;
  for (ClockLine& c : polygon) {
    c.a += base;
    a_min = std::min(a_min, c.a), a_max = std::max(a_max, c.a);
    b_min = std::min(b_min, c.b), b_max = std::max(b_max, c.b);
  }
  common::ClockModel& model = fit.model;
  model.source = common::ClockSource::kNetwork;
  model.reference_ns = reference;
  model.offset_ns = std::llround((a_min + a_max) / 2);
  model.drift_ppb = std::llround((b_min + b_max) / 2 * 1e9);
  fit.corners = std::move(polygon);
  fit.drift_fitted = fit.last_ns - fit.first_ns >= options.min_drift_span_ns;
  fit.drift_tolerance_ppb = static_cast<int64_t>(std::ceil((b_max - b_min) / 2 * 1e9));
  model.error_bound_ns = fit.ErrorBoundAt(reference);
  return fit;
}

absl::StatusOr<ClockFit> FitLeastSquares(std::span<const ClockSample> samples,
                                         const ClockFitOptions& options) {
  const std::vector<ClockSample> usable = UsableSamples(samples);
  if (usable.empty()) return absl::InvalidArgumentError("no usable clock samples");

  // Per burst, the exchanges within keep_within_fastest of its fastest.
  std::vector<ClockSample> kept;
  for (size_t begin = 0; begin < usable.size();) {
    size_t end = begin + 1;
    while (end < usable.size() &&
           usable[end].AgentMidpoint() - usable[end - 1].AgentMidpoint() <= options.burst_gap_ns)
      ++end;
    int64_t fastest = std::numeric_limits<int64_t>::max();
    for (size_t i = begin; i < end; ++i) fastest = std::min(fastest, usable[i].Delay());
    const double limit =
        std::max<double>(1.0, static_cast<double>(fastest) * options.keep_within_fastest);
    for (size_t i = begin; i < end; ++i) {
      if (static_cast<double>(usable[i].Delay()) <= limit) kept.push_back(usable[i]);
    }
    begin = end;
  }

  ClockFit fit;
  fit.method = ClockFitMethod::kLeastSquares;
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
  const double crystal =
      static_cast<double>(options.unfitted_drift_tolerance_ppb + std::llabs(model.drift_ppb));
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
  fit.drift_tolerance_ppb = std::max<int64_t>(options.min_drift_tolerance_ppb,
                                              static_cast<int64_t>(std::ceil(tolerance)));
  model.error_bound_ns = fit.ErrorBoundAt(fit.last_ns);
  return fit;
}

}  // namespace podscope::coordinator
