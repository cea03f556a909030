// What records events inside a training process: CUPTI, the NCCL profiler plugin, the step
// API. The probe's window thread drives every source through the same three calls, one capture
// window at a time:
//
//   OpenWindow   the window starts: start recording (a source that is off costs nothing)
//   CloseWindow  the window ends: stop recording, flush what is in flight
//   Harvest      hand over what was recorded, on the host clock, and forget it
//
// The hooks that feed a source (CUPTI buffer callbacks, NCCL's calls, podscope_step_*) run on
// the training process's threads; they never block beyond a short mutex, and when the window's
// event budget is spent they drop and count instead of growing.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "agent/probe/gpu_clock_map.h"
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
    if (left_.fetch_sub(static_cast<int64_t>(n), std::memory_order_relaxed) >= static_cast<int64_t>(n)) return true;
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
  std::string error;          // the source could not record (the window still completes)
};

class EventSource {
 public:
  virtual ~EventSource() = default;
  virtual std::string_view name() const = 0;
  // The source records into `budget` until CloseWindow; `gpu_clock` maps its device times.
  virtual void OpenWindow(TimeNs host_now, EventBudget* budget, GpuClockMap* gpu_clock) = 0;
  virtual void CloseWindow(TimeNs host_now) = 0;
  virtual Harvest TakeHarvest() = 0;
};

}  // namespace podscope::agent::probe
