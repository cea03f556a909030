// The trace store (docs/life-of-a-capture.md): capture records, columnar event chunks, cached
// analyses. The coordinator owns one; any thread may call it (implementations are thread-safe).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/capture.h"
#include "common/worker_source.h"

namespace podscope::storage {

enum class CaptureState : uint8_t {
  kPending = 0,
  kArmed = 1,
  kCapturing = 2,
  kUploading = 3,
  kComplete = 4,
  kPartial = 5,
  kFailed = 6,
  kCancelled = 7,
  kImporting = 8,
};
inline constexpr int kCaptureStateCount = 9;
std::string_view CaptureStateName(CaptureState state);
std::optional<CaptureState> CaptureStateFromName(std::string_view name);

struct WorkerRecord {
  uint32_t worker_index = 0;
  int32_t rank = 0;
  std::string host;
  std::string source;
  uint64_t events = 0;
  uint64_t chunks = 0;
  std::string state;
  // Live captures only.
  std::string agent_id;
  common::ClockModel clock;     // agent clock -> coordinator clock, frozen when the window ended
  int64_t actual_start_ns = 0;  // when the worker really started and stopped (coordinator clock)
  int64_t actual_stop_ns = 0;
  uint64_t dropped_events = 0;
  std::map<std::string, uint64_t> dropped_reasons;  // part of dropped_events, by reason
  std::string error;                                // why it failed, when it did
  int64_t acknowledged_ns = 0;  // when its agent acknowledged the capture (coordinator clock)
  friend bool operator==(const WorkerRecord&, const WorkerRecord&) = default;
};

struct CaptureRecord {
  std::string id;
  std::string job;
  CaptureState state = CaptureState::kPending;
  int64_t created_ns = 0;
  int64_t updated_ns = 0;
  uint64_t events = 0;
  uint64_t stored_bytes = 0;  // encoded chunk bytes
  std::string error;
  std::vector<WorkerRecord> workers;
  uint64_t generation = 0;      // bumped when events or clock models change
  int64_t window_start_ns = 0;  // live captures: the requested window (coordinator clock)
  int64_t window_duration_ns = 0;
  friend bool operator==(const CaptureRecord&, const CaptureRecord&) = default;
};

struct CaptureFilter {
  std::string job;                    // empty: any
  std::optional<CaptureState> state;  // unset: any
  std::string after_id;               // paging: ids greater than this
  size_t limit = 100;
};

// Capture ids name keys and files: 1-64 characters of [A-Za-z0-9_.-].
absl::Status ValidateCaptureId(std::string_view id);
// A job name: 1-128 printable ASCII characters. Names are printed by `podscope captures` and
// `podscope workers`: no control character (terminal escapes, NUL, newlines) gets that far.
absl::Status ValidateJobName(std::string_view job);

class TraceStore {
 public:
  virtual ~TraceStore() = default;

  // Creates or replaces a capture record (durably: synced to the WAL).
  virtual absl::Status PutCapture(const CaptureRecord& record) = 0;
  // NotFound for an unknown id.
  virtual absl::StatusOr<CaptureRecord> GetCapture(std::string_view id) = 0;
  // Records by id, filtered and paged. A record that does not decode (damaged, or written by a
  // format this build cannot read) is skipped, kept as it is, and remembered for
  // UnreadableCaptures: one bad record stops neither a list nor a start.
  virtual absl::StatusOr<std::vector<CaptureRecord>> ListCaptures(const CaptureFilter& filter) = 0;
  // The records ListCaptures has skipped so far (id -> why), at most 1,024. GetCapture of one
  // answers why it does not decode; DeleteCapture removes it.
  virtual std::map<std::string, std::string> UnreadableCaptures() const { return {}; }

  // Stores one worker's chunk. Idempotent: writing the same (capture, worker, sequence) again
  // replaces it, so an interrupted upload can resume.
  virtual absl::Status PutChunk(std::string_view capture_id, uint32_t worker_index,
                                uint64_t sequence, const common::WorkerTrace& chunk) = 0;
  // Streams a capture's workers in worker order, each decoded from all its chunks; stops at the
  // first error (from the store or from `visit`).
  virtual absl::Status ReadWorkers(
      std::string_view capture_id,
      const std::function<absl::Status(uint32_t worker_index, common::WorkerTrace trace)>&
          visit) = 0;
  // One worker, decoded from all its chunks; `visit` is not called when it has none.
  virtual absl::Status ReadWorker(
      std::string_view capture_id, uint32_t worker_index,
      const std::function<absl::Status(common::WorkerTrace trace)>& visit) = 0;

  // Cached analysis results, keyed by capture and kind (e.g. "steps?window=hta").
  virtual absl::Status PutAnalysis(std::string_view capture_id, std::string_view kind,
                                   std::string_view value) = 0;
  virtual absl::StatusOr<std::optional<std::string>> GetAnalysis(std::string_view capture_id,
                                                                 std::string_view kind) = 0;
  virtual absl::Status DeleteAnalysis(std::string_view capture_id, std::string_view kind) = 0;
  // Every cached analysis with its size, in key order (capture by capture).
  virtual absl::Status ForEachAnalysis(
      const std::function<void(std::string_view capture_id, std::string_view kind, uint64_t bytes)>&
          visit) = 0;

  // Small named settings the coordinator keeps across restarts (alert rules, schedules):
  // durable (synced), at most 1 MiB each; names are 1-64 characters of [a-z0-9_.-].
  virtual absl::Status PutSetting(std::string_view name, std::string_view value) = 0;
  // Empty when the setting was never stored.
  virtual absl::StatusOr<std::optional<std::string>> GetSetting(std::string_view name) = 0;

  // Removes the record, all events and cached analyses of a capture (range deletes).
  virtual absl::Status DeleteCapture(std::string_view id) = 0;
  // Removes every event chunk of one worker of a capture (a range delete).
  virtual absl::Status DeleteWorkerEvents(std::string_view capture_id, uint32_t worker_index) = 0;
  // Bytes of event chunks on disk for a capture (approximate, from the store's index).
  virtual absl::StatusOr<uint64_t> ApproximateEventBytes(std::string_view capture_id) = 0;
};

// A stored capture's workers, decoded one at a time (common/worker_source.h), each as LoadCapture
// gives it: a worker whose record carries a clock model (live captures) gets that model, which
// supersedes whatever its chunks say, and a worker naming no job gets the capture's.
class StoredWorkers final : public common::WorkerSource {
 public:
  // Reads the capture's record; NotFound for an unknown capture.
  static absl::StatusOr<StoredWorkers> Open(TraceStore& store, std::string_view capture_id);

  // By the record's ranks (ties by worker index), each read with TraceStore::ReadWorker.
  absl::Status ForEachWorker(
      const std::function<absl::Status(const common::WorkerTrace& trace)>& visit) override;
  // The same, handing each trace over.
  absl::Status ForEachOwnedWorker(
      const std::function<absl::Status(common::WorkerTrace trace)>& visit);
  // Only workers of these ranks are read; the others are skipped undecoded. Empty: all.
  void KeepRanks(std::vector<int32_t> ranks) { ranks_ = std::move(ranks); }
  const CaptureRecord& record() const { return record_; }

 private:
  StoredWorkers(TraceStore& store, CaptureRecord record)
      : store_(&store), record_(std::move(record)) {}
  TraceStore* store_;
  CaptureRecord record_;
  std::vector<int32_t> ranks_;
};

// Loads a whole capture through StoredWorkers (the same workers, each whole, in memory).
absl::StatusOr<common::Capture> LoadCapture(TraceStore& store, std::string_view capture_id);

}  // namespace podscope::storage
