#include "storage/trace_store.h"

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

absl::StatusOr<common::Capture> LoadCapture(TraceStore& store, std::string_view capture_id) {
  ASSIGN_OR_RETURN(CaptureRecord record, store.GetCapture(capture_id));
  common::Capture capture;
  capture.id = record.id;
  capture.job = record.job;
  RETURN_IF_ERROR(
      store.ReadWorkers(capture_id, [&capture, &record](uint32_t index, common::WorkerTrace trace) {
        for (const WorkerRecord& w : record.workers) {
          if (w.worker_index == index && w.clock.source != common::ClockSource::kNone)
            trace.clock = w.clock;
        }
        // Workers whose trace names no job (Kineto files rarely do) belong to the capture's.
        if (trace.info.job.empty()) trace.info.job = record.job;
        capture.workers.push_back(std::move(trace));
        return absl::OkStatus();
      }));
  return capture;
}

}  // namespace podscope::storage
