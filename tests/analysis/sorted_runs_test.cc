#include "analysis/sorted_runs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

namespace podscope::analysis {
namespace {

using Pair = std::pair<int, int>;  // (key, where it came from)

bool KeyLess(const Pair& a, const Pair& b) { return a.first < b.first; }

// `runs` ascending runs of `run_length` keys each, interleaved in time like streams' kernels.
std::vector<Pair> Runs(int runs, int run_length, std::mt19937& random) {
  std::vector<Pair> v;
  for (int r = 0; r < runs; ++r) {
    int key = static_cast<int>(random() % 50);
    for (int i = 0; i < run_length; ++i) {
      key += static_cast<int>(random() % 3);  // repeated keys inside a run too
      v.emplace_back(key, r * run_length + i);
    }
  }
  return v;
}

TEST(SortRunsTest, HandCases) {
  std::vector<int> empty;
  SortRuns(empty, std::less<int>());
  EXPECT_TRUE(empty.empty());

  std::vector<int> sorted = {1, 2, 2, 3};
  SortRuns(sorted, std::less<int>());
  EXPECT_EQ(sorted, (std::vector<int>{1, 2, 2, 3}));

  std::vector<int> three_runs = {5, 6, 7, 1, 2, 3, 0, 9};  // an odd run waits a level
  SortRuns(three_runs, std::less<int>());
  EXPECT_EQ(three_runs, (std::vector<int>{0, 1, 2, 3, 5, 6, 7, 9}));

  std::vector<int> descending = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};  // no runs: std::sort
  SortRuns(descending, std::less<int>());
  EXPECT_EQ(descending, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(SortRunsTest, EqualsSortForAnyNumberOfRuns) {
  std::mt19937 random(7);
  for (int runs : {1, 2, 3, 4, 5, 7, 8, 31, 32, 33, 200}) {
    for (int run_length : {1, 2, 31, 32, 33, 500}) {
      std::vector<Pair> v = Runs(runs, run_length, random);
      std::vector<Pair> expected = v;
      std::stable_sort(expected.begin(), expected.end(), KeyLess);
      SortRuns(v, KeyLess);
      std::vector<int> keys, expected_keys;
      for (const Pair& p : v) keys.push_back(p.first);
      for (const Pair& p : expected) expected_keys.push_back(p.first);
      ASSERT_EQ(keys, expected_keys) << runs << " runs of " << run_length;
      // A permutation: nothing lost, nothing doubled.
      std::sort(v.begin(), v.end());
      std::sort(expected.begin(), expected.end());
      ASSERT_EQ(v, expected) << runs << " runs of " << run_length;
    }
  }
}

}  // namespace
}  // namespace podscope::analysis
