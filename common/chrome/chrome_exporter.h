// Writes a capture as one Chrome Trace Event Format JSON (loads in Perfetto UI and
// chrome://tracing): one process per worker named "rank N (host)", a thread per host thread
// and per GPU stream, launch->kernel flow arrows, all on each worker's aligned clock.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/capture.h"
#include "common/worker_source.h"

namespace podscope::common {

enum class ExportLayout : uint8_t {
  kMerged,  // many workers in one file: a process per worker, podscope metadata first
  kKineto,  // one worker as the PyTorch profiler writes it: host pid, GPU pid = device,
            // tid = stream, distributedInfo (what `podscope simulate` writes)
};

struct ExportOptions {
  bool flows = true;  // launch -> kernel / copy arrows
  ExportLayout layout = ExportLayout::kMerged;
  // The merged layout's time base: a live capture's window start (aligned clock) when > 0, so
  // that the trace starts where its window does; else the earliest event's time. (The Kineto
  // layout keeps absolute times.)
  TimeNs window_start_ns = 0;
};

struct ExportStats {
  uint64_t events = 0;  // trace events written (including metadata and flows)
  uint64_t bytes = 0;   // uncompressed JSON bytes
};

// GPU stream tracks get thread ids above any Linux tid (pid_max <= 2^22).
inline constexpr int64_t kStreamTrackBase = int64_t{1} << 30;
int64_t StreamTrackId(int32_t device, int64_t stream);
// The category Kineto writes a host span under ("cpu_op", "user_annotation", ...).
std::string_view KinetoCategory(HostSpanCategory category);

// Streams the JSON to `sink` in pieces of about 1 MiB, holding one worker's events at a time:
// a first pass over `workers` reads what goes before the events (their descriptions, the time
// base), a second writes them. The Kineto layout takes exactly one worker (InvalidArgument
// otherwise). `progress` (optional) is called after each worker with the number of workers
// written. Runs on the calling thread.
absl::StatusOr<ExportStats> WriteChromeTrace(
    WorkerSource& workers, const ExportOptions& options,
    const std::function<absl::Status(std::string_view)>& sink,
    const std::function<void(size_t workers_done)>& progress = {});
// The same over workers in memory.
absl::StatusOr<ExportStats> WriteChromeTrace(
    const CaptureView& capture, const ExportOptions& options,
    const std::function<absl::Status(std::string_view)>& sink,
    const std::function<void(size_t workers_done)>& progress = {});

// Writes to `path`; gzip-compressed when the path ends in ".gz". The file is complete only
// when OK is returned.
absl::StatusOr<ExportStats> ExportChromeTraceFile(
    WorkerSource& workers, const std::string& path, const ExportOptions& options = {},
    const std::function<void(size_t workers_done)>& progress = {});
absl::StatusOr<ExportStats> ExportChromeTraceFile(
    const CaptureView& capture, const std::string& path, const ExportOptions& options = {},
    const std::function<void(size_t workers_done)>& progress = {});

}  // namespace podscope::common
