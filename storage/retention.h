// Retention: deletes finished captures older than a maximum age, then the oldest finished
// captures until the stored bytes fit a budget. Captures still in flight are never touched.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "storage/trace_store.h"

namespace podscope::storage {

struct RetentionPolicy {
  int64_t max_age_ns = 0;        // 0: no age limit
  uint64_t max_total_bytes = 0;  // 0: no size limit
};

struct RetentionResult {
  std::vector<std::string> deleted;  // oldest first
  uint64_t remaining_bytes = 0;
};

// One pass; the coordinator runs it periodically on a background thread. Pure apart from the
// store calls; `now_ns` is the coordinator's clock. `mutations` (when given) is the lock every
// multi-step capture change holds (the REST API's imports and deletes): each capture is re-read
// and deleted under it, so a capture an import is adding ranks to is never deleted half-way.
absl::StatusOr<RetentionResult> EnforceRetention(TraceStore& store, const RetentionPolicy& policy,
                                                 int64_t now_ns, absl::Mutex* mutations = nullptr);

}  // namespace podscope::storage
