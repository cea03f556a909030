// Admission of connections (the REST port and the agents' gRPC port): a bound on all of them, a
// bound per client, and a smaller share for connections that have not yet proven who they are
// (a TLS handshake under way, no authorized request yet), so that connections that stall
// before authenticating cannot take the slots of clients and agents that authenticate.
//
// A client is an IPv4 address, or an IPv6 /64 (one host is commonly given a whole /64, so its
// addresses count as one).
//
// A new connection starts unauthenticated. When a slot is needed and none is free, one
// connection is dropped to make room (its evict function is handed back to the caller), in
// this order:
// - At a client's own unauthenticated share: that client's oldest unauthenticated connection.
//   Clients behind one address (NAT, a load balancer) thus keep getting in while a stalled
//   flood from the same address holds its share.
// - Else, when the unauthenticated share or all the slots are full: an unauthenticated
//   connection, the oldest of the client that holds the most of them. A flood of stalled
//   connections from a few clients pushes out its own, never a client's single connection in
//   the middle of its handshake.
// - Else, all slots being held by authenticated connections: the one idle longest between
//   requests (a kept-alive connection that waits for its next request loses nothing).
// A connection younger than min_eviction_age (or idle for less) is not dropped, with one
// exception: proven clients (one of whose connections authenticated within proven_for) take
// precedence over the others, for a few unauthenticated connections each (a quarter of
// the per-client share; more are as any client's). Those may drop any unauthenticated
// connection of an unproven client, and unproven clients' new connections never drop them. A
// flood
// spread over many addresses, each of which never authenticates, therefore cannot cut short
// the handshake of a client that has authenticated before, and gives a newcomer at least the
// minimum age to authenticate once admitted; with every unauthenticated slot younger than
// that, a newcomer is refused (and may retry) rather than taking one.
//
// Authenticated connections are bounded per principal too (the token a connection's first
// authorized request carried), so that one token cannot hold every slot busy; at its bound,
// the principal's own connection that has waited longest for a request gives way.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <utility>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/time_source.h"

namespace podscope::http {

struct ConnectionBounds {
  uint32_t max_total = 512;
  uint32_t max_per_client = 64;
  uint32_t max_unauthenticated = 128;            // of max_total
  uint32_t max_unauthenticated_per_client = 16;  // of max_per_client
  uint32_t min_eviction_age_ms = 1000;
  uint32_t proven_for_seconds = 600;
  uint32_t max_proven_clients = 65536;  // remembered at once; past it, the least recent goes
  uint32_t max_per_principal = 128;     // authenticated connections of one principal
};

// Owned by a server; any thread (accepts and session ends run on the I/O threads).
class ConnectionLimits {
 public:
  enum class Verdict { kAdmitted, kServerFull, kClientFull };
  enum class Dropped { kNone, kUnauthenticated, kIdle };
  struct Admission {
    Verdict verdict = Verdict::kServerFull;
    // kServerFull: the unauthenticated share is what is full (else all the slots are).
    bool unauthenticated_full = false;
    uint64_t id = 0;  // when admitted: for Authenticated, Idle, Busy and Release
    // When set, the caller runs it (outside any lock of its own): the connection dropped to
    // make room for this one. Its slot is free already.
    std::function<void()> evict;
    Dropped dropped = Dropped::kNone;
  };

  ConnectionLimits(ConnectionBounds bounds, const common::TimeSource& time)
      : bounds_(bounds), time_(time) {}

  // The client an address belongs to: the address itself for IPv4 (an IPv4-mapped IPv6
  // address too), its /64 for IPv6 ("2001:db8:1:2::/64"). Anything else is its own client.
  static std::string ClientOf(const std::string& address);

  // Takes a slot for a new connection from `address` (an IP address). `evict` drops that
  // connection, should a later one need its slot; it must be callable from any thread, at any
  // time until Release.
  Admission TryAdmit(const std::string& address, std::function<void()> evict);
  // The connection has proven who it is (`principal`, when the proof names one): it leaves
  // the unauthenticated share, and its client is proven while it lasts and for proven_for
  // after it ends. When the principal holds max_per_principal connections already, the one of
  // them that has waited longest for a request gives way if it has waited min_eviction_age
  // (its evict function is put in `*evict` for the caller to run); else false: the connection
  // stays unauthenticated, and its caller closes it. Unknown (released or evicted) ids are
  // ignored (true).
  bool Authenticated(uint64_t id, const std::string& principal = "",
                     std::function<void()>* evict = nullptr);
  // An authenticated connection waits for its next request (Idle) or has one (Busy). Only an
  // idle one may be dropped once authenticated.
  void Idle(uint64_t id);
  void Busy(uint64_t id);
  // Each admission is matched by one Release (after an eviction too; then it does nothing).
  void Release(uint64_t id);

  uint32_t open() const;
  uint32_t open_for(const std::string& address) const;
  uint32_t unauthenticated() const;
  uint64_t evicted() const;       // unauthenticated connections dropped, since start
  uint64_t evicted_idle() const;  // idle authenticated connections dropped, since start

 private:
  // Unauthenticated connections of one kind (of proven clients, or of the others), in the
  // order they are dropped.
  class Pool {
   public:
    void Add(const std::string& client, uint64_t id);
    void Remove(const std::string& client, uint64_t id);
    bool empty() const { return oldest_.empty(); }
    uint32_t CountOf(const std::string& client) const {
      auto it = by_client_.find(client);
      return it == by_client_.end() ? 0 : static_cast<uint32_t>(it->second.size());
    }
    // The oldest connection of the client holding the most.
    uint64_t MostCrowded() const { return ~std::get<1>(*ranks_.rbegin()); }
    uint64_t Oldest() const { return *oldest_.begin(); }

   private:
    // Clients by how many they hold, then by their oldest (older first); the last is the next
    // to lose one.
    using Rank = std::tuple<uint32_t, uint64_t, std::string>;  // count, ~oldest id, client
    static Rank RankOf(const std::string& client, const absl::btree_set<uint64_t>& ids) {
      return {static_cast<uint32_t>(ids.size()), ~*ids.begin(), client};
    }
    absl::btree_set<uint64_t> oldest_;  // ids rise with time
    absl::btree_set<Rank> ranks_;
    absl::flat_hash_map<std::string, absl::btree_set<uint64_t>> by_client_;
  };
  struct Entry {
    std::string client;
    common::TimeNs admitted_ns = 0;
    common::TimeNs idle_since_ns = -1;  // authenticated and between requests; else -1
    bool authenticated = false;
    bool proven = false;    // its client was proven when it came: in proven_pool_
    std::string principal;  // once authenticated, when its proof named one
    std::function<void()> evict;
  };
  struct PerClient {
    uint32_t open = 0;
    uint32_t authenticated = 0;
    absl::btree_set<uint64_t> unauthenticated;  // ids, oldest first
  };

  bool Proven(const std::string& client, common::TimeNs now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Prove(const std::string& client, common::TimeNs now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool OldEnough(uint64_t id, common::TimeNs now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // From `pool`: its most crowded client's oldest connection, else the oldest of all, if old
  // enough (`any_age`: whatever its age); 0 for none.
  uint64_t VictimIn(const Pool& pool, bool any_age, common::TimeNs now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The connection to drop for a newcomer when the server or its unauthenticated share is
  // full, or 0 for none. `unauthenticated_only`: the share is what is full.
  std::pair<uint64_t, Dropped> Victim(bool newcomer_proven, bool unauthenticated_only,
                                      common::TimeNs now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveUnauthenticated(Entry& entry, uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes `id`'s entry and its counts; returns its evict function.
  std::function<void()> Remove(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ConnectionBounds bounds_;
  const common::TimeSource& time_;
  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t evicted_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t evicted_idle_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint32_t unauthenticated_ ABSL_GUARDED_BY(mu_) = 0;
  Pool unproven_pool_ ABSL_GUARDED_BY(mu_);
  Pool proven_pool_ ABSL_GUARDED_BY(mu_);
  absl::btree_set<std::pair<common::TimeNs, uint64_t>> idle_
      ABSL_GUARDED_BY(mu_);  // idle since, id: the longest idle first
  absl::flat_hash_map<std::string, PerClient> per_client_
      ABSL_GUARDED_BY(mu_);  // only clients with a slot
  absl::flat_hash_map<std::string, common::TimeNs> proven_
      ABSL_GUARDED_BY(mu_);  // client -> when it last proved itself
  absl::btree_set<std::pair<common::TimeNs, std::string>> proven_order_
      ABSL_GUARDED_BY(mu_);  // the same, the least recent first
  absl::flat_hash_map<std::string, uint32_t> per_principal_
      ABSL_GUARDED_BY(mu_);  // authenticated connections; only principals holding some
};

}  // namespace podscope::http
