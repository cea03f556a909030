// Sorting for analysis tables that arrive as a few sorted runs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace podscope::analysis {

// Sorts `v` by `less`. What analyses sort is mostly built from a few tables that are each in time
// order (one stream's kernels, one thread's calls), so it arrives as a handful of sorted runs:
// merging them costs one pass per level of log2(runs), where introsort degrades on such input to
// its heapsort fallback. Input without long runs is sorted by std::sort. Not stable: give `less`
// a total order where ties would change a result.
template <typename T, typename Less>
void SortRuns(std::vector<T>& v, Less less) {
  std::vector<size_t> run_starts = {0};
  for (size_t i = 1; i < v.size(); ++i) {
    if (!less(v[i], v[i - 1])) continue;
    run_starts.push_back(i);
    if (run_starts.size() > v.size() / 32 + 1) {  // runs this short hold no order worth keeping
      std::sort(v.begin(), v.end(), less);
      return;
    }
  }
  run_starts.push_back(v.size());
  while (run_starts.size() > 2) {
    std::vector<size_t> merged = {0};
    for (size_t r = 0; r + 2 < run_starts.size(); r += 2) {
      std::inplace_merge(v.begin() + run_starts[r], v.begin() + run_starts[r + 1],
                         v.begin() + run_starts[r + 2], less);
      merged.push_back(run_starts[r + 2]);
    }
    if (run_starts.size() % 2 == 0) merged.push_back(run_starts.back());  // an odd run waits
    run_starts = std::move(merged);
  }
}

}  // namespace podscope::analysis
