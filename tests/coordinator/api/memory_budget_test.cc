// Heavy reports share a memory budget: they run together while their estimates fit, wait in
// arrival order when they do not, and are refused when too many wait, through the REST handler
// itself (a 503 with Retry-After). Waits are on conditions, never on time.
#include "coordinator/api/memory_budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>

#include "tests/coordinator/api/rest_api_fixture.h"
#include "tests/wait_for.h"

namespace podscope::coordinator {
namespace {

TEST(MemoryBudgetTest, WhatFitsRunsTogetherTheRestWaitsInTurnAndTooManyAreRefused) {
  MemoryBudget budget(100, /*max_waiting=*/1);
  std::optional<MemoryBudget::Grant> a(*budget.Acquire(60));
  std::optional<MemoryBudget::Grant> b(*budget.Acquire(40));  // fits beside a
  EXPECT_EQ(budget.held(), 100u);
  std::atomic<bool> c_running = false;
  std::thread c([&] {
    absl::StatusOr<MemoryBudget::Grant> grant = budget.Acquire(50);
    ASSERT_TRUE(grant.ok()) << grant.status();
    c_running = true;
  });
  ASSERT_TRUE(podscope::testing::WaitFor([&] { return budget.waiting() == 1; }));
  // The queue is full: the next is refused at once, even one small enough to fit later.
  const absl::StatusOr<MemoryBudget::Grant> refused = budget.Acquire(1);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("1 more wait"), std::string_view::npos)
      << refused.status();
  b.reset();  // 40 free: not enough for c's 50
  EXPECT_FALSE(c_running);
  EXPECT_EQ(budget.held(), 60u);
  a.reset();
  c.join();
  EXPECT_TRUE(c_running);
  EXPECT_EQ(budget.held(), 0u);  // c's grant ended with its thread
  EXPECT_EQ(budget.waiting(), 0u);
}

TEST(MemoryBudgetTest, OneLargerThanTheBudgetRunsAloneAndNoneOvertakesIt) {
  MemoryBudget budget(100, /*max_waiting=*/4);
  std::optional<MemoryBudget::Grant> small(*budget.Acquire(10));
  std::atomic<int> order = 0;
  int huge_at = 0, later_at = 0;
  std::thread huge([&] {
    absl::StatusOr<MemoryBudget::Grant> grant = budget.Acquire(1'000);
    ASSERT_TRUE(grant.ok());
    EXPECT_EQ(grant->bytes(), 100u);  // the whole budget, no more
    EXPECT_EQ(budget.held(), 100u);
    huge_at = ++order;
  });
  ASSERT_TRUE(podscope::testing::WaitFor([&] { return budget.waiting() == 1; }));
  // A small one that would fit now waits behind the large one rather than overtaking it.
  std::thread later([&] {
    absl::StatusOr<MemoryBudget::Grant> grant = budget.Acquire(5);
    ASSERT_TRUE(grant.ok());
    later_at = ++order;
  });
  ASSERT_TRUE(podscope::testing::WaitFor([&] { return budget.waiting() == 2; }));
  EXPECT_EQ(order, 0);
  small.reset();
  huge.join();
  later.join();
  EXPECT_EQ(huge_at, 1);
  EXPECT_EQ(later_at, 2);
}

// Through the handler: a report waits while the budget is held, the next is a 503 with
// Retry-After, and both answer once it is free.
TEST(MemoryBudgetTest, AReportWaitsForTheBudgetAndTheNextBeyondTheQueueIs503) {
  ApiLimits limits;
  limits.analysis_memory_budget_bytes = 64 << 20;
  limits.max_queued_analyses = 1;
  podscope::testing::RestApiFixture fixture(limits);
  fixture.Put(fixture.SampleRecord("c"));
  RestApi& api = fixture.api();
  auto report = [&](const std::string& name) { return fixture.Get("/v1/captures/c/" + name); };

  std::optional<MemoryBudget::Grant> everything(*api.memory_budget().Acquire(64 << 20));
  std::optional<http::HttpResponse> waited;
  std::thread first([&] { waited = report("steps"); });
  ASSERT_TRUE(podscope::testing::WaitFor([&] { return api.memory_budget().waiting() == 1; }));
  const http::HttpResponse busy = report("summary");
  EXPECT_EQ(busy.status, 503) << busy.body;
  EXPECT_NE(busy.body.find("memory budget (64 MiB)"), std::string::npos) << busy.body;
  bool retry_after = false;
  for (const auto& [key, value] : busy.headers) retry_after |= key == "Retry-After" && value == "5";
  EXPECT_TRUE(retry_after);
  // Reports computed worker by worker take their budget too (one worker's worth).
  EXPECT_EQ(report("kernels").status, 503);
  everything.reset();
  first.join();
  ASSERT_TRUE(waited.has_value());
  EXPECT_EQ(waited->status, 200) << waited->body;
  EXPECT_EQ(report("summary").status, 200);
  EXPECT_EQ(report("kernels").status, 200);
  EXPECT_EQ(api.memory_budget().held(), 0u);
}

}  // namespace
}  // namespace podscope::coordinator
