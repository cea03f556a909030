// Interval algebra on sorted arrays, the base of every analysis. Half-open [start, end)
// intervals in nanoseconds. A "set" is a sorted vector of disjoint, non-touching intervals.
#pragma once

#include <cstdint>
#include <vector>

#include "common/time_types.h"

namespace podscope::analysis {

using common::TimeNs;

struct Interval {
  TimeNs start = 0;
  TimeNs end = 0;
  TimeNs length() const { return end - start; }
  friend bool operator==(const Interval&, const Interval&) = default;
};

using IntervalSet = std::vector<Interval>;

// Sorts and merges in place into a set; touching intervals merge ([1,2) + [2,3) = [1,3)),
// empty ones (end <= start) are dropped.
void Normalize(IntervalSet* intervals);
TimeNs TotalLength(const IntervalSet& set);
// |a ∩ b| for two sets, in one pass.
TimeNs IntersectionLength(const IntervalSet& a, const IntervalSet& b);
IntervalSet Intersect(const IntervalSet& a, const IntervalSet& b);
// a \ b.
IntervalSet Subtract(const IntervalSet& a, const IntervalSet& b);
// The parts of `set` inside [lo, hi).
IntervalSet Clip(const IntervalSet& set, TimeNs lo, TimeNs hi);

// Sweep over several classes at once: for every maximal segment of [lo, hi) where the set of
// active classes is constant, calls visit(segment_start, segment_end, active_mask), where bit
// c of the mask is set when class c covers the segment. Classes are sets (normalized). One
// pass, no allocation beyond a cursor per class; at most 32 classes.
template <typename Visit>
void SweepClasses(const std::vector<const IntervalSet*>& classes, TimeNs lo, TimeNs hi,
                  Visit&& visit);

}  // namespace podscope::analysis

#include "analysis/intervals_inl.h"
