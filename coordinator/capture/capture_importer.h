// Imports a trace file (Kineto JSON or a podscope export, gzip or not) as a capture, or as more
// ranks of one: the transaction behind POST /v1/captures:import, without HTTP. The file is
// parsed first, outside any lock (a malformed file leaves the store untouched); the record and
// the events are then written under the store's mutation lock, the record marked "importing"
// before its events land so that a crash leaves it marked failed rather than half-written.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/kineto/kineto_importer.h"
#include "common/time_source.h"
#include "storage/trace_store.h"

namespace podscope::coordinator {

struct ImportSpec {
  std::string capture_id;  // empty: a new capture with a new id
  std::string job = "imported";
  int32_t rank = -1;  // the rank of a one-worker file; -1: as the file says, else the next
  // The file's place among files uploaded together: a worker whose trace names no rank takes it
  // (-1: the capture's next), so that files arriving in any order get the ranks they would in turn.
  int32_t index = -1;
  std::string name = "upload.json";  // the client's file name: each worker's source, and errors'
  std::string path;                  // where the file is on disk
};

struct ImportLimits {
  uint64_t max_document_bytes = 512ull << 20;  // the file, and the JSON after gunzip
  uint64_t max_inflate_ratio = 200;
  uint64_t max_events_per_worker = 50'000'000;
  size_t max_string_bytes = 1 << 20;
  uint32_t max_ranks_per_capture = 65536;
};

// The payload key marking an error as the file's (it did not parse, or broke a limit while
// parsing), as opposed to the request's.
inline constexpr char kTraceFileErrorPayload[] = "podscope.dev/import/trace-file";

// Errors, by code: InvalidArgument (a bad job, id or file), ResourceExhausted (a file over a
// limit, or too many ranks), AlreadyExists (a rank the capture has, or one deleted while the
// file was parsed), FailedPrecondition (a capture that is not complete); the store's own.
class CaptureImporter {
 public:
  // `forget_cached(id)` drops the capture's cached analyses before its ranks change; called
  // with `mutations` held. `time` stamps records and new ids.
  CaptureImporter(storage::TraceStore& store, absl::Mutex& mutations, ImportLimits limits,
                  std::function<absl::Status(const std::string& capture_id)> forget_cached,
                  const common::TimeSource& time = common::RealTime());

  absl::StatusOr<storage::CaptureRecord> Import(const ImportSpec& spec);

  // Appended to new ids ("-SHARD" on a sharded coordinator).
  void set_id_suffix(std::string suffix) { id_suffix_ = std::move(suffix); }
  const ImportLimits& limits() const { return limits_; }

 private:
  // The client's file, within the limits; its errors name the client's file, not the staged one.
  absl::StatusOr<common::ImportResult> Parse(const ImportSpec& spec) const;

  storage::TraceStore& store_;
  absl::Mutex& mutations_;
  const ImportLimits limits_;
  const std::function<absl::Status(const std::string&)> forget_cached_;
  const common::TimeSource& time_;
  std::atomic<uint64_t> next_id_{0};
  std::string id_suffix_;
};

}  // namespace podscope::coordinator
