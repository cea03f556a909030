#include "coordinator/http/connection_limits.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "coordinator/http/progress_deadline.h"

namespace podscope::coordinator {
namespace {

using Verdict = ConnectionLimits::Verdict;

// Admits `client` and returns its id (0 when refused); `evicted` collects the ids dropped.
class Admitter {
 public:
  explicit Admitter(ConnectionBounds bounds) : limits(bounds) {}
  uint64_t Admit(const std::string& client, Verdict expected = Verdict::kAdmitted) {
    auto id = std::make_shared<uint64_t>(0);
    ConnectionLimits::Admission a = limits.TryAdmit(client, [this, id] { evicted.push_back(*id); });
    EXPECT_EQ(a.verdict, expected) << client;
    if (a.evict) a.evict();
    *id = a.id;
    return a.id;
  }
  ConnectionLimits limits;
  std::vector<uint64_t> evicted;
};

TEST(ConnectionLimitsTest, BoundsAllConnectionsAndEachClient) {
  // No unauthenticated share smaller than the whole: authenticated connections fill it.
  Admitter a({.max_total = 3,
              .max_per_client = 2,
              .max_unauthenticated = 3,
              .max_unauthenticated_per_client = 2});
  const uint64_t first = a.Admit("10.0.0.1");
  a.limits.Authenticated(first);
  a.limits.Authenticated(a.Admit("10.0.0.1"));
  a.Admit("10.0.0.1", Verdict::kClientFull);
  a.limits.Authenticated(a.Admit("10.0.0.2"));
  a.Admit("10.0.0.3", Verdict::kServerFull);
  EXPECT_EQ(a.limits.open(), 3u);
  a.limits.Release(first);
  EXPECT_EQ(a.limits.open_for("10.0.0.1"), 1u);
  a.Admit("10.0.0.3");
  // An unknown id changes nothing, released twice neither; a client without a slot has no entry.
  a.limits.Release(9999);
  a.limits.Release(first);
  EXPECT_EQ(a.limits.open(), 3u);
  EXPECT_EQ(a.limits.open_for("10.0.0.9"), 0u);
  EXPECT_TRUE(a.evicted.empty());
}

TEST(ConnectionLimitsTest, StalledConnectionsMakeRoomForNewOnesOldestFirst) {
  Admitter a({.max_total = 6,
              .max_per_client = 4,
              .max_unauthenticated = 3,
              .max_unauthenticated_per_client = 2});
  const uint64_t s1 = a.Admit("10.0.0.1"), s2 = a.Admit("10.0.0.1"), s3 = a.Admit("10.0.0.2");
  EXPECT_EQ(a.limits.unauthenticated(), 3u);
  // The share is full: the next one, from anyone, drops the oldest stalled one.
  const uint64_t legit = a.Admit("10.0.0.3");
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{s1}));
  EXPECT_EQ(a.limits.open_for("10.0.0.1"), 1u);
  a.limits.Authenticated(legit);
  EXPECT_EQ(a.limits.unauthenticated(), 2u);
  // An authenticated connection is never evicted: later arrivals push out s2, then s3.
  const uint64_t s4 = a.Admit("10.0.0.4"), s5 = a.Admit("10.0.0.4");
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{s1, s2}));
  a.Admit("10.0.0.5");
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{s1, s2, s3}));
  // A client's own unauthenticated share refuses outright, evicting no one.
  a.Admit("10.0.0.4", Verdict::kClientFull);
  EXPECT_EQ(a.evicted.size(), 3u);
  // The evicted connections' sessions end and release: nothing changes twice.
  for (uint64_t id : {s1, s2, s3}) a.limits.Release(id);
  EXPECT_EQ(a.limits.open(), 4u);  // legit, s4, s5, the one from 10.0.0.5
  EXPECT_EQ(a.limits.evicted(), 3u);
  // Authenticated after being evicted: ignored (it is on its way out).
  a.limits.Authenticated(s1);
  EXPECT_EQ(a.limits.unauthenticated(), 3u);
  a.limits.Release(s4);
  a.limits.Release(s5);
  EXPECT_EQ(a.limits.open_for("10.0.0.4"), 0u);
}

TEST(ConnectionLimitsTest, AFullServerEvictsAStalledConnectionRatherThanRefuse) {
  Admitter a({.max_total = 3,
              .max_per_client = 3,
              .max_unauthenticated = 3,
              .max_unauthenticated_per_client = 3});
  a.limits.Authenticated(a.Admit("10.0.0.1"));
  a.limits.Authenticated(a.Admit("10.0.0.1"));
  const uint64_t stalled = a.Admit("10.0.0.2");
  const uint64_t newest = a.Admit("10.0.0.3");  // all 3 slots were taken: the stalled one goes
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{stalled}));
  EXPECT_EQ(a.limits.open(), 3u);
  // Only authenticated ones left: a full server refuses.
  a.limits.Authenticated(newest);
  a.Admit("10.0.0.4", Verdict::kServerFull);
  EXPECT_EQ(a.evicted.size(), 1u);
}

TEST(ProgressDeadlineTest, EachIntervalMustBringTheMinimum) {
  using std::chrono::seconds;
  const ProgressDeadline::Clock::time_point t0{};
  ProgressDeadline progress(t0, seconds(10), /*min_bytes=*/1000);
  EXPECT_EQ(progress.deadline(), t0 + seconds(10));
  progress.Add(600, t0 + seconds(3));  // not enough yet: the deadline stands
  EXPECT_EQ(progress.deadline(), t0 + seconds(10));
  progress.Add(400, t0 + seconds(9));  // the minimum, at 9 s: a new interval from there
  EXPECT_EQ(progress.deadline(), t0 + seconds(19));
  progress.Add(1, t0 + seconds(18));  // a trickle does not move it
  EXPECT_EQ(progress.deadline(), t0 + seconds(19));
  progress.Add(5000, t0 + seconds(20));
  EXPECT_EQ(progress.deadline(), t0 + seconds(30));
}

}  // namespace
}  // namespace podscope::coordinator
