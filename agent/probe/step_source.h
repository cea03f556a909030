// Steps marked through the C API (podscope/step.h): podscope_step_begin(n) and
// podscope_step_end(n) on any thread. A step counts for a window when it begins and ends inside
// it; while watching, every step that ends is also kept for the next watch flush.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/probe/event_source.h"

namespace podscope::agent::probe {

class StepSource : public EventSource, public WatchSource {
 public:
  explicit StepSource(TimeNs (*host_now)() = nullptr);

  std::string_view name() const override { return "steps"; }
  void OpenWindow(TimeNs host_now, EventBudget* budget, GpuClockMap* gpu_clock) override;
  void CloseWindow(TimeNs host_now) override;
  Harvest TakeHarvest() override;

  void SetWatching(bool on) override;
  void TakeWatch(TimeNs now, const GpuClockMap& gpu_clock, WatchHarvest* out) override;

  // `watch_only`: a mark another source records inside windows (an NVTX range, which CUPTI
  // records there): kept for watching, not made a step of the window twice.
  void Begin(uint64_t step, int64_t thread, bool watch_only = false);
  void End(uint64_t step, int64_t thread, bool watch_only = false);

 private:
  struct Open {
    uint64_t step;
    int64_t thread;
    TimeNs start;
    bool in_window;  // begun while the window was open
  };
  TimeNs (*host_now_)();
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  EventBudget* budget_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<Open> begun_ ABSL_GUARDED_BY(mu_);  // a handful: one per thread that marks steps
  common::WorkerTrace trace_ ABSL_GUARDED_BY(mu_);
  bool watching_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<WatchStepMark> watch_steps_ ABSL_GUARDED_BY(mu_);  // bounded: the oldest go first
  uint64_t watch_dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace podscope::agent::probe
