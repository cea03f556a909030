#include "coordinator/http/connection_limits.h"

namespace podscope::coordinator {

ConnectionLimits::Verdict ConnectionLimits::TryAdmit(const std::string& client) {
  absl::MutexLock lock(&mu_);
  if (open_ >= max_total_) return Verdict::kServerFull;
  uint32_t& mine = per_client_[client];
  if (mine >= max_per_client_) {
    if (mine == 0) per_client_.erase(client);
    return Verdict::kClientFull;
  }
  ++mine;
  ++open_;
  return Verdict::kAdmitted;
}

void ConnectionLimits::Release(const std::string& client) {
  absl::MutexLock lock(&mu_);
  auto it = per_client_.find(client);
  if (it == per_client_.end()) return;
  --open_;
  if (--it->second == 0) per_client_.erase(it);
}

uint32_t ConnectionLimits::open() const {
  absl::MutexLock lock(&mu_);
  return open_;
}

uint32_t ConnectionLimits::open_for(const std::string& client) const {
  absl::MutexLock lock(&mu_);
  auto it = per_client_.find(client);
  return it == per_client_.end() ? 0 : it->second;
}

}  // namespace podscope::coordinator
