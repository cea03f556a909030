#include "http/connection_limits.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "common/time_source.h"
#include "http/progress_deadline.h"

namespace podscope::http {
namespace {

using Verdict = ConnectionLimits::Verdict;
using common::kNanosPerMilli;
using common::kNanosPerSecond;

constexpr common::TimeNs kStart = 1'000 * kNanosPerSecond;

// Admits a client and returns its id (0 when refused); `evicted` collects the ids dropped.
// Time moves only when a test moves `time`.
class Admitter {
 public:
  explicit Admitter(ConnectionBounds bounds) : limits(bounds, time) {}
  uint64_t Admit(const std::string& client, Verdict expected = Verdict::kAdmitted) {
    auto id = std::make_shared<uint64_t>(0);
    ConnectionLimits::Admission a = limits.TryAdmit(client, [this, id] { evicted.push_back(*id); });
    EXPECT_EQ(a.verdict, expected) << client;
    if (a.evict) a.evict();
    *id = a.id;
    return a.id;
  }
  void Advance(common::TimeNs ns) { time.AdvanceBy(ns); }
  common::SimulatedTimeSource time{kStart};
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

// When the unauthenticated share is full, the client holding the most of it gives up its
// oldest: a flood from a few addresses pushes out its own connections, never a client's one
// connection in the middle of its handshake. A client at its own share gives up its own oldest.
TEST(ConnectionLimitsTest, StalledConnectionsMakeRoomFromTheMostCrowdedAddressOldestFirst) {
  Admitter a({.max_total = 8,
              .max_per_client = 8,
              .max_unauthenticated = 4,
              .max_unauthenticated_per_client = 3,
              .min_eviction_age_ms = 0});
  const uint64_t client = a.Admit("10.0.0.9");  // a real client, its handshake under way
  const uint64_t a1 = a.Admit("10.0.0.1"), a2 = a.Admit("10.0.0.1"), a3 = a.Admit("10.0.0.1");
  EXPECT_TRUE(a.evicted.empty());
  const uint64_t a4 = a.Admit("10.0.0.1");  // at its own share: its own oldest goes
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{a1}));
  const uint64_t b1 = a.Admit("10.0.0.2");
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{a1, a2}));
  const uint64_t b2 = a.Admit("10.0.0.2");
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{a1, a2, a3}));
  // Now 10.0.0.2 holds two (b1, b2) and 10.0.0.1 one: b1 goes.
  const uint64_t b3 = a.Admit("10.0.0.2");
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{a1, a2, a3, b1}));
  EXPECT_EQ(a.limits.unauthenticated(), 4u);
  EXPECT_EQ(a.limits.open_for("10.0.0.9"), 1u) << "the real client kept its connection";
  a.limits.Authenticated(client);
  // Authenticated, it is out of the share: a slot is free. Then 10.0.0.2 holds the most (b2,
  // b3): b2 goes.
  a.Admit("10.0.0.3");
  a.Admit("10.0.0.4");
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{a1, a2, a3, b1, b2}));
  (void)b3;
  // The evicted connections' sessions end and release: nothing changes twice; authenticated
  // after being evicted is ignored (it is on its way out).
  for (uint64_t id : {a1, a2, a3, b1, b2}) a.limits.Release(id);
  a.limits.Authenticated(a1);
  EXPECT_EQ(a.limits.open(), 5u);  // client, a4, b3 and the two last
  EXPECT_EQ(a.limits.unauthenticated(), 4u);
  EXPECT_EQ(a.limits.evicted(), 5u);
  EXPECT_EQ(a.limits.open_for("10.0.0.1"), 1u);
  a.limits.Release(a4);
  EXPECT_EQ(a.limits.open_for("10.0.0.1"), 0u);
}

TEST(ConnectionLimitsTest, AFullServerEvictsAStalledConnectionRatherThanRefuse) {
  Admitter a({.max_total = 3,
              .max_per_client = 3,
              .max_unauthenticated = 3,
              .max_unauthenticated_per_client = 3,
              .min_eviction_age_ms = 0});
  a.limits.Authenticated(a.Admit("10.0.0.1"));
  a.limits.Authenticated(a.Admit("10.0.0.1"));
  const uint64_t stalled = a.Admit("10.0.0.2");
  const uint64_t newest = a.Admit("10.0.0.3");  // all 3 slots were taken: the stalled one goes
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{stalled}));
  EXPECT_EQ(a.limits.open(), 3u);
  // Only authenticated ones left, none of them idle: a full server refuses.
  a.limits.Authenticated(newest);
  a.Admit("10.0.0.4", Verdict::kServerFull);
  EXPECT_EQ(a.evicted.size(), 1u);
}

// A flood spread over many addresses, one connection each: a newcomer from an address that has
// not authenticated may drop only a connection that has had the minimum age to authenticate.
// With every one younger, the newcomer is refused instead.
TEST(ConnectionLimitsTest, AConnectionYoungerThanTheMinimumAgeIsNotDroppedForANewcomer) {
  Admitter a({.max_total = 16,
              .max_per_client = 4,
              .max_unauthenticated = 3,
              .max_unauthenticated_per_client = 4,
              .min_eviction_age_ms = 1000});
  const uint64_t slow = a.Admit("10.0.0.1");  // a client 300 ms from the server
  a.Advance(400 * kNanosPerMilli);
  const uint64_t f2 = a.Admit("10.0.1.2");
  a.Advance(400 * kNanosPerMilli);
  a.Admit("10.0.1.3");
  a.Advance(100 * kNanosPerMilli);
  a.Admit("10.0.1.4", Verdict::kServerFull);  // all three younger than 1 s
  a.Admit("10.0.1.5", Verdict::kServerFull);
  a.limits.Authenticated(slow);  // 900 ms after it came: it made it
  a.Admit("10.0.1.6");           // a free slot
  a.Advance(500 * kNanosPerMilli);
  // 1.0 s after f2 came: the oldest is old enough, and goes (all hold one each).
  a.Admit("10.0.1.7");
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{f2}));
  EXPECT_EQ(a.limits.evicted(), 1u);
}

// A client that has authenticated before takes precedence: its new connection may drop any
// unproven client's unauthenticated one, and an unproven newcomer never drops its handshake.
TEST(ConnectionLimitsTest, AClientThatAuthenticatedBeforeTakesPrecedenceOverUnprovenOnes) {
  Admitter a({.max_total = 16,
              .max_per_client = 8,
              .max_unauthenticated = 3,
              .max_unauthenticated_per_client = 16,  // precedence for 4 at a time
              .min_eviction_age_ms = 1000,
              .proven_for_seconds = 600});
  const uint64_t earlier = a.Admit("10.0.0.1");
  a.limits.Authenticated(earlier);
  a.limits.Release(earlier);  // proven from its end for 600 s
  const uint64_t x1 = a.Admit("10.0.9.1"), x2 = a.Admit("10.0.9.2"), x3 = a.Admit("10.0.9.3");
  (void)x2;
  (void)x3;
  // All three flood connections are young; the proven client's newcomer drops one anyway.
  const uint64_t mine = a.Admit("10.0.0.1");
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{x1}));
  // Long after, the flood's newcomers are refused rather than drop the proven one's handshake,
  // even though it is the oldest and past the minimum age; they drop their own.
  a.Advance(2 * kNanosPerSecond);
  const uint64_t x4 = a.Admit("10.0.9.4");
  const uint64_t x5 = a.Admit("10.0.9.5");
  EXPECT_EQ(a.evicted.size(), 3u);
  a.Admit("10.0.9.6", Verdict::kServerFull);  // x4 and x5 are young
  EXPECT_EQ(a.limits.open_for("10.0.0.1"), 1u) << "the proven client kept its handshake";
  // A connection open and authenticated proves its client too.
  a.limits.Authenticated(mine);
  const uint64_t again = a.Admit("10.0.0.1");  // the share had room
  a.Admit("10.0.0.1");                         // drops x4, young
  EXPECT_EQ(a.evicted.back(), x4);
  EXPECT_EQ(a.evicted.size(), 4u);
  (void)x5;
  // Proven lasts proven_for after the client's last authenticated connection ends.
  a.limits.Release(mine);
  a.Advance(599 * kNanosPerSecond);
  const uint64_t y1 = a.Admit("10.0.9.7");  // the oldest unproven one is past its minimum age
  EXPECT_EQ(a.evicted.size(), 5u);
  const uint64_t last = a.Admit("10.0.0.1");  // still proven: drops y1, young
  EXPECT_EQ(a.evicted.back(), y1);
  a.Advance(1 * kNanosPerSecond + 1);
  for (uint64_t id : {again, last}) a.limits.Release(id);
  a.Admit("10.0.9.8");
  a.Admit("10.0.9.9");
  a.Admit("10.0.0.1", Verdict::kServerFull);  // no longer proven: both are young
  EXPECT_EQ(a.evicted.size(), 6u);
}

// Clients behind one address (NAT, a load balancer): a stalled flood from the same address
// holding its share drops its own oldest for each newcomer, so a real client gets in, and
// keeps its connection for the minimum age.
TEST(ConnectionLimitsTest, AClientAtItsOwnShareGivesUpItsOwnOldestOnceOldEnough) {
  Admitter a({.max_total = 16,
              .max_per_client = 8,
              .max_unauthenticated = 8,
              .max_unauthenticated_per_client = 2,
              .min_eviction_age_ms = 1000});
  const uint64_t s1 = a.Admit("10.0.0.1"), s2 = a.Admit("10.0.0.1");
  a.Admit("10.0.0.1", Verdict::kClientFull);  // both young
  a.Advance(1 * kNanosPerSecond);
  const uint64_t real = a.Admit("10.0.0.1");
  a.Admit("10.0.0.1");                        // the attacker again: s2 goes
  a.Admit("10.0.0.1", Verdict::kClientFull);  // its own oldest is now the real client, young
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{s1, s2}));
  a.limits.Authenticated(real);
  EXPECT_EQ(a.limits.open_for("10.0.0.1"), 2u);
}

// Every slot held by authenticated connections: the one idle longest between requests gives
// way, once idle for the minimum age; one with a request under way never does.
TEST(ConnectionLimitsTest, TheLongestIdleAuthenticatedConnectionMakesRoomWhenAllAreTaken) {
  Admitter a({.max_total = 3,
              .max_per_client = 8,
              .max_unauthenticated = 2,
              .max_unauthenticated_per_client = 8,
              .min_eviction_age_ms = 1000});
  std::vector<uint64_t> ids;
  for (const char* client : {"10.0.0.1", "10.0.0.1", "10.0.0.2"}) {
    ids.push_back(a.Admit(client));
    a.limits.Authenticated(ids.back());
  }
  const uint64_t c1 = ids[0], c2 = ids[1], c3 = ids[2];
  a.limits.Idle(c2);
  a.Advance(100 * kNanosPerMilli);
  a.limits.Idle(c1);
  a.Admit("10.0.0.3", Verdict::kServerFull);  // idle 100 ms at most
  a.Advance(950 * kNanosPerMilli);
  const uint64_t d1 = a.Admit("10.0.0.3");  // c2 idle 1.05 s
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{c2}));
  EXPECT_EQ(a.limits.evicted_idle(), 1u);
  EXPECT_EQ(a.limits.evicted(), 0u);
  // c1 took a request: busy, it stays. The newcomer d1 is unauthenticated and young.
  a.limits.Busy(c1);
  a.Advance(5 * kNanosPerSecond);
  a.limits.Idle(c3);
  a.Advance(2 * kNanosPerSecond);
  // d1 (unauthenticated, past its minimum age) goes before idle c3.
  const uint64_t d2 = a.Admit("10.0.0.4");
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{c2, d1}));
  // The unauthenticated share full (d2 and one more): an idle connection frees no room in it.
  a.limits.Release(c1);
  a.Admit("10.0.0.5");
  a.Advance(2 * kNanosPerSecond);
  EXPECT_EQ(a.limits.unauthenticated(), 2u);
  a.Admit("10.0.0.6");  // drops d2, the oldest unauthenticated, not c3
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{c2, d1, d2}));
  EXPECT_EQ(a.limits.evicted_idle(), 1u);
}

TEST(ConnectionLimitsTest, AnIPv6ClientIsItsSlash64AndAMappedIPv4AddressIsTheAddress) {
  EXPECT_EQ(ConnectionLimits::ClientOf("10.1.2.3"), "10.1.2.3");
  EXPECT_EQ(ConnectionLimits::ClientOf("::ffff:10.1.2.3"), "10.1.2.3");
  EXPECT_EQ(ConnectionLimits::ClientOf("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64");
  EXPECT_EQ(ConnectionLimits::ClientOf("2001:db8:1:2:ffff:ffff:ffff:ffff"), "2001:db8:1:2::/64");
  EXPECT_EQ(ConnectionLimits::ClientOf("2001:db8:1:3::1"), "2001:db8:1:3::/64");
  EXPECT_EQ(ConnectionLimits::ClientOf("::1"), "::/64");
  EXPECT_EQ(ConnectionLimits::ClientOf("not an address"), "not an address");
  // One host's many addresses share its bounds.
  Admitter a({.max_total = 16,
              .max_per_client = 2,
              .max_unauthenticated = 16,
              .max_unauthenticated_per_client = 2});
  a.Admit("2001:db8:1:2::1");
  a.Admit("2001:db8:1:2::2");
  a.Admit("2001:db8:1:2::3", Verdict::kClientFull);
  a.Admit("2001:db8:1:3::1");
  EXPECT_EQ(a.limits.open_for("2001:db8:1:2::99"), 2u);
}

// The memory of proven clients is bounded: past max_proven_clients the least recently proven
// is forgotten.
TEST(ConnectionLimitsTest, TheProvenClientsRememberedAreBounded) {
  Admitter a({.max_total = 16,
              .max_per_client = 8,
              .max_unauthenticated = 1,
              .max_unauthenticated_per_client = 8,
              .min_eviction_age_ms = 1000,
              .proven_for_seconds = 10,
              .max_proven_clients = 2});
  for (const char* client : {"10.0.0.1", "10.0.0.2", "10.0.0.3"}) {
    const uint64_t id = a.Admit(client);
    a.limits.Authenticated(id);
    a.limits.Release(id);
    a.Advance(1 * kNanosPerMilli);
  }
  a.Admit("10.0.9.9");                        // young, in the one unauthenticated slot
  a.Admit("10.0.0.1", Verdict::kServerFull);  // forgotten: unproven
  a.Admit("10.0.0.3");                        // remembered: drops the young one
  EXPECT_EQ(a.evicted.size(), 1u);
}

// Precedence holds for a quarter of a client's unauthenticated share at a time: a proven
// client cannot hoard stalled connections that nothing may drop.
TEST(ConnectionLimitsTest, AProvenClientTakesPrecedenceForAFewConnectionsOnly) {
  Admitter a({.max_total = 32,
              .max_per_client = 16,
              .max_unauthenticated = 4,
              .max_unauthenticated_per_client = 8,
              .min_eviction_age_ms = 1000});
  const uint64_t earlier = a.Admit("10.0.0.1");
  a.limits.Authenticated(earlier);
  a.limits.Release(earlier);
  const uint64_t x1 = a.Admit("10.0.9.1"), x2 = a.Admit("10.0.9.2");
  a.Admit("10.0.9.3");
  a.Admit("10.0.9.4");
  a.Admit("10.0.0.1");  // proven: drops x1, young
  a.Admit("10.0.0.1");  // proven: drops x2
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{x1, x2}));
  a.Admit("10.0.0.1", Verdict::kServerFull);  // its third: as any client's, and all are young
}

// One principal (a token) holds at most max_per_principal authenticated connections; for its
// next, its own connection that has waited longest for a request gives way, once it has waited
// the minimum age; else the next stays unauthenticated, to be closed by its caller.
TEST(ConnectionLimitsTest, APrincipalHoldsItsShareOfConnectionsOnly) {
  Admitter a({.max_total = 16,
              .max_per_client = 16,
              .max_unauthenticated = 16,
              .max_unauthenticated_per_client = 16,
              .max_per_principal = 2});
  const uint64_t a1 = a.Admit("10.0.0.1"), a2 = a.Admit("10.0.0.2"), a3 = a.Admit("10.0.0.3");
  EXPECT_TRUE(a.limits.Authenticated(a1, "alice"));
  EXPECT_TRUE(a.limits.Authenticated(a2, "alice"));
  EXPECT_FALSE(a.limits.Authenticated(a3, "alice"));
  EXPECT_EQ(a.limits.unauthenticated(), 1u);
  EXPECT_TRUE(a.limits.Authenticated(a3, "bob"));
  EXPECT_TRUE(a.limits.Authenticated(a.Admit("10.0.0.4")));  // no principal: no bound
  a.limits.Release(a1);
  EXPECT_TRUE(a.limits.Authenticated(a.Admit("10.0.0.5"), "alice"));
  a.limits.Release(a2);
  a.limits.Release(a3);
  const uint64_t a6 = a.Admit("10.0.0.6");
  EXPECT_TRUE(a.limits.Authenticated(a6, "alice"));
  std::function<void()> evict;
  const uint64_t a7 = a.Admit("10.0.0.7");
  EXPECT_FALSE(a.limits.Authenticated(a7, "alice", &evict));  // none waiting
  a.limits.Idle(a6);
  a.Advance(999 * kNanosPerMilli);
  EXPECT_FALSE(a.limits.Authenticated(a7, "alice", &evict));  // not long enough
  EXPECT_FALSE(evict);
  a.Advance(1 * kNanosPerMilli);
  EXPECT_TRUE(a.limits.Authenticated(a7, "alice", &evict));
  ASSERT_TRUE(evict);
  evict();
  EXPECT_EQ(a.evicted, (std::vector<uint64_t>{a6}));
  EXPECT_EQ(a.limits.evicted_idle(), 1u);
  EXPECT_EQ(a.limits.open_for("10.0.0.6"), 0u);
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
}  // namespace podscope::http
