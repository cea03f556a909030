// What records events inside a training process: CUPTI, the NCCL profiler plugin, the step
// API. The probe's window thread drives every source through the same three calls, one capture
// window at a time:
//
//   OpenWindow   the window starts: start recording (a source that is off costs nothing)
//   TakeRecorded while the window runs, every stream interval: hand over what is final so far
//                (a source that cannot split its window hands over nothing until the end)
//   CloseWindow  the window ends: stop recording, flush what is in flight
//   Harvest      hand over the rest of what was recorded, on the host clock, and forget it
//
// The hooks that feed a source (CUPTI buffer callbacks, NCCL's calls, podscope_step_*) run on
// the training process's threads; they never block beyond a short mutex, and when the window's
// event budget is spent they drop and count instead of growing.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "agent/probe/gpu_clock_map.h"
#include "common/watch_summary.h"
#include "common/worker_trace.h"

namespace podscope::agent::probe {

// The window's bound on events, shared by every source: whoever records first gets the room.
class EventBudget {
 public:
  void Reset(uint64_t max_events) {
    left_.store(static_cast<int64_t>(max_events), std::memory_order_relaxed);
    dropped_.store(0, std::memory_order_relaxed);
  }
  // Takes room for `n` events; false (and the n are counted as dropped) when there is none.
  bool Take(uint64_t n = 1) {
    if (left_.fetch_sub(static_cast<int64_t>(n), std::memory_order_relaxed) >=
        static_cast<int64_t>(n))
      return true;
    left_.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
    dropped_.fetch_add(n, std::memory_order_relaxed);
    return false;
  }
  void CountDropped(uint64_t n) { dropped_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> left_{0};
  std::atomic<uint64_t> dropped_{0};
};

struct Harvest {
  common::WorkerTrace trace;  // host clock; the source's tables only
  uint64_t dropped = 0;       // lost inside the source (beyond the shared budget's count)
  // Part of `dropped`: records left out for a reason the user should see ("kernels: no time").
  std::map<std::string, uint64_t> dropped_reasons;
  std::string error;  // the source could not record (the window still completes)
};

class EventSource {
 public:
  virtual ~EventSource() = default;
  virtual std::string_view name() const = 0;
  // The source records into `budget` until CloseWindow; `gpu_clock` maps its device times.
  virtual void OpenWindow(TimeNs host_now, EventBudget* budget, GpuClockMap* gpu_clock) = 0;
  // What was recorded since the window opened (or the last take) and will not change: on the
  // host clock, forgotten once handed over. The window thread calls it between OpenWindow and
  // CloseWindow.
  virtual Harvest TakeRecorded() { return {}; }
  virtual void CloseWindow(TimeNs host_now) = 0;
  virtual Harvest TakeHarvest() = 0;
};

// Watch data (docs/watch.md): what a source saw between two flushes of the probe,
// inside capture windows or not. The agent turns it into step summaries.
struct WatchStepMark {
  int64_t step = 0;
  TimeNs start_ns = 0;
  TimeNs end_ns = 0;
};

struct WatchHarvest {
  std::vector<common::CollectiveArrival> collectives;  // finished, host clock, in enqueue order
  std::vector<WatchStepMark> steps;
  std::vector<common::RankProgress> progress;  // communicators quiet for a while (rank: -1)
  uint64_t dropped = 0;                        // since the process started
};

// A source that also watches between windows. Its hooks stay as cheap as in a window: one short
// mutex and a write into a fixed ring, never an allocation.
class WatchSource {
 public:
  virtual ~WatchSource() = default;
  // On: record watch data from now on (NCCL is asked for collectives between windows). Off:
  // record none, and NCCL between windows is asked for nothing.
  virtual void SetWatching(bool on) = 0;
  // What finished since the last call, appended to `out`; `now` (host clock) decides which
  // communicators count as quiet.
  virtual void TakeWatch(TimeNs now, const GpuClockMap& gpu_clock, WatchHarvest* out) = 0;
};

}  // namespace podscope::agent::probe
