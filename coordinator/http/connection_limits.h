// Admission of connections (the REST port and the agents' gRPC port): a bound on all of them, a
// bound per client address, and a smaller share for connections that have not yet proven who
// they are (a TLS handshake under way, no authorized request yet), so that connections that
// stall before authenticating cannot take the slots of clients and agents that authenticate.
//
// A new connection starts unauthenticated. When the unauthenticated share is full, or all the
// slots are, one unauthenticated connection is dropped to make room (its evict function is
// handed back to the caller): the oldest of the address that holds the most of them. A flood
// of stalled connections from a few addresses thus pushes out its own, never a client's single
// connection in the middle of its handshake; spread over many addresses, it pushes out the
// oldest, and a real client authenticates within milliseconds of connecting. Only a client
// address's own share refuses outright.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <tuple>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace podscope::coordinator {

struct ConnectionBounds {
  uint32_t max_total = 512;
  uint32_t max_per_client = 64;                  // per client IP address
  uint32_t max_unauthenticated = 128;            // of max_total
  uint32_t max_unauthenticated_per_client = 16;  // of max_per_client
};

// Owned by a server; any thread (accepts and session ends run on the I/O threads).
class ConnectionLimits {
 public:
  enum class Verdict { kAdmitted, kServerFull, kClientFull };
  struct Admission {
    Verdict verdict = Verdict::kServerFull;
    uint64_t id = 0;  // when admitted: for Authenticated and Release
    // When set, the caller runs it (outside any lock of its own): the oldest unauthenticated
    // connection, dropped to make room for this one. Its slot is free already.
    std::function<void()> evict;
  };

  explicit ConnectionLimits(ConnectionBounds bounds) : bounds_(bounds) {}

  // Takes a slot for a new connection from `client` (its IP address). `evict` drops that
  // connection, should a later one need its slot while it is still unauthenticated; it must be
  // callable from any thread, at any time until Release.
  Admission TryAdmit(const std::string& client, std::function<void()> evict);
  // The connection has proven who it is: it leaves the unauthenticated share and cannot be
  // evicted any more. Unknown (released or evicted) ids are ignored.
  void Authenticated(uint64_t id);
  // Each admission is matched by one Release (after an eviction too; then it does nothing).
  void Release(uint64_t id);

  uint32_t open() const;
  uint32_t open_for(const std::string& client) const;
  uint32_t unauthenticated() const;
  uint64_t evicted() const;  // connections dropped to make room, since start

 private:
  struct Entry {
    std::string client;
    bool authenticated = false;
    std::function<void()> evict;
  };
  struct PerClient {
    uint32_t open = 0;
    absl::btree_set<uint64_t> unauthenticated;  // ids, oldest first
  };
  // The eviction order: addresses by how many unauthenticated connections they hold, then by
  // their oldest (older first); the last is the next to lose one.
  using Rank = std::tuple<uint32_t, uint64_t, std::string>;  // count, ~oldest id, client
  static Rank RankOf(const std::string& client, const PerClient& counts) {
    return {static_cast<uint32_t>(counts.unauthenticated.size()), ~*counts.unauthenticated.begin(),
            client};
  }
  void AddUnauthenticated(const std::string& client, uint64_t id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveUnauthenticated(const std::string& client, uint64_t id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes `id`'s entry and its counts; returns its evict function.
  std::function<void()> Remove(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ConnectionBounds bounds_;
  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t evicted_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint32_t unauthenticated_ ABSL_GUARDED_BY(mu_) = 0;
  absl::btree_set<Rank> ranks_ ABSL_GUARDED_BY(mu_);  // one per address holding any
  absl::flat_hash_map<std::string, PerClient> per_client_
      ABSL_GUARDED_BY(mu_);  // only clients with a slot
};

}  // namespace podscope::coordinator
