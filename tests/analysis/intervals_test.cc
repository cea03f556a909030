#include "analysis/intervals.h"

#include <gtest/gtest.h>

namespace podscope::analysis {
namespace {

TEST(IntervalsTest, NormalizeSortsMergesTouchingAndDropsEmpty) {
  IntervalSet s = {{10, 20}, {0, 5}, {5, 7}, {30, 30}, {15, 25}, {40, 39}};
  Normalize(&s);
  EXPECT_EQ(s, (IntervalSet{{0, 7}, {10, 25}}));
  EXPECT_EQ(TotalLength(s), 22);
}

TEST(IntervalsTest, IntersectionSubtractionAndClip) {
  const IntervalSet a = {{0, 10}, {20, 30}, {40, 50}};
  const IntervalSet b = {{5, 25}, {28, 45}};
  EXPECT_EQ(Intersect(a, b), (IntervalSet{{5, 10}, {20, 25}, {28, 30}, {40, 45}}));
  EXPECT_EQ(IntersectionLength(a, b), 5 + 5 + 2 + 5);
  EXPECT_EQ(Subtract(a, b), (IntervalSet{{0, 5}, {25, 28}, {45, 50}}));
  EXPECT_EQ(Subtract(b, a), (IntervalSet{{10, 20}, {30, 40}}));
  EXPECT_EQ(Clip(a, 5, 45), (IntervalSet{{5, 10}, {20, 30}, {40, 45}}));
  EXPECT_EQ(Clip(a, 10, 20), IntervalSet{});
}

TEST(IntervalsTest, SweepVisitsEveryInstantExactlyOnce) {
  const IntervalSet compute = {{0, 10}, {20, 30}};
  const IntervalSet comm = {{5, 25}};
  std::vector<std::tuple<TimeNs, TimeNs, uint32_t>> segments;
  SweepClasses({&compute, &comm}, -5, 35,
               [&](TimeNs s, TimeNs e, uint32_t mask) { segments.emplace_back(s, e, mask); });
  const std::vector<std::tuple<TimeNs, TimeNs, uint32_t>> expected = {
      {-5, 0, 0}, {0, 5, 1}, {5, 10, 3}, {10, 20, 2}, {20, 25, 3}, {25, 30, 1}, {30, 35, 0}};
  EXPECT_EQ(segments, expected);
}

TEST(IntervalsTest, SweepStartingInsideIntervals) {
  const IntervalSet a = {{0, 100}};
  TimeNs covered = 0;
  SweepClasses({&a}, 40, 60, [&](TimeNs s, TimeNs e, uint32_t mask) {
    EXPECT_EQ(mask, 1u);
    covered += e - s;
  });
  EXPECT_EQ(covered, 20);
}

}  // namespace
}  // namespace podscope::analysis
