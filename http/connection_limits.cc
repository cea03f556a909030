#include "http/connection_limits.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>

#include "common/str_util.h"

namespace podscope::http {

std::string ConnectionLimits::ClientOf(const std::string& address) {
  in6_addr v6{};
  if (inet_pton(AF_INET6, address.c_str(), &v6) != 1) return address;
  char text[INET6_ADDRSTRLEN] = {};
  if (IN6_IS_ADDR_V4MAPPED(&v6)) {
    in_addr v4{};
    std::memcpy(&v4, &v6.s6_addr[12], sizeof(v4));
    return inet_ntop(AF_INET, &v4, text, sizeof(text)) != nullptr ? std::string(text) : address;
  }
  std::memset(&v6.s6_addr[8], 0, 8);
  if (inet_ntop(AF_INET6, &v6, text, sizeof(text)) == nullptr) return address;
  return common::StrCat(text, "/64");
}

void ConnectionLimits::Pool::Add(const std::string& client, uint64_t id) {
  absl::btree_set<uint64_t>& ids = by_client_[client];
  if (!ids.empty()) ranks_.erase(RankOf(client, ids));
  ids.insert(id);
  ranks_.insert(RankOf(client, ids));
  oldest_.insert(id);
}

void ConnectionLimits::Pool::Remove(const std::string& client, uint64_t id) {
  auto it = by_client_.find(client);
  if (it == by_client_.end() || !it->second.contains(id)) return;
  ranks_.erase(RankOf(client, it->second));
  it->second.erase(id);
  if (it->second.empty()) {
    by_client_.erase(it);
  } else {
    ranks_.insert(RankOf(client, it->second));
  }
  oldest_.erase(id);
}

ConnectionLimits::Admission ConnectionLimits::TryAdmit(const std::string& address,
                                                       std::function<void()> evict) {
  Admission admission;
  const std::string client = ClientOf(address);
  absl::MutexLock lock(&mu_);
  const common::TimeNs now = time_.Now();
  // Precedence for a few connections of a proven client at a time: a quarter of its share.
  const uint32_t precedence = std::max<uint32_t>(1, bounds_.max_unauthenticated_per_client / 4);
  const bool proven = Proven(client, now) && proven_pool_.CountOf(client) < precedence;
  std::pair<uint64_t, Dropped> victim{0, Dropped::kNone};
  auto mine = per_client_.find(client);
  if (mine != per_client_.end() && mine->second.open >= bounds_.max_per_client) {
    admission.verdict = Verdict::kClientFull;
    return admission;
  }
  if (mine != per_client_.end() &&
      mine->second.unauthenticated.size() >= bounds_.max_unauthenticated_per_client) {
    const uint64_t own_oldest = *mine->second.unauthenticated.begin();
    if (!OldEnough(own_oldest, now)) {
      admission.verdict = Verdict::kClientFull;
      return admission;
    }
    victim = {own_oldest, Dropped::kUnauthenticated};
  } else if (entries_.size() >= bounds_.max_total ||
             unauthenticated_ >= bounds_.max_unauthenticated) {
    admission.unauthenticated_full = unauthenticated_ >= bounds_.max_unauthenticated;
    victim = Victim(proven, admission.unauthenticated_full, now);
    if (victim.first == 0) {
      admission.verdict = Verdict::kServerFull;
      return admission;
    }
  }
  if (victim.first != 0) {
    admission.evict = Remove(victim.first);
    admission.dropped = victim.second;
    ++(victim.second == Dropped::kIdle ? evicted_idle_ : evicted_);
  }
  const uint64_t id = next_id_++;
  entries_.emplace(
      id, Entry{.client = client, .admitted_ns = now, .proven = proven, .evict = std::move(evict)});
  PerClient& counts = per_client_[client];
  ++counts.open;
  counts.unauthenticated.insert(id);
  (proven ? proven_pool_ : unproven_pool_).Add(client, id);
  ++unauthenticated_;
  admission.verdict = Verdict::kAdmitted;
  admission.id = id;
  return admission;
}

std::pair<uint64_t, ConnectionLimits::Dropped> ConnectionLimits::Victim(bool newcomer_proven,
                                                                        bool unauthenticated_only,
                                                                        common::TimeNs now) const {
  if (const uint64_t id = VictimIn(unproven_pool_, newcomer_proven, now); id != 0)
    return {id, Dropped::kUnauthenticated};
  if (newcomer_proven) {
    if (const uint64_t id = VictimIn(proven_pool_, false, now); id != 0)
      return {id, Dropped::kUnauthenticated};
  }
  if (!unauthenticated_only && !idle_.empty()) {
    const auto& [since, id] = *idle_.begin();
    if (now - since >= bounds_.min_eviction_age_ms * common::kNanosPerMilli) {
      return {id, Dropped::kIdle};
    }
  }
  return {0, Dropped::kNone};
}

uint64_t ConnectionLimits::VictimIn(const Pool& pool, bool any_age, common::TimeNs now) const {
  if (pool.empty()) return 0;
  if (const uint64_t crowded = pool.MostCrowded(); any_age || OldEnough(crowded, now))
    return crowded;
  const uint64_t oldest = pool.Oldest();
  return OldEnough(oldest, now) ? oldest : 0;
}

bool ConnectionLimits::OldEnough(uint64_t id, common::TimeNs now) const {
  return now - entries_.at(id).admitted_ns >= bounds_.min_eviction_age_ms * common::kNanosPerMilli;
}

bool ConnectionLimits::Proven(const std::string& client, common::TimeNs now) {
  auto counts = per_client_.find(client);
  if (counts != per_client_.end() && counts->second.authenticated > 0) return true;
  auto it = proven_.find(client);
  if (it == proven_.end()) return false;
  if (now - it->second < bounds_.proven_for_seconds * common::kNanosPerSecond) return true;
  proven_order_.erase({it->second, client});
  proven_.erase(it);
  return false;
}

void ConnectionLimits::Prove(const std::string& client, common::TimeNs now) {
  if (bounds_.max_proven_clients == 0) return;
  auto it = proven_.find(client);
  if (it != proven_.end()) {
    proven_order_.erase({it->second, client});
    it->second = now;
  } else {
    if (proven_.size() >= bounds_.max_proven_clients) {
      proven_.erase(proven_order_.begin()->second);
      proven_order_.erase(proven_order_.begin());
    }
    proven_.emplace(client, now);
  }
  proven_order_.emplace(now, client);
}

void ConnectionLimits::RemoveUnauthenticated(Entry& entry, uint64_t id) {
  (entry.proven ? proven_pool_ : unproven_pool_).Remove(entry.client, id);
  per_client_[entry.client].unauthenticated.erase(id);
  --unauthenticated_;
}

bool ConnectionLimits::Authenticated(uint64_t id, const std::string& principal,
                                     std::function<void()>* evict) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.authenticated) return true;
  if (!principal.empty()) {
    auto held = per_principal_.find(principal);
    if (held != per_principal_.end() && held->second >= bounds_.max_per_principal) {
      // Its own connection that has waited longest gives way, if any has waited long enough.
      const common::TimeNs now = time_.Now();
      uint64_t victim = 0;
      for (const auto& [since, waiting] : idle_) {
        if (now - since < bounds_.min_eviction_age_ms * common::kNanosPerMilli) break;
        if (entries_.at(waiting).principal == principal) {
          victim = waiting;
          break;
        }
      }
      if (victim == 0 || evict == nullptr) return false;
      *evict = Remove(victim);
      ++evicted_idle_;
      held = per_principal_.find(principal);  // Remove may have erased it
    }
    if (held == per_principal_.end()) held = per_principal_.emplace(principal, 0).first;
    ++held->second;
    it->second.principal = principal;
  }
  it->second.authenticated = true;
  RemoveUnauthenticated(it->second, id);
  ++per_client_[it->second.client].authenticated;
  return true;
}

void ConnectionLimits::Idle(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || !it->second.authenticated || it->second.idle_since_ns >= 0) return;
  it->second.idle_since_ns = time_.Now();
  idle_.emplace(it->second.idle_since_ns, id);
}

void ConnectionLimits::Busy(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.idle_since_ns < 0) return;
  idle_.erase({it->second.idle_since_ns, id});
  it->second.idle_since_ns = -1;
}

void ConnectionLimits::Release(uint64_t id) {
  absl::MutexLock lock(&mu_);
  Remove(id);
}

std::function<void()> ConnectionLimits::Remove(uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return nullptr;
  Entry& entry = it->second;
  if (!entry.authenticated) RemoveUnauthenticated(entry, id);
  if (entry.idle_since_ns >= 0) idle_.erase({entry.idle_since_ns, id});
  auto counts = per_client_.find(entry.client);
  if (entry.authenticated) {
    // Known good until now: proven_for counts from the end of its client's last connection.
    --counts->second.authenticated;
    Prove(entry.client, time_.Now());
    if (!entry.principal.empty()) {
      auto held = per_principal_.find(entry.principal);
      if (--held->second == 0) per_principal_.erase(held);
    }
  }
  if (--counts->second.open == 0) per_client_.erase(counts);
  std::function<void()> evict = std::move(entry.evict);
  entries_.erase(it);
  return evict;
}

uint32_t ConnectionLimits::open() const {
  absl::MutexLock lock(&mu_);
  return static_cast<uint32_t>(entries_.size());
}

uint32_t ConnectionLimits::open_for(const std::string& address) const {
  const std::string client = ClientOf(address);
  absl::MutexLock lock(&mu_);
  auto it = per_client_.find(client);
  return it == per_client_.end() ? 0 : it->second.open;
}

uint32_t ConnectionLimits::unauthenticated() const {
  absl::MutexLock lock(&mu_);
  return unauthenticated_;
}

uint64_t ConnectionLimits::evicted() const {
  absl::MutexLock lock(&mu_);
  return evicted_;
}

uint64_t ConnectionLimits::evicted_idle() const {
  absl::MutexLock lock(&mu_);
  return evicted_idle_;
}

}  // namespace podscope::http
