// Cutting and re-timing a worker's events: what a collector does to the events of a capture
// window before it ships them, and what the agent does to split them into bounded chunks.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "common/clock_model.h"
#include "common/worker_trace.h"

namespace podscope::common {

// Keeps only events that lie wholly inside [begin, end] (a collective: from enqueue to kernel
// end; a host sample: its instant). Names and worker info are kept as they are.
void KeepWindow(TimeNs begin, TimeNs end, WorkerTrace* trace);
// Of those, keeps only events that end after `after` (a host sample: its instant): one slice of
// a window whose events are handed over as they end. Slices cut at successive instants
// together hold exactly what KeepWindow keeps.
void KeepEndedBetween(TimeNs begin, TimeNs after, TimeNs end, WorkerTrace* trace);

// Rewrites every timestamp t as clock.ToAligned(t): moves events from one clock domain into
// another (e.g. true time into a simulated host's skewed clock).
void MapTimes(const ClockModel& clock, WorkerTrace* trace);

// Splits `trace` into pieces of at most `max_events` events each (at least one piece, even for
// an empty trace), table by table in time order. Every piece carries the worker info, clock and
// the names its rows use, so each decodes on its own.
std::vector<WorkerTrace> SplitIntoChunks(WorkerTrace trace, size_t max_events);
// The same pieces, one at a time, never holding more than one beside `trace`; stops at the first
// error `visit` returns.
absl::Status ForEachChunk(const WorkerTrace& trace, size_t max_events,
                          const std::function<absl::Status(WorkerTrace)>& visit);

}  // namespace podscope::common
