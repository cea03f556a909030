#include "common/clock_model.h"

#include <gtest/gtest.h>

namespace podscope::common {
namespace {

TEST(ClockModelTest, IdentityByDefault) {
  ClockModel clock;
  EXPECT_TRUE(clock.IsIdentity());
  EXPECT_EQ(clock.ToAligned(1'682'725'898'236'567'123), 1'682'725'898'236'567'123);
}

TEST(ClockModelTest, OffsetAndDriftAroundTheReference) {
  // 2 ms ahead at the reference instant, running 1 ppm (1000 ppb) fast.
  ClockModel clock{
      .offset_ns = -2'000'000, .drift_ppb = 1000, .reference_ns = 10 * kNanosPerSecond};
  EXPECT_EQ(clock.ToAligned(10 * kNanosPerSecond), 10 * kNanosPerSecond - 2'000'000);
  // One second after the reference the drift adds 1 us.
  EXPECT_EQ(clock.ToAligned(11 * kNanosPerSecond), 11 * kNanosPerSecond - 2'000'000 + 1'000);
  // One second before it subtracts 1 us.
  EXPECT_EQ(clock.ToAligned(9 * kNanosPerSecond), 9 * kNanosPerSecond - 2'000'000 - 1'000);
}

TEST(ClockModelTest, LargeDriftOverEpochTimesDoesNotOverflow) {
  ClockModel clock{.offset_ns = 0, .drift_ppb = 50'000'000, .reference_ns = 0};  // 5%
  const TimeNs t = 1'700'000'000 * kNanosPerSecond;
  EXPECT_EQ(clock.ToAligned(t), t + t / 20);
}

}  // namespace
}  // namespace podscope::common

namespace podscope::common {
namespace {

TEST(ClockModelTest, ToLocalInvertsToAlignedToTheNanosecond) {
  const ClockModel clock{
      .offset_ns = 35'000'123, .drift_ppb = -60'000, .reference_ns = 1'795'000'000'000'000'000};
  for (TimeNs local : {TimeNs{1'795'000'000'000'000'000}, TimeNs{1'795'000'123'456'789'000},
                       TimeNs{1'794'999'000'000'000'001}}) {
    EXPECT_EQ(clock.ToLocal(clock.ToAligned(local)), local);
  }
}

}  // namespace
}  // namespace podscope::common
