// Small statistics shared by the analyses.
#pragma once

#include <algorithm>
#include <vector>

namespace podscope::coordinator::analysis {

// The median (the mean of the two middle values for an even count); 0 for none. Integers keep
// the midpoint without overflow.
template <typename T>
T Median(std::vector<T> v) {
  if (v.empty()) return T{};
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : v[n / 2 - 1] + (v[n / 2] - v[n / 2 - 1]) / 2;
}

}  // namespace podscope::coordinator::analysis
