#include "coordinator/capture/capture_importer.h"

#include <utility>

#include "absl/strings/cord.h"
#include "common/kineto/kineto_importer.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "common/trace_slice.h"

namespace podscope::coordinator {

using storage::CaptureRecord;
using storage::CaptureState;

namespace {
constexpr size_t kImportChunkEvents = 65'536;
}  // namespace

CaptureImporter::CaptureImporter(storage::TraceStore& store, absl::Mutex& mutations,
                                 ImportLimits limits,
                                 std::function<absl::Status(const std::string&)> forget_cached,
                                 const common::TimeSource& time)
    : store_(store),
      mutations_(mutations),
      limits_(limits),
      forget_cached_(std::move(forget_cached)),
      time_(time) {}

absl::StatusOr<common::ImportResult> CaptureImporter::Parse(const ImportSpec& spec) const {
  common::ImportOptions options;
  options.read = {.max_file_bytes = limits_.max_document_bytes,
                  .max_decompressed_bytes = limits_.max_document_bytes,
                  .max_inflate_ratio = limits_.max_inflate_ratio};
  options.max_events = limits_.max_events_per_worker;
  options.max_string_bytes = limits_.max_string_bytes;
  common::KinetoImporter importer(options);
  absl::StatusOr<common::ImportResult> imported = importer.ImportFile(spec.path);
  if (imported.ok()) return imported;
  // Name the client's file, not where it was staged.
  std::string message(imported.status().message());
  if (message.starts_with(spec.path)) message = spec.name + message.substr(spec.path.size());
  absl::Status error(imported.status().code() == absl::StatusCode::kResourceExhausted
                         ? absl::StatusCode::kResourceExhausted
                         : absl::StatusCode::kInvalidArgument,
                     message);
  error.SetPayload(kTraceFileErrorPayload, absl::Cord(spec.name));
  return error;
}

absl::StatusOr<CaptureRecord> CaptureImporter::Import(const ImportSpec& spec) {
  RETURN_IF_ERROR(storage::ValidateJobName(spec.job));
  std::string id = spec.capture_id;
  if (id.empty()) id = common::StrCat("imp-", time_.Now() / 1000, "-", next_id_++, id_suffix_);
  RETURN_IF_ERROR(storage::ValidateCaptureId(id));
  // Whether the client is adding ranks to a capture that exists now: if it is deleted while
  // this file is parsed, the ranks are not added to a new capture of the same name.
  absl::StatusOr<CaptureRecord> before = store_.GetCapture(id);
  if (!before.ok() && before.status().code() != absl::StatusCode::kNotFound) return before.status();

  // Parse first: a malformed file leaves the store untouched.
  ASSIGN_OR_RETURN(common::ImportResult imported, Parse(spec));

  absl::MutexLock lock(&mutations_);
  CaptureRecord record;
  absl::StatusOr<CaptureRecord> existing = store_.GetCapture(id);
  if (before.ok() && !existing.ok() && existing.status().code() == absl::StatusCode::kNotFound) {
    return absl::AlreadyExistsError(common::StrCat(
        "capture ", id, " was deleted while this file was being parsed; nothing was imported"));
  }
  if (existing.ok()) {
    record = *std::move(existing);
    if (record.state != CaptureState::kComplete && record.state != CaptureState::kImporting) {
      return absl::FailedPreconditionError(
          common::StrCat("capture ", id, " is ", storage::CaptureStateName(record.state)));
    }
  } else if (existing.status().code() == absl::StatusCode::kNotFound) {
    record.id = id;
    record.job = spec.job;
    record.created_ns = time_.Now();
  } else {
    return existing.status();
  }
  if (record.workers.size() + imported.workers.size() > limits_.max_ranks_per_capture) {
    return absl::ResourceExhaustedError(
        common::StrCat("a capture holds at most ", limits_.max_ranks_per_capture, " ranks"));
  }
  for (common::WorkerTrace& w : imported.workers) {
    if (spec.rank >= 0 && imported.workers.size() == 1) w.info.rank = spec.rank;
    if (w.info.rank < 0)
      w.info.rank = spec.index >= 0 ? spec.index : static_cast<int32_t>(record.workers.size());
    for (const storage::WorkerRecord& k : record.workers) {
      if (k.rank == w.info.rank) {
        return absl::AlreadyExistsError(
            common::StrCat("capture ", id, " already has rank ", w.info.rank));
      }
    }
  }
  // Analyses of the capture as it was are stale from now on: drop them, and their bytes.
  if (existing.ok()) {
    RETURN_IF_ERROR(forget_cached_(id));
    if (absl::StatusOr<CaptureRecord> again = store_.GetCapture(id); again.ok())
      record.stored_bytes = again->stored_bytes;
  }
  // Marked importing before its events land: after a crash it is marked failed.
  record.state = CaptureState::kImporting;
  record.updated_ns = time_.Now();
  RETURN_IF_ERROR(store_.PutCapture(record));
  for (common::WorkerTrace& w : imported.workers) {
    w.info.source = spec.name;
    const auto index = static_cast<uint32_t>(record.workers.size());
    const uint64_t events = w.Counts().Total();
    storage::WorkerRecord worker{index, w.info.rank, w.info.host, spec.name, events, 0, "complete"};
    // In chunks of an agent's size, so that reading it back never parses a whole rank at once.
    if (absl::Status s = common::ForEachChunk(w, kImportChunkEvents,
                                              [&](common::WorkerTrace chunk) {
                                                return store_.PutChunk(id, index, worker.chunks++,
                                                                       chunk);
                                              });
        !s.ok()) {
      return s;
    }
    w = common::WorkerTrace();
    record.workers.push_back(std::move(worker));
    record.events += events;
  }
  absl::StatusOr<uint64_t> bytes = store_.ApproximateEventBytes(id);
  if (bytes.ok()) record.stored_bytes = *bytes;
  record.state = CaptureState::kComplete;
  record.updated_ns = time_.Now();
  ++record.generation;  // cached analyses of the previous generation no longer apply
  RETURN_IF_ERROR(store_.PutCapture(record));
  return record;
}

}  // namespace podscope::coordinator
