#include "agent/start_timer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <vector>

namespace podscope::agent {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST(StartTimerTest, FiresInTimeOrderAtOrAfterEachInstant) {
  StartTimer timer;
  std::mutex mu;
  std::vector<std::pair<int, TimeNs>> fired;
  const TimeNs base = HostNowNs();
  for (int k : {3, 1, 2}) {
    timer.Schedule(base + k * 20 * kMs, [&, k] {
      std::lock_guard<std::mutex> lock(mu);
      fired.emplace_back(k, HostNowNs());
    });
  }
  for (int i = 0; i < 200; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (fired.size() == 3) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(fired.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(fired[i].first, i + 1);
    EXPECT_GE(fired[i].second, base + (i + 1) * 20 * kMs);
  }
}

TEST(StartTimerTest, APastInstantFiresAtOnceAndACancelledOneNever) {
  StartTimer timer;
  std::atomic<int> past{0}, cancelled{0};
  const StartTimer::Id doomed = timer.Schedule(HostNowNs() + 50 * kMs, [&] { ++cancelled; });
  timer.Schedule(HostNowNs() - 10 * kMs, [&] { ++past; });
  EXPECT_TRUE(timer.Cancel(doomed));
  for (int i = 0; i < 200 && past == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  EXPECT_EQ(past, 1);
  EXPECT_EQ(cancelled, 0);
}

TEST(StartTimerTest, CancellingAFiringCallbackWaitsForItToReturn) {
  StartTimer timer;
  std::atomic<bool> entered{false}, returned{false};
  const StartTimer::Id id = timer.Schedule(HostNowNs(), [&] {
    entered = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    returned = true;
  });
  while (!entered) std::this_thread::sleep_for(std::chrono::microseconds(100));
  EXPECT_FALSE(timer.Cancel(id));
  EXPECT_TRUE(returned);
}

}  // namespace
}  // namespace podscope::agent
