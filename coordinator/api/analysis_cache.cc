#include "coordinator/api/analysis_cache.h"

namespace podscope::coordinator {

std::vector<AnalysisCacheIndex::Entry> AnalysisCacheIndex::Insert(const std::string& capture_id,
                                                                  const std::string& key,
                                                                  uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  const std::string id = Id(capture_id, key);
  if (auto it = by_id_.find(id); it != by_id_.end()) {
    bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    by_id_.erase(it);
  }
  lru_.push_back(Entry{capture_id, key, bytes});
  by_id_[id] = std::prev(lru_.end());
  bytes_ += bytes;
  std::vector<Entry> evicted;
  while (bytes_ > max_bytes_ && !lru_.empty()) {
    Entry& oldest = lru_.front();
    by_id_.erase(Id(oldest.capture_id, oldest.key));
    bytes_ -= oldest.bytes;
    evicted.push_back(std::move(oldest));
    lru_.pop_front();
  }
  return evicted;
}

void AnalysisCacheIndex::Touch(const std::string& capture_id, const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(Id(capture_id, key));
  if (it != by_id_.end()) lru_.splice(lru_.end(), lru_, it->second);
}

std::vector<AnalysisCacheIndex::Entry> AnalysisCacheIndex::ForgetCapture(
    const std::string& capture_id) {
  absl::MutexLock lock(&mu_);
  std::vector<Entry> forgotten;
  for (auto it = lru_.begin(); it != lru_.end();) {
    if (it->capture_id != capture_id) {
      ++it;
      continue;
    }
    by_id_.erase(Id(it->capture_id, it->key));
    bytes_ -= it->bytes;
    forgotten.push_back(std::move(*it));
    it = lru_.erase(it);
  }
  return forgotten;
}

uint64_t AnalysisCacheIndex::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

size_t AnalysisCacheIndex::size() const {
  absl::MutexLock lock(&mu_);
  return lru_.size();
}

}  // namespace podscope::coordinator
