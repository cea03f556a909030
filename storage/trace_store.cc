#include "storage/trace_store.h"

#include <algorithm>

#include "common/status_macros.h"
#include "common/str_util.h"

namespace podscope::storage {

namespace {
constexpr std::string_view kStateNames[kCaptureStateCount] = {
    "pending", "armed",  "capturing", "uploading", "complete",
    "partial", "failed", "cancelled", "importing"};
}  // namespace

std::string_view CaptureStateName(CaptureState state) {
  const auto i = static_cast<size_t>(state);
  return i < kCaptureStateCount ? kStateNames[i] : "unknown";
}

std::optional<CaptureState> CaptureStateFromName(std::string_view name) {
  for (int i = 0; i < kCaptureStateCount; ++i) {
    if (kStateNames[i] == name) return static_cast<CaptureState>(i);
  }
  return std::nullopt;
}

absl::Status ValidateCaptureId(std::string_view id) {
  if (id.empty() || id.size() > 64) {
    return absl::InvalidArgumentError(
        common::StrCat("capture id must be 1-64 characters, got ", id.size()));
  }
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok)
      return absl::InvalidArgumentError(
          "capture id may only hold letters, digits, '_', '-' and '.'");
  }
  if (id == "." || id == "..")
    return absl::InvalidArgumentError("capture id may not be '.' or '..'");
  return absl::OkStatus();
}

absl::Status ValidateJobName(std::string_view job) {
  if (job.empty() || job.size() > 128) {
    return absl::InvalidArgumentError(
        common::StrCat("job must be 1-128 characters, got ", job.size()));
  }
  for (const char c : job) {
    if (c < 0x20 || c > 0x7e) {
      return absl::InvalidArgumentError(
          common::StrCat("job may only hold printable ASCII characters, not byte ",
                         static_cast<int>(static_cast<unsigned char>(c))));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<StoredWorkers> StoredWorkers::Open(TraceStore& store, std::string_view capture_id) {
  ASSIGN_OR_RETURN(CaptureRecord record, store.GetCapture(capture_id));
  return StoredWorkers(store, std::move(record));
}

absl::Status StoredWorkers::ForEachWorker(
    const std::function<absl::Status(const common::WorkerTrace& trace)>& visit) {
  return ForEachOwnedWorker([&visit](common::WorkerTrace trace) { return visit(trace); });
}

absl::Status StoredWorkers::ForEachOwnedWorker(
    const std::function<absl::Status(common::WorkerTrace trace)>& visit) {
  std::vector<const WorkerRecord*> order;
  for (const WorkerRecord& w : record_.workers) {
    if (ranks_.empty() || std::find(ranks_.begin(), ranks_.end(), w.rank) != ranks_.end())
      order.push_back(&w);
  }
  std::stable_sort(order.begin(), order.end(), [](const WorkerRecord* a, const WorkerRecord* b) {
    return a->rank != b->rank ? a->rank < b->rank : a->worker_index < b->worker_index;
  });
  for (const WorkerRecord* w : order) {
    RETURN_IF_ERROR(store_->ReadWorker(record_.id, w->worker_index,
                                       [&](common::WorkerTrace trace) -> absl::Status {
                                         if (w->clock.source != common::ClockSource::kNone)
                                           trace.clock = w->clock;
                                         // Kineto files rarely name a job: theirs is the capture's.
                                         if (trace.info.job.empty()) trace.info.job = record_.job;
                                         return visit(std::move(trace));
                                       }));
  }
  return absl::OkStatus();
}

absl::StatusOr<common::Capture> LoadCapture(TraceStore& store, std::string_view capture_id) {
  ASSIGN_OR_RETURN(StoredWorkers workers, StoredWorkers::Open(store, capture_id));
  common::Capture capture;
  capture.id = workers.record().id;
  capture.job = workers.record().job;
  RETURN_IF_ERROR(workers.ForEachOwnedWorker([&capture](common::WorkerTrace trace) {
    capture.workers.push_back(std::move(trace));
    return absl::OkStatus();
  }));
  return capture;
}

}  // namespace podscope::storage
