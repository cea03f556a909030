// Which analyses the store holds cached, least recently used first, and their bytes: the cache
// is bounded by bytes (ApiLimits::max_analysis_cache_bytes), so a client asking for many
// distinct analyses (every step_pattern it can think of) evicts old results instead of growing
// the store without end. The entries live in the store; this is their index. Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace podscope::coordinator {

class AnalysisCacheIndex {
 public:
  struct Entry {
    std::string capture_id, key;
    uint64_t bytes = 0;
  };

  explicit AnalysisCacheIndex(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  // Records an entry as the most recently used (replacing one of the same key); returns the
  // least recently used entries that must go for the total to fit, already forgotten here.
  std::vector<Entry> Insert(const std::string& capture_id, const std::string& key, uint64_t bytes);
  // Marks an entry as just used (a cache hit); unknown entries are ignored.
  void Touch(const std::string& capture_id, const std::string& key);
  // Forgets every entry of a capture and returns them.
  std::vector<Entry> ForgetCapture(const std::string& capture_id);
  uint64_t bytes() const;
  size_t size() const;
  uint64_t max_bytes() const { return max_bytes_; }

 private:
  static std::string Id(const std::string& capture_id, const std::string& key) {
    return capture_id + '\0' + key;
  }

  const uint64_t max_bytes_;
  mutable absl::Mutex mu_;
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);  // least recently used first
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> by_id_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace podscope::coordinator
