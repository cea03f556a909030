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

// When the unauthenticated share is full, the address holding the most of it gives up its
// oldest: a flood from a few addresses pushes out its own connections, never a client's one
// connection in the middle of its handshake. An address at its own share is refused outright.
TEST(ConnectionLimitsTest, StalledConnectionsMakeRoomFromTheMostCrowdedAddressOldestFirst) {
  Admitter a({.max_total = 8,
              .max_per_client = 8,
              .max_unauthenticated = 4,
              .max_unauthenticated_per_client = 3});
  const uint64_t client = a.Admit("10.0.0.9");  // a real client, its handshake under way
  const uint64_t a1 = a.Admit("10.0.0.1"), a2 = a.Admit("10.0.0.1"), a3 = a.Admit("10.0.0.1");
  a.Admit("10.0.0.1", Verdict::kClientFull);
  EXPECT_TRUE(a.evicted.empty());
  const uint64_t b1 = a.Admit("10.0.0.2");
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{a1}));
  const uint64_t b2 = a.Admit("10.0.0.2");
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{a1, a2}));
  // Now 10.0.0.2 holds two: its own oldest goes.
  const uint64_t b3 = a.Admit("10.0.0.2");
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{a1, a2, b1}));
  EXPECT_EQ(a.limits.unauthenticated(), 4u);
  EXPECT_EQ(a.limits.open_for("10.0.0.9"), 1u) << "the real client kept its connection";
  a.limits.Authenticated(client);
  // Authenticated, it is out of the share. 10.0.0.2 holds the most again (b2, b3): b2 goes.
  a.Admit("10.0.0.3");
  a.Admit("10.0.0.4");
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{a1, a2, b1, b2}));
  (void)b3;
  // The evicted connections' sessions end and release: nothing changes twice; authenticated
  // after being evicted is ignored (it is on its way out).
  for (uint64_t id : {a1, a2, b1, b2}) a.limits.Release(id);
  a.limits.Authenticated(a1);
  EXPECT_EQ(a.limits.open(), 5u);  // client, a3, b3 and the two last
  EXPECT_EQ(a.limits.unauthenticated(), 4u);
  EXPECT_EQ(a.limits.evicted(), 4u);
  EXPECT_EQ(a.limits.open_for("10.0.0.1"), 1u);
  a.limits.Release(a3);
  EXPECT_EQ(a.limits.open_for("10.0.0.1"), 0u);
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
