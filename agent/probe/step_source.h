// Steps marked through the C API (podscope/step.h): podscope_step_begin(n) and
// podscope_step_end(n) on any thread. A step counts when it begins and ends inside one window.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "agent/probe/event_source.h"

namespace podscope::agent::probe {

class StepSource : public EventSource {
 public:
  explicit StepSource(TimeNs (*host_now)() = nullptr);

  std::string_view name() const override { return "steps"; }
  void OpenWindow(TimeNs host_now, EventBudget* budget, GpuClockMap* gpu_clock) override;
  void CloseWindow(TimeNs host_now) override;
  Harvest TakeHarvest() override;

  void Begin(uint64_t step, int64_t thread);
  void End(uint64_t step, int64_t thread);

 private:
  struct Open {
    uint64_t step;
    int64_t thread;
    TimeNs start;
  };
  TimeNs (*host_now_)();
  std::mutex mu_;
  bool open_ = false;
  EventBudget* budget_ = nullptr;
  std::vector<Open> begun_;  // a handful: one per thread that marks steps
  common::WorkerTrace trace_;
};

}  // namespace podscope::agent::probe
