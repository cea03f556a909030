#include "agent/start_timer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "tests/wait_for.h"

namespace podscope::agent {
namespace {

using common::SimulatedTimeSource;
using common::TimeNs;
using testing::WaitFor;

constexpr int64_t kMs = 1'000'000;
constexpr TimeNs kStart = 1'800'000'000'000'000'000;

struct Fired {
  absl::Mutex mu;
  std::vector<std::pair<int, TimeNs>> at ABSL_GUARDED_BY(mu);
  size_t Count() {
    absl::MutexLock lock(&mu);
    return at.size();
  }
};

TEST(StartTimerTest, FiresInTimeOrderAtEachInstantAndNotBefore) {
  SimulatedTimeSource time(kStart);
  StartTimer timer(time);
  Fired fired;
  for (int k : {3, 1, 2}) {
    timer.Schedule(kStart + k * 20 * kMs, [&, k] {
      absl::MutexLock lock(&fired.mu);
      fired.at.emplace_back(k, time.Now());
    });
  }
  for (int k = 1; k <= 3; ++k) {
    time.AdvanceTo(kStart + k * 20 * kMs - 1);
    // One nanosecond early nothing more can fire: the timer reads only the simulated clock.
    EXPECT_EQ(fired.Count(), static_cast<size_t>(k - 1));
    time.AdvanceTo(kStart + k * 20 * kMs);
    ASSERT_TRUE(WaitFor([&] { return fired.Count() == static_cast<size_t>(k); }));
  }
  absl::MutexLock lock(&fired.mu);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(fired.at[i].first, i + 1);
    EXPECT_EQ(fired.at[i].second, kStart + (i + 1) * 20 * kMs);
  }
}

TEST(StartTimerTest, AnEarlierEntryInterruptsTheWaitForALaterOne) {
  SimulatedTimeSource time(kStart);
  StartTimer timer(time);
  std::atomic<int> late{0}, early{0};
  timer.Schedule(kStart + 1'000 * kMs, [&] { ++late; });
  timer.Schedule(kStart + 10 * kMs, [&] { ++early; });
  time.AdvanceTo(kStart + 10 * kMs);
  ASSERT_TRUE(WaitFor([&] { return early == 1; }));
  EXPECT_EQ(late, 0);
}

TEST(StartTimerTest, APastInstantFiresAtOnceAndACancelledOneNever) {
  SimulatedTimeSource time(kStart);
  StartTimer timer(time);
  std::atomic<int> past{0}, cancelled{0};
  const StartTimer::Id doomed = timer.Schedule(kStart + 50 * kMs, [&] { ++cancelled; });
  timer.Schedule(kStart - 10 * kMs, [&] { ++past; });
  EXPECT_TRUE(timer.Cancel(doomed));
  ASSERT_TRUE(WaitFor([&] { return past == 1; }));
  // Past the cancelled instant, with a later entry as a marker: once the marker has fired,
  // the timer has been through the cancelled one's instant.
  std::atomic<int> marker{0};
  timer.Schedule(kStart + 60 * kMs, [&] { ++marker; });
  time.AdvanceTo(kStart + 60 * kMs);
  ASSERT_TRUE(WaitFor([&] { return marker == 1; }));
  EXPECT_EQ(past, 1);
  EXPECT_EQ(cancelled, 0);
  EXPECT_FALSE(timer.Cancel(doomed));
}

TEST(StartTimerTest, CancellingAFiringCallbackWaitsForItToReturn) {
  SimulatedTimeSource time(kStart);
  StartTimer timer(time);
  absl::Notification entered, release;
  std::atomic<bool> returned{false};
  const StartTimer::Id id = timer.Schedule(kStart, [&] {
    entered.Notify();
    release.WaitForNotification();
    returned = true;
  });
  entered.WaitForNotification();
  std::thread canceller([&] {
    EXPECT_FALSE(timer.Cancel(id));
    EXPECT_TRUE(returned);  // Cancel came back only after the callback did
  });
  release.Notify();
  canceller.join();
}

TEST(StartTimerTest, OnTheRealClockAStartFiresNoEarlierThanItsInstant) {
  StartTimer timer;
  std::atomic<TimeNs> fired_at{0};
  const TimeNs at = common::HostNowNs() + 20 * kMs;
  timer.Schedule(at, [&] { fired_at = common::HostNowNs(); });
  ASSERT_TRUE(WaitFor([&] { return fired_at != 0; }));
  EXPECT_GE(fired_at, at);
}

}  // namespace
}  // namespace podscope::agent
