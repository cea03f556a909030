// Template implementation of SweepClasses (included from intervals.h).
#pragma once

#include <algorithm>
#include <limits>

namespace podscope::analysis {

template <typename Visit>
void SweepClasses(const std::vector<const IntervalSet*>& classes, TimeNs lo, TimeNs hi,
                  Visit&& visit) {
  const size_t n = classes.size();
  std::vector<size_t> cursor(n, 0);
  // Skip intervals that end before `lo`.
  for (size_t c = 0; c < n; ++c) {
    const IntervalSet& set = *classes[c];
    cursor[c] = static_cast<size_t>(
        std::upper_bound(set.begin(), set.end(), lo,
                         [](TimeNs t, const Interval& iv) { return t < iv.end; }) -
        set.begin());
  }
  TimeNs t = lo;
  while (t < hi) {
    uint32_t mask = 0;
    TimeNs next = hi;
    for (size_t c = 0; c < n; ++c) {
      const IntervalSet& set = *classes[c];
      size_t& i = cursor[c];
      while (i < set.size() && set[i].end <= t) ++i;
      if (i == set.size()) continue;
      if (set[i].start <= t) {
        mask |= 1u << c;
        next = std::min(next, set[i].end);
      } else {
        next = std::min(next, set[i].start);
      }
    }
    visit(t, next, mask);
    t = next;
  }
}

}  // namespace podscope::analysis
