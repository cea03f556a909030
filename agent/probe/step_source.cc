#include "agent/probe/step_source.h"

namespace podscope::agent::probe {

namespace {

constexpr size_t kMaxOpenSteps = 256;
constexpr size_t kMaxWatchSteps = 4096;  // steps between two flushes

}  // namespace

StepSource::StepSource(TimeNs (*host_now)())
    : host_now_(host_now != nullptr ? host_now : &common::HostNowNs) {}

void StepSource::OpenWindow(TimeNs host_now, EventBudget* budget, GpuClockMap* gpu_clock) {
  absl::MutexLock lock(&mu_);
  open_ = true;
  budget_ = budget;
  for (Open& o : begun_) o.in_window = false;  // begun before the window: not a step of it
  trace_ = common::WorkerTrace();
}

void StepSource::CloseWindow(TimeNs host_now) {
  absl::MutexLock lock(&mu_);
  open_ = false;
  // Steps still running at the end are not whole steps of this window (watching still wants
  // them).
  if (!watching_) begun_.clear();
  for (Open& o : begun_) o.in_window = false;
}

void StepSource::SetWatching(bool on) {
  absl::MutexLock lock(&mu_);
  watching_ = on;
  if (on) watch_steps_.reserve(kMaxWatchSteps);
  if (!on && !open_) begun_.clear();
}

void StepSource::TakeWatch(TimeNs now, const GpuClockMap& gpu_clock, WatchHarvest* out) {
  absl::MutexLock lock(&mu_);
  out->steps.insert(out->steps.end(), watch_steps_.begin(), watch_steps_.end());
  watch_steps_.clear();
  out->dropped += watch_dropped_;
}

void StepSource::Begin(uint64_t step, int64_t thread, bool watch_only) {
  const TimeNs now = host_now_();
  absl::MutexLock lock(&mu_);
  if (!open_ && !watching_) return;
  for (Open& o : begun_) {
    if (o.thread == thread) {  // a begin without its end: the newer one wins
      o = Open{step, thread, now, open_ && !watch_only};
      return;
    }
  }
  if (begun_.size() < kMaxOpenSteps)
    begun_.push_back(Open{step, thread, now, open_ && !watch_only});
}

void StepSource::End(uint64_t step, int64_t thread, bool /*watch_only*/) {
  const TimeNs now = host_now_();
  absl::MutexLock lock(&mu_);
  if (!open_ && !watching_) return;
  for (size_t i = 0; i < begun_.size(); ++i) {
    const Open o = begun_[i];
    if (o.thread != thread || o.step != step) continue;
    begun_.erase(begun_.begin() + static_cast<std::ptrdiff_t>(i));
    if (watching_) {
      if (watch_steps_.size() >= kMaxWatchSteps) {
        watch_steps_.erase(watch_steps_.begin());
        ++watch_dropped_;
      }
      watch_steps_.push_back(WatchStepMark{static_cast<int64_t>(step), o.start, now});
    }
    if (!open_ || !o.in_window || budget_ == nullptr || !budget_->Take(2)) return;
    const auto number = static_cast<int64_t>(step);
    common::StepTable& s = trace_.steps;
    s.number.push_back(number);
    s.start.push_back(o.start);
    s.end.push_back(now);
    s.thread.push_back(thread);
    // Also a host span, as the Kineto importer gives ProfilerStep#N, so every view finds it.
    common::HostSpanTable& h = trace_.host_spans;
    h.start.push_back(o.start);
    h.end.push_back(now);
    h.thread.push_back(thread);
    h.name.push_back(trace_.strings.Intern("ProfilerStep#" + std::to_string(number)));
    h.category.push_back(common::HostSpanCategory::kAnnotation);
    h.step.push_back(number);
    h.external_id.push_back(0);
    return;
  }
}

Harvest StepSource::TakeHarvest() {
  absl::MutexLock lock(&mu_);
  Harvest h;
  h.trace = std::move(trace_);
  trace_ = common::WorkerTrace();
  budget_ = nullptr;
  return h;
}

}  // namespace podscope::agent::probe
