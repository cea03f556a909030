// Report requests that behave: identical ones in flight are computed once and share the answer,
// and a coordinator that is stopping ends the reports it computes, and refuses new ones, with a
// 503 that says so. The memory budget, held by the test, keeps a report waiting at a known point.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "coordinator/api/shared_work.h"
#include "tests/coordinator/api/rest_api_fixture.h"
#include "tests/wait_for.h"

namespace podscope::coordinator {
namespace {

using podscope::testing::WaitFor;

// Joins its threads however the test leaves (a failed ASSERT too).
struct Joined {
  std::vector<std::thread> threads;
  ~Joined() {
    for (std::thread& t : threads)
      if (t.joinable()) t.join();
  }
};

TEST(SharedWorkTest, ACallerArrivingWhileTheFirstComputesGetsItsAnswer) {
  SharedWork<int> work;
  absl::Notification release;
  std::atomic<int> computed{0};
  SharedWork<int>::Outcome first, second;
  {
    Joined joined;
    joined.threads.emplace_back([&] {
      first = work.Run("k", [&] {
        ++computed;
        release.WaitForNotification();
        return 7;
      });
    });
    EXPECT_TRUE(WaitFor([&] { return computed == 1; }));
    joined.threads.emplace_back([&] { second = work.Run("k", [&] { return ++computed, 8; }); });
    EXPECT_TRUE(WaitFor([&] { return work.waiting() == 1; }));
    release.Notify();
  }
  EXPECT_EQ(computed, 1);
  EXPECT_EQ(first.value, 7);
  EXPECT_FALSE(first.shared);
  EXPECT_EQ(second.value, 7);
  EXPECT_TRUE(second.shared);
  // Once answered, the key computes afresh; another key never waits for it.
  EXPECT_EQ(work.Run("k", [] { return 9; }).value, 9);
  EXPECT_FALSE(work.Run("other", [] { return 1; }).shared);
  EXPECT_EQ(work.waiting(), 0u);
}

// The computation is abandoned only once its own caller and every caller waiting for it have
// gone; a waiter that cannot tell (no `gone`) keeps it wanted.
TEST(SharedWorkTest, AComputationIsAbandonedOnlyWhenEveryCallerHasGone) {
  SharedWork<int> work;
  std::atomic<bool> owner_gone{false}, waiter_gone{false};
  std::atomic<const std::function<bool()>*> abandoned{nullptr};
  absl::Notification release;
  {
    Joined joined;
    joined.threads.emplace_back([&] {
      work.Run(
          "k",
          [&](const std::function<bool()>& is_abandoned) {
            abandoned = &is_abandoned;
            release.WaitForNotification();
            return 1;
          },
          [&] { return owner_gone.load(); });
    });
    ASSERT_TRUE(WaitFor([&] { return abandoned.load() != nullptr; }));
    const std::function<bool()>& is_abandoned = *abandoned.load();
    EXPECT_FALSE(is_abandoned());
    owner_gone = true;
    EXPECT_TRUE(is_abandoned());  // alone, its caller gone
    joined.threads.emplace_back([&] {
      work.Run(
          "k", [](const std::function<bool()>&) { return 2; }, [&] { return waiter_gone.load(); });
    });
    ASSERT_TRUE(WaitFor([&] { return work.waiting() == 1; }));
    EXPECT_FALSE(is_abandoned());  // someone is still waiting for it
    joined.threads.emplace_back([&] { work.Run("k", [] { return 3; }); });
    ASSERT_TRUE(WaitFor([&] { return work.waiting() == 2; }));
    waiter_gone = true;
    EXPECT_FALSE(is_abandoned());  // the waiter with no way to go still wants it
    release.Notify();
  }
  EXPECT_EQ(work.waiting(), 0u);
}

TEST(SharedWorkTest, AComputationThatThrowsEndsEveryCallerAndFreesItsKey) {
  SharedWork<int> work;
  absl::Notification release;
  std::atomic<bool> started{false};
  std::atomic<int> threw{0};
  {
    Joined joined;
    joined.threads.emplace_back([&] {
      try {
        work.Run("k", [&]() -> int {
          started = true;
          release.WaitForNotification();
          throw std::runtime_error("out of memory");
        });
      } catch (const std::runtime_error&) {
        ++threw;
      }
    });
    EXPECT_TRUE(WaitFor([&] { return started.load(); }));
    joined.threads.emplace_back([&] {
      try {
        work.Run("k", [] { return 1; });
      } catch (const std::runtime_error&) {
        ++threw;
      }
    });
    EXPECT_TRUE(WaitFor([&] { return work.waiting() == 1; }));
    release.Notify();
  }
  EXPECT_EQ(threw, 2);
  EXPECT_EQ(work.Run("k", [] { return 3; }).value, 3);
}

std::string CacheHeader(const http::HttpResponse& r) {
  for (const auto& [name, value] : r.headers)
    if (name == "X-Podscope-Cache") return value;
  return "";
}

// The whole memory budget, held by the test: a report then waits for it inside its computation.
std::optional<MemoryBudget::Grant> HoldWholeBudget(podscope::testing::RestApiFixture& fixture) {
  absl::StatusOr<MemoryBudget::Grant> held =
      fixture.api().memory_budget().Acquire(fixture.api().memory_budget().budget());
  if (!held.ok()) return std::nullopt;
  return std::optional<MemoryBudget::Grant>(std::move(*held));
}

TEST(ReportRequestsTest, TwoIdenticalRequestsInFlightComputeOnce) {
  podscope::testing::RestApiFixture fixture;
  fixture.Put(fixture.SampleRecord("c"));
  // The whole budget held: the first request waits for it inside its computation.
  std::optional<MemoryBudget::Grant> grant = HoldWholeBudget(fixture);
  ASSERT_TRUE(grant.has_value());
  http::HttpResponse first, second, other;
  {
    Joined joined;
    joined.threads.emplace_back([&] { first = fixture.Get("/v1/captures/c/summary"); });
    EXPECT_TRUE(WaitFor([&] { return fixture.api().memory_budget().waiting() == 1; }));
    joined.threads.emplace_back([&] { second = fixture.Get("/v1/captures/c/summary"); });
    // The identical request waits for the first's answer, not for the budget.
    EXPECT_TRUE(WaitFor([&] { return fixture.api().reports_waiting() == 1; }));
    EXPECT_EQ(fixture.api().memory_budget().waiting(), 1u);
    grant.reset();
  }
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(first.body, second.body);
  EXPECT_EQ(CacheHeader(first), "miss");
  EXPECT_EQ(CacheHeader(second), "shared");
  EXPECT_EQ(fixture.api().reports_computed(), 1u);
  EXPECT_EQ(fixture.api().reports_shared(), 1u);
  // A different report of the same capture is its own computation.
  other = fixture.Get("/v1/captures/c/summary", {{"format", "table"}});
  EXPECT_EQ(other.status, 200);
  EXPECT_EQ(fixture.api().reports_computed(), 2u);
  // And the same one again comes from the cache.
  EXPECT_EQ(fixture.Get("/v1/captures/c/summary").body, first.body);
  EXPECT_EQ(fixture.api().reports_computed(), 2u);
}

TEST(ReportRequestsTest, AStoppingCoordinatorEndsItsReportsWith503) {
  podscope::testing::RestApiFixture fixture;
  fixture.Put(fixture.SampleRecord("c"));
  std::optional<MemoryBudget::Grant> grant = HoldWholeBudget(fixture);
  ASSERT_TRUE(grant.has_value());
  http::HttpResponse running;
  {
    Joined joined;
    joined.threads.emplace_back([&] { running = fixture.Get("/v1/captures/c/stragglers"); });
    EXPECT_TRUE(WaitFor([&] { return fixture.api().memory_budget().waiting() == 1; }));
    fixture.api().CancelAnalyses();
    grant.reset();
  }
  EXPECT_EQ(running.status, 503) << running.body;
  EXPECT_NE(running.body.find("the coordinator is stopping"), std::string::npos) << running.body;
  const http::HttpResponse later = fixture.Get("/v1/captures/c/summary");
  EXPECT_EQ(later.status, 503);
  bool retry_after = false;
  for (const auto& [name, value] : later.headers) retry_after |= name == "Retry-After";
  EXPECT_TRUE(retry_after);
  EXPECT_EQ(fixture.api().reports_computed(), 2u);
}

}  // namespace
}  // namespace podscope::coordinator
