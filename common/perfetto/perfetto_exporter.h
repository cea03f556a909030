// Writes a capture in Perfetto's native trace format: TracePackets (perfetto_trace.proto names
// the messages and fields it uses), which ui.perfetto.dev and trace_processor read without the
// JSON importer's size limits. Each worker is a process ("rank N (host)") on a packet sequence of
// its own, with its names interned on that sequence; each host thread and GPU stream is a thread
// track; every event is a slice (a begin and an end) or an instant on the aligned clock, in
// nanoseconds; launch -> kernel / copy flows; the Chrome export's arguments as debug annotations.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/chrome/chrome_exporter.h"
#include "common/worker_source.h"

namespace podscope::common {

// Streams the trace to `sink` in pieces of about 1 MiB, one worker's events at a time.
// `stats.events` counts trace events (a slice once, an instant once), what the Chrome export
// writes as "X" and "i" events. Only `options.flows` applies (the layout is the merged one).
absl::StatusOr<ExportStats> WritePerfettoTrace(
    WorkerSource& workers, const ExportOptions& options,
    const std::function<absl::Status(std::string_view)>& sink,
    const std::function<void(size_t workers_done)>& progress = {});

// Writes to `path` (gzip-compressed when it ends in ".gz"); complete only when OK is returned.
absl::StatusOr<ExportStats> ExportPerfettoTraceFile(
    WorkerSource& workers, const std::string& path, const ExportOptions& options = {},
    const std::function<void(size_t workers_done)>& progress = {});

}  // namespace podscope::common
