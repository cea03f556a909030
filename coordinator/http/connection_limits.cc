#include "coordinator/http/connection_limits.h"

namespace podscope::coordinator {

ConnectionLimits::Admission ConnectionLimits::TryAdmit(const std::string& client,
                                                       std::function<void()> evict) {
  Admission admission;
  absl::MutexLock lock(&mu_);
  auto mine = per_client_.find(client);
  if (mine != per_client_.end() &&
      (mine->second.open >= bounds_.max_per_client ||
       mine->second.unauthenticated.size() >= bounds_.max_unauthenticated_per_client)) {
    admission.verdict = Verdict::kClientFull;
    return admission;
  }
  const bool full =
      entries_.size() >= bounds_.max_total || unauthenticated_ >= bounds_.max_unauthenticated;
  if (full) {
    if (ranks_.empty()) {
      admission.verdict = Verdict::kServerFull;
      return admission;
    }
    const std::string victim = std::get<2>(*ranks_.rbegin());
    admission.evict = Remove(*per_client_.at(victim).unauthenticated.begin());
    ++evicted_;
  }
  const uint64_t id = next_id_++;
  entries_.emplace(id, Entry{.client = client, .evict = std::move(evict)});
  ++per_client_[client].open;
  AddUnauthenticated(client, id);
  admission.verdict = Verdict::kAdmitted;
  admission.id = id;
  return admission;
}

void ConnectionLimits::AddUnauthenticated(const std::string& client, uint64_t id) {
  PerClient& counts = per_client_[client];
  if (!counts.unauthenticated.empty()) ranks_.erase(RankOf(client, counts));
  counts.unauthenticated.insert(id);
  ranks_.insert(RankOf(client, counts));
  ++unauthenticated_;
}

void ConnectionLimits::RemoveUnauthenticated(const std::string& client, uint64_t id) {
  PerClient& counts = per_client_[client];
  ranks_.erase(RankOf(client, counts));
  counts.unauthenticated.erase(id);
  if (!counts.unauthenticated.empty()) ranks_.insert(RankOf(client, counts));
  --unauthenticated_;
}

void ConnectionLimits::Authenticated(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.authenticated) return;
  it->second.authenticated = true;
  it->second.evict = nullptr;
  RemoveUnauthenticated(it->second.client, id);
}

void ConnectionLimits::Release(uint64_t id) {
  absl::MutexLock lock(&mu_);
  Remove(id);
}

std::function<void()> ConnectionLimits::Remove(uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return nullptr;
  const std::string client = it->second.client;
  if (!it->second.authenticated) RemoveUnauthenticated(client, id);
  auto counts = per_client_.find(client);
  if (--counts->second.open == 0) per_client_.erase(counts);
  std::function<void()> evict = std::move(it->second.evict);
  entries_.erase(it);
  return evict;
}

uint32_t ConnectionLimits::open() const {
  absl::MutexLock lock(&mu_);
  return static_cast<uint32_t>(entries_.size());
}

uint32_t ConnectionLimits::open_for(const std::string& client) const {
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

}  // namespace podscope::coordinator
