// The seam between the agent and whatever records events for a worker: simulated
// ranks today, the in-process CUPTI/NCCL probe next. The agent's capture runner drives every
// collector through the same calls:
//
//   Arm(window)      early, as soon as the coordinator's request arrives (a collector that
//                    starts itself, like the probe, forwards the start time here)
//   Start(id)        at the window's start on the agent clock
//   TakeRecorded(id, rank)
//                    every stream interval while the window runs: what it has recorded so far
//   Stop(id)         at the window's end, or on cancel
//   Drain(id, rank)  once per rank after Stop: the rest of the events and how the worker fared
//   Forget(id)       drop whatever is left (after upload, or on cancel)
//
// Collectors are called from capture threads, possibly several captures at once; each must
// be thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/watch_summary.h"
#include "common/worker_trace.h"

namespace podscope::agent {

using common::TimeNs;

// A worker (rank) as the agent advertises it to the coordinator.
struct WorkerIdentity {
  int32_t rank = 0;
  int32_t local_rank = 0;
  int32_t world_size = 0;
  int64_t pid = 0;
  std::string job;
  std::string host;
  std::string device;
};

struct CaptureWindow {
  std::string capture_id;
  std::vector<int32_t> ranks;  // only ranks this collector serves
  TimeNs start_ns = 0;         // agent clock
  TimeNs stop_ns = 0;          // agent clock
  uint64_t max_events_per_worker = 0;
};

struct CollectedWorker {
  int32_t rank = 0;
  // Events in the agent's clock; several pieces when the collector gathered them in parts.
  std::vector<common::WorkerTrace> pieces;
  TimeNs actual_start_ns = 0;  // when recording really began (agent clock)
  TimeNs actual_stop_ns = 0;
  uint64_t dropped_events = 0;
  std::map<std::string, uint64_t> dropped_reasons;  // part of dropped_events
  std::string error;  // non-empty: this worker failed (the pieces may be partial)
};

// Watch data: what a collector's workers do between captures, pushed as it happens,
// times on the agent's clock. Thread-safe, and never blocks the caller: a full queue drops its
// oldest summaries and counts them.
class WatchSink {
 public:
  virtual ~WatchSink() = default;
  virtual void Step(std::string_view job, const common::StepSummary& step) = 0;
  // Where a rank stands while its steps do not end (what localises a hang).
  virtual void Progress(std::string_view job, const common::RankProgress& progress) = 0;
};

class Collector {
 public:
  virtual ~Collector() = default;
  // Short name for logs and WorkerDescriptor.collector ("sim", "probe").
  virtual std::string_view name() const = 0;
  virtual std::vector<WorkerIdentity> Workers() const = 0;
  // Collectors whose workers come and go (probes register and exit) call this after a change;
  // the agent then re-reads Workers() and tells the coordinator. Called at most once, before
  // the agent starts.
  virtual void SetWorkersChangedCallback(std::function<void()> callback) {}

  virtual absl::Status Arm(const CaptureWindow& window) = 0;
  virtual absl::Status Start(std::string_view capture_id) = 0;
  virtual absl::Status Stop(std::string_view capture_id) = 0;
  // What a started window has recorded for `rank` so far, handed over early: the agent encodes
  // and uploads it while the window runs, so it holds one interval's events rather than the
  // window's. Each call hands over only what earlier calls did not, and Drain the rest; the
  // pieces are as Drain's (agent clock, worker info set). A collector that cannot split a
  // window hands over nothing here and everything at Drain.
  virtual absl::StatusOr<std::vector<common::WorkerTrace>> TakeRecorded(std::string_view capture_id,
                                                                        int32_t rank) {
    return std::vector<common::WorkerTrace>();
  }
  virtual absl::StatusOr<CollectedWorker> Drain(std::string_view capture_id, int32_t rank) = 0;
  virtual void Forget(std::string_view capture_id) = 0;

  // Starts pushing watch data into `sink` until StopWatch (the sink outlives that). A capture
  // window and watch data coexist. Collectors with nothing to watch ignore both.
  virtual void StartWatch(WatchSink* sink) {}
  virtual void StopWatch() {}
};

}  // namespace podscope::agent
