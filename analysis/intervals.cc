#include "analysis/intervals.h"

#include <algorithm>

#include "analysis/sorted_runs.h"

namespace podscope::analysis {

void Normalize(IntervalSet* intervals) {
  IntervalSet& v = *intervals;
  SortRuns(v, [](const Interval& a, const Interval& b) { return a.start < b.start; });
  size_t out = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].end <= v[i].start) continue;
    if (out > 0 && v[i].start <= v[out - 1].end) {
      v[out - 1].end = std::max(v[out - 1].end, v[i].end);
    } else {
      v[out++] = v[i];
    }
  }
  v.resize(out);
}

TimeNs TotalLength(const IntervalSet& set) {
  TimeNs total = 0;
  for (const Interval& iv : set) total += iv.length();
  return total;
}

TimeNs IntersectionLength(const IntervalSet& a, const IntervalSet& b) {
  TimeNs total = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const TimeNs s = std::max(a[i].start, b[j].start);
    const TimeNs e = std::min(a[i].end, b[j].end);
    if (e > s) total += e - s;
    if (a[i].end < b[j].end) {
      ++i;
    } else {
      ++j;
    }
  }
  return total;
}

IntervalSet Intersect(const IntervalSet& a, const IntervalSet& b) {
  IntervalSet out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const TimeNs s = std::max(a[i].start, b[j].start);
    const TimeNs e = std::min(a[i].end, b[j].end);
    if (e > s) out.push_back({s, e});
    if (a[i].end < b[j].end) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

IntervalSet Subtract(const IntervalSet& a, const IntervalSet& b) {
  IntervalSet out;
  size_t j = 0;
  for (const Interval& iv : a) {
    TimeNs s = iv.start;
    while (j < b.size() && b[j].end <= s) ++j;
    size_t k = j;
    while (k < b.size() && b[k].start < iv.end) {
      if (b[k].start > s) out.push_back({s, b[k].start});
      s = std::max(s, b[k].end);
      if (s >= iv.end) break;
      ++k;
    }
    if (s < iv.end) out.push_back({s, iv.end});
  }
  return out;
}

IntervalSet Clip(const IntervalSet& set, TimeNs lo, TimeNs hi) {
  IntervalSet out;
  auto it = std::upper_bound(set.begin(), set.end(), lo,
                             [](TimeNs t, const Interval& iv) { return t < iv.end; });
  for (; it != set.end() && it->start < hi; ++it) {
    const TimeNs s = std::max(it->start, lo);
    const TimeNs e = std::min(it->end, hi);
    if (e > s) out.push_back({s, e});
  }
  return out;
}

}  // namespace podscope::analysis
