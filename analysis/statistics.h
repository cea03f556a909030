// Small statistics shared by the analyses.
#pragma once

#include <algorithm>
#include <vector>

namespace podscope::analysis {

// The median (the mean of the two middle values for an even count); 0 for none. Integers keep
// the midpoint without overflow.
template <typename T>
T Median(std::vector<T> v) {
  if (v.empty()) return T{};
  const size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + n / 2, v.end());
  const T upper = v[n / 2];
  if (n % 2) return upper;
  const T lower = *std::max_element(v.begin(), v.begin() + n / 2);
  return lower + (upper - lower) / 2;
}

}  // namespace podscope::analysis
