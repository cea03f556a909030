#include "coordinator/clock/collective_refinement.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <tuple>

namespace podscope::coordinator {

namespace {

int64_t Median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(mid), v.end());
  return v[mid];
}

}  // namespace

std::vector<DomainCorrection> RefineWithCollectives(const common::CaptureView& view,
                                                    const std::vector<std::string>& domain,
                                                    const CollectiveRefinementOptions& options) {
  // Domains by index.
  std::map<std::string, size_t> index;
  std::vector<int> domain_of(view.size());
  for (size_t i = 0; i < view.size(); ++i)
    domain_of[i] = static_cast<int>(index.emplace(domain[i], index.size()).first->second);
  std::vector<DomainCorrection> out(index.size());
  for (const auto& [name, i] : index) out[i].domain = name;
  if (index.size() < 2) return out;

  // Every collective with a sequence number: (communicator, sequence, op) -> aligned ends.
  using Key = std::tuple<std::string, int64_t, int>;
  std::map<Key, std::vector<std::pair<int, common::TimeNs>>> ends;
  for (size_t w = 0; w < view.size(); ++w) {
    const common::WorkerTrace& t = view.worker(w);
    const common::CollectiveTable& c = t.collectives;
    for (size_t i = 0; i < c.size(); ++i) {
      if (c.sequence[i] == common::kUnknownSequence) continue;
      Key key{std::string(t.strings.Get(c.communicator[i])), c.sequence[i],
              static_cast<int>(c.op[i])};
      ends[key].emplace_back(domain_of[w], t.clock.ToAligned(c.kernel_end[i]));
    }
  }

  // Residual of each domain in each collective it shares with another domain, against one time
  // origin for all domains (so their lines can be averaged), converted to each domain's model
  // reference at the end.
  std::vector<common::TimeNs> reference_of(index.size());
  for (size_t w = 0; w < view.size(); ++w)
    reference_of[domain_of[w]] = view.worker(w).clock.reference_ns;
  std::optional<common::TimeNs> origin;
  std::vector<std::vector<int64_t>> residuals(index.size());
  std::vector<std::vector<double>> times(index.size());
  for (auto& [key, list] : ends) {
    bool shared = false;
    for (const auto& e : list) shared |= e.first != list.front().first;
    if (!shared) continue;
    std::vector<int64_t> all;
    for (const auto& e : list) all.push_back(e.second);
    const int64_t reference = Median(all);
    std::map<int, std::vector<int64_t>> by_domain;
    for (const auto& e : list) by_domain[e.first].push_back(e.second - reference);
    if (!origin) origin = reference;
    for (auto& [d, r] : by_domain) {
      residuals[d].push_back(Median(std::move(r)));
      times[d].push_back(static_cast<double>(reference - *origin));
    }
  }

  // Per domain: a line through its residuals (the offset error at its reference and a drift
  // error), sharpened by one pass that drops residuals beyond 3 MADs, and its spread.
  std::vector<double> offsets(index.size()), slopes(index.size());
  size_t applied = 0;
  for (size_t d = 0; d < index.size(); ++d) {
    out[d].matches = residuals[d].size();
    if (residuals[d].size() < options.min_matches) continue;
    std::vector<bool> use(residuals[d].size(), true);
    double a = 0, b = 0;
    int64_t mad = 0;
    for (int pass = 0; pass < 2; ++pass) {
      double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
      for (size_t k = 0; k < residuals[d].size(); ++k) {
        if (!use[k]) continue;
        const double x = times[d][k], y = static_cast<double>(residuals[d][k]);
        n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
      }
      const double denominator = n * sxx - sx * sx;
      b = denominator > 0 ? (n * sxy - sx * sy) / denominator : 0;
      a = (sy - b * sx) / n;
      std::vector<int64_t> deviation;
      for (size_t k = 0; k < residuals[d].size(); ++k) {
        deviation.push_back(std::llabs(residuals[d][k] - std::llround(a + b * times[d][k])));
      }
      mad = Median(deviation);
      for (size_t k = 0; k < residuals[d].size(); ++k) use[k] = deviation[k] <= 3 * mad;
    }
    offsets[d] = a, slopes[d] = b;
    out[d].spread_ns = mad;
    out[d].applied = true;
    ++applied;
  }
  // The network models bound each domain's true error: |error| <= its bound. The collectives fix
  // the domains against each other, leaving one offset common to the pod free: every domain's
  // correction is that common line minus its own. The common line is the domains' mean, moved
  // the least that keeps every correction within its domain's network bound, so the refined pod
  // stays where the network placed it and no domain moves further than its network model allows.
  // A domain that no common offset reconciles with the others (its collectives do not end with
  // theirs, or its network model is wrong in a way this cannot tell) keeps its network model:
  // the one farthest from the rest is dropped until the others agree.
  std::vector<int64_t> bound_of(index.size(), std::numeric_limits<int64_t>::max());
  // Only network models bound anything: a worker on its own clock is not corrected anyway.
  for (size_t w = 0; w < view.size(); ++w) {
    const common::ClockModel& clock = view.worker(w).clock;
    if (clock.source == common::ClockSource::kNetwork)
      bound_of[domain_of[w]] = std::min(bound_of[domain_of[w]], clock.error_bound_ns);
  }
  while (true) {
    if (applied < 2) {
      for (DomainCorrection& c : out) c.applied = false;
      return out;
    }
    double sum_offset = 0, sum_slope = 0;
    for (size_t d = 0; d < index.size(); ++d) {
      if (out[d].applied) sum_offset += offsets[d], sum_slope += slopes[d];
    }
    const double mean_offset = sum_offset / static_cast<double>(applied);
    const double mean_slope = sum_slope / static_cast<double>(applied);
    // Each domain admits the common offset (at the origin) within [centre - bound, centre +
    // bound], its correction being that offset plus the common drift, less its own line, at its
    // model reference.
    std::vector<double> centre(index.size());
    double low = -std::numeric_limits<double>::infinity(), high = -low;
    for (size_t d = 0; d < index.size(); ++d) {
      if (!out[d].applied) continue;
      const double at_reference = static_cast<double>(reference_of[d] - *origin);
      centre[d] = offsets[d] + (slopes[d] - mean_slope) * at_reference;
      const double bound = static_cast<double>(bound_of[d]);
      low = std::max(low, centre[d] - bound);
      high = std::min(high, centre[d] + bound);
    }
    if (low <= high) {
      const double common = std::clamp(mean_offset, low, high);
      for (size_t d = 0; d < index.size(); ++d) {
        if (!out[d].applied) continue;
        out[d].correction_ns = std::llround(common - centre[d]);
        out[d].drift_correction_ppb = std::llround((mean_slope - slopes[d]) * 1e9);
      }
      return out;
    }
    // The domain whose admitted offsets lie farthest outside the others' median centre.
    std::vector<int64_t> centres;
    for (size_t d = 0; d < index.size(); ++d)
      if (out[d].applied) centres.push_back(std::llround(centre[d]));
    const double median = static_cast<double>(Median(centres));
    size_t worst = index.size();
    double worst_excess = -std::numeric_limits<double>::infinity();
    for (size_t d = 0; d < index.size(); ++d) {
      if (!out[d].applied) continue;
      const double excess = std::abs(centre[d] - median) - static_cast<double>(bound_of[d]);
      if (excess > worst_excess) worst_excess = excess, worst = d;
    }
    if (worst == index.size()) {  // every excess NaN: drop the first applied
      worst = static_cast<size_t>(std::distance(
          out.begin(), std::find_if(out.begin(), out.end(),
                                    [](const DomainCorrection& c) { return c.applied; })));
    }
    out[worst].applied = false;
    --applied;
  }
}

}  // namespace podscope::coordinator
