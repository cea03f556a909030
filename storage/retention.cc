#include "storage/retention.h"

#include <algorithm>

#include "common/status_macros.h"

namespace podscope::storage {
namespace {

bool Finished(CaptureState s) {
  return s == CaptureState::kComplete || s == CaptureState::kPartial ||
         s == CaptureState::kFailed || s == CaptureState::kCancelled;
}

}  // namespace

absl::StatusOr<RetentionResult> EnforceRetention(TraceStore& store, const RetentionPolicy& policy,
                                                 int64_t now_ns, absl::Mutex* mutations) {
  std::vector<CaptureRecord> all;
  CaptureFilter page;
  page.limit = 1000;
  while (true) {
    ASSIGN_OR_RETURN(std::vector<CaptureRecord> batch, store.ListCaptures(page));
    if (batch.empty()) break;
    page.after_id = batch.back().id;
    for (CaptureRecord& r : batch) all.push_back(std::move(r));
  }
  std::sort(all.begin(), all.end(), [](const CaptureRecord& a, const CaptureRecord& b) {
    return a.created_ns != b.created_ns ? a.created_ns < b.created_ns : a.id < b.id;
  });
  RetentionResult result;
  for (const CaptureRecord& r : all) result.remaining_bytes += r.stored_bytes;
  for (const CaptureRecord& r : all) {
    if (!Finished(r.state)) continue;
    const bool too_old = policy.max_age_ns > 0 && now_ns - r.created_ns > policy.max_age_ns;
    const bool over_budget =
        policy.max_total_bytes > 0 && result.remaining_bytes > policy.max_total_bytes;
    if (!too_old && !over_budget) continue;
    absl::MutexLockMaybe lock(mutations);
    // The listing is a snapshot: under the lock, delete only what is still there and finished.
    absl::StatusOr<CaptureRecord> now = store.GetCapture(r.id);
    if (!now.ok() && now.status().code() == absl::StatusCode::kNotFound) continue;
    if (!now.ok()) return now.status();
    if (!Finished(now->state)) continue;
    RETURN_IF_ERROR(store.DeleteCapture(r.id));
    result.deleted.push_back(r.id);
    result.remaining_bytes -= r.stored_bytes;
  }
  return result;
}

}  // namespace podscope::storage
