#include "coordinator/clock/clock_fit.h"

#include <gtest/gtest.h>

#include <vector>

#include "coordinator/clock/clock_aligner.h"

namespace podscope::coordinator {
namespace {

constexpr TimeNs kBase = 1'795'000'000'000'000'000;

// One exchange against an agent whose clock reads `agent_offset` ahead of the coordinator, with
// the given one-way delays (ns) and `work` ns spent in the coordinator.
ClockSample Exchange(TimeNs coordinator_t1, int64_t agent_offset, int64_t up, int64_t down,
                     int64_t work = 1'000) {
  ClockSample s;
  s.t1 = coordinator_t1 + agent_offset;
  s.t2 = coordinator_t1 + up;
  s.t3 = s.t2 + work;
  s.t4 = s.t3 + down + agent_offset;
  return s;
}

TEST(ClockFitTest, SymmetricExchangeGivesTheExactOffsetAndHalfTheRoundTrip) {
  const ClockSample s = Exchange(kBase, 5'000'000, 40'000, 40'000);
  EXPECT_EQ(s.Offset(), -5'000'000);
  EXPECT_EQ(s.Delay(), 80'000);
  const std::vector<ClockSample> samples = {s};
  absl::StatusOr<ClockFit> fit = FitClock(samples);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->method, ClockFitMethod::kFeasibleLines);
  EXPECT_EQ(fit->model.offset_ns, -5'000'000);
  EXPECT_EQ(fit->model.drift_ppb, 0);
  EXPECT_FALSE(fit->drift_fitted);
  // Half the round trip, plus what +-100 ppm allows over the 41 us between midpoint and ends.
  EXPECT_GE(fit->model.error_bound_ns, 40'000);
  EXPECT_LE(fit->model.error_bound_ns, 40'010);
  EXPECT_EQ(fit->model.source, common::ClockSource::kNetwork);
  // Least squares agrees on a lone exchange.
  absl::StatusOr<ClockFit> ls = FitLeastSquares(samples);
  ASSERT_TRUE(ls.ok());
  EXPECT_EQ(ls->method, ClockFitMethod::kLeastSquares);
  EXPECT_EQ(ls->model.offset_ns, -5'000'000);
  EXPECT_EQ(ls->model.error_bound_ns, 40'000);
}

TEST(ClockFitTest, EachDirectionIsBoundedByItsFastestExchange) {
  // Jitter spared the request of one exchange and the reply of the other: neither exchange
  // is good on its own (round trips of 910 and 510 us), but together they pin the offset to
  // +-10 us. Least squares over the same two is 80 us off.
  const int64_t offset = 2'000'000;
  const std::vector<ClockSample> samples = {Exchange(kBase, offset, 10'000, 900'000),
                                            Exchange(kBase + 3'000'000, offset, 500'000, 10'000)};
  absl::StatusOr<ClockFit> fit = FitClock(samples);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->method, ClockFitMethod::kFeasibleLines);
  EXPECT_NEAR(fit->model.offset_ns, -offset, 1'000);
  EXPECT_LE(fit->model.error_bound_ns, 10'000 + 1'000);
  const TimeNs agent_now = kBase + 3'000'000 + offset;
  EXPECT_LE(std::llabs(fit->model.ToAligned(agent_now) - kBase - 3'000'000),
            fit->ErrorBoundAt(agent_now));
  absl::StatusOr<ClockFit> ls = FitLeastSquares(samples);
  ASSERT_TRUE(ls.ok());
  EXPECT_GT(std::llabs(ls->model.offset_ns + offset), 50'000);
}

TEST(ClockFitTest, FeasibleLinesFitTheDriftAndBoundItExactly) {
  // The agent's clock runs 50 ppm fast; four bursts 2 s apart, each with one fast symmetric
  // exchange (20 us each way) and one slower.
  std::vector<ClockSample> samples;
  for (int burst = 0; burst < 4; ++burst) {
    const TimeNs t = kBase + burst * 2'000'000'000LL;
    const int64_t offset = 3'000'000 + (t - kBase) / 1'000'000 * 50;
    samples.push_back(Exchange(t, offset, 20'000, 20'000));
    samples.push_back(Exchange(t + 1'000'000, offset + 50, 60'000, 20'000));
  }
  absl::StatusOr<ClockFit> fit = FitClock(samples);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->method, ClockFitMethod::kFeasibleLines);
  EXPECT_TRUE(fit->drift_fitted);
  EXPECT_NEAR(fit->model.drift_ppb, -50'000, 50);
  const TimeNs mid = kBase + 3'000'000'000LL;
  const TimeNs agent_at_mid = mid + 3'000'000 + 3'000 * 50;
  EXPECT_NEAR(fit->model.ToAligned(agent_at_mid), mid, 500);
  // The steepest allowed lines pass +20 us at the first burst and -20 us at the last: 40 us
  // over 6 s is 6.67 ppm either way. Between the bursts no line strays beyond 20 us; 10 s
  // past the last, the steepest is 20 + 66.7 us away.
  EXPECT_NEAR(fit->drift_tolerance_ppb, 6'667, 30);
  EXPECT_NEAR(fit->model.error_bound_ns, 20'000, 200);
  EXPECT_NEAR(fit->ErrorBoundAt(agent_at_mid), 20'000, 200);
  EXPECT_NEAR(fit->ErrorBoundAt(fit->last_ns + 10'000'000'000LL), 20'000 + 66'667, 500);
}

TEST(ClockFitTest, AClockThatSteppedFallsBackToLeastSquares) {
  // Tight exchanges 1 s apart whose offsets differ by 1 ms: no line within 100 ppm fits both.
  const std::vector<ClockSample> samples = {
      Exchange(kBase, 0, 10'000, 10'000),
      Exchange(kBase + 1'000'000'000, 1'000'000, 10'000, 10'000)};
  EXPECT_EQ(FitFeasibleLines(samples).status().code(), absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<ClockFit> fit = FitClock(samples);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->method, ClockFitMethod::kLeastSquares);
  EXPECT_FALSE(fit->anchors.empty());
}

TEST(LeastSquaresFitTest, MinimumDelaySampleOfABurstWins) {
  // Queueing on the way up skews the slow samples; the fastest one is exact.
  std::vector<ClockSample> burst = {Exchange(kBase, 1'000'000, 900'000, 30'000),
                                    Exchange(kBase + 2'000'000, 1'000'000, 25'000, 25'000),
                                    Exchange(kBase + 4'000'000, 1'000'000, 30'000, 700'000)};
  absl::StatusOr<ClockFit> fit = FitLeastSquares(burst);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->model.offset_ns, -1'000'000);
  EXPECT_EQ(fit->model.error_bound_ns, 25'000);
}

TEST(LeastSquaresFitTest, FastExchangesOutweighQueuedOnes) {
  // Two bursts far apart; in the second every exchange queued 2 ms on the way up.
  std::vector<ClockSample> samples = {Exchange(kBase, 4'000, 10'000, 10'000),
                                      Exchange(kBase + 100'000'000, 4'000, 2'000'000, 10'000)};
  absl::StatusOr<ClockFit> fit = FitLeastSquares(samples, {.burst_gap_ns = 50'000'000});
  ASSERT_TRUE(fit.ok());
  // Weights (20 us + 1 us)^-2 against (2.01 ms + 1 us)^-2: the fast one dominates.
  EXPECT_NEAR(fit->model.offset_ns, -4'000, 200);
  // The honest bound comes from the fast exchange, 100 ms away at 100 ppm.
  EXPECT_NEAR(fit->ErrorBoundAt(kBase + 4'000), 10'000, 300);
}

TEST(LeastSquaresFitTest, DriftIsFittedAcrossBurstsAndPredictsBetweenThem) {
  // The agent's clock runs 50 ppm fast: its offset grows 50 us per second.
  std::vector<ClockSample> samples;
  for (int burst = 0; burst < 4; ++burst) {
    const TimeNs t = kBase + burst * 2'000'000'000LL;
    const int64_t offset = 3'000'000 + (t - kBase) / 1'000'000 * 50;
    samples.push_back(Exchange(t, offset, 20'000, 20'000));
    samples.push_back(
        Exchange(t + 1'000'000, offset + 50, 60'000, 20'000));  // slower, filtered out
  }
  absl::StatusOr<ClockFit> fit = FitLeastSquares(samples);
  ASSERT_TRUE(fit.ok());
  EXPECT_TRUE(fit->drift_fitted);
  // aligned = agent + offset + drift term: drift is the coordinator-minus-agent slope.
  EXPECT_NEAR(fit->model.drift_ppb, -50'000, 20);
  const TimeNs mid = kBase + 3'000'000'000LL;
  const TimeNs agent_at_mid = mid + 3'000'000 + 3'000 * 50;
  EXPECT_NEAR(fit->model.ToAligned(agent_at_mid), mid, 200);
  EXPECT_LE(fit->model.error_bound_ns, 20'000 + 200);
  // The drift is trusted to what the farthest anchors allow: 2 x 20 us over 6 s = 6.67 ppm.
  // The bound grows with the distance to the nearest exchange: 1 s at the middle, 10 s past
  // the end.
  EXPECT_NEAR(fit->drift_tolerance_ppb, 6'667, 2);
  EXPECT_NEAR(fit->ErrorBoundAt(agent_at_mid), 20'000 + 6'667, 30);
  EXPECT_NEAR(fit->ErrorBoundAt(fit->last_ns + 10'000'000'000LL), 20'000 + 66'670, 40);
}

TEST(LeastSquaresFitTest, ShortSpanTakesNoDrift) {
  std::vector<ClockSample> samples = {Exchange(kBase, 7'000, 10'000, 10'000),
                                      Exchange(kBase + 300'000'000, 9'000, 10'000, 10'000)};
  absl::StatusOr<ClockFit> fit = FitLeastSquares(samples);
  ASSERT_TRUE(fit.ok());
  EXPECT_FALSE(fit->drift_fitted);
  EXPECT_EQ(fit->model.drift_ppb, 0);
  EXPECT_EQ(fit->model.offset_ns, -8'000);  // equally good exchanges: their mean
  // Each anchor is within 10 us + 1 us residual; 300 ms apart they pin the drift error to
  // 22 us / 0.3 s = 73.3 ppm, tighter than crystal tolerance.
  EXPECT_EQ(fit->model.error_bound_ns, 11'000);
  EXPECT_NEAR(fit->ErrorBoundAt(fit->last_ns + 1'000'000'000), 11'000 + 73'334, 2);
}

TEST(ClockFitTest, BrokenSamplesAreRejected) {
  ClockSample backwards = Exchange(kBase, 0, 10'000, 10'000);
  backwards.t4 = backwards.t1 - 1;
  ClockSample reply_before_request = Exchange(kBase, 0, 10'000, 10'000);
  reply_before_request.t3 = reply_before_request.t2 - 5;
  const std::vector<ClockSample> samples = {backwards, reply_before_request};
  EXPECT_EQ(FitClock(samples).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FitClock({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FitFeasibleLines(samples).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FitLeastSquares(samples).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ClockAlignerTest, KeepsABoundedWindowPerAgent) {
  ClockAligner aligner({.max_samples_per_agent = 4});
  EXPECT_EQ(aligner.Model("a").status().code(), absl::StatusCode::kFailedPrecondition);
  std::vector<ClockSample> samples;
  for (int i = 0; i < 10; ++i)
    samples.push_back(Exchange(kBase + i * 1'000'000, i < 6 ? 111 : 222, 10'000, 10'000));
  aligner.AddSamples("a", samples);
  EXPECT_EQ(aligner.SampleCount("a"), 4u);
  ASSERT_TRUE(aligner.Model("a").ok());
  EXPECT_NEAR(aligner.Model("a")->offset_ns, -222, 1);  // only the newest four remain
  // The cached fit gives way to newer samples.
  std::vector<ClockSample> later;
  for (int i = 0; i < 4; ++i)
    later.push_back(Exchange(kBase + (20 + i) * 1'000'000, 333, 10'000, 10'000));
  aligner.AddSamples("a", later);
  EXPECT_NEAR(aligner.Model("a")->offset_ns, -333, 1);
  aligner.Forget("a");
  EXPECT_EQ(aligner.SampleCount("a"), 0u);
}

}  // namespace
}  // namespace podscope::coordinator
