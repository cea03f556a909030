#include "common/capture_filter.h"

#include <algorithm>
#include <climits>
#include <vector>

#include "common/ranges.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "common/trace_slice.h"

namespace podscope::common {

absl::StatusOr<EventFilter> EventFilter::Parse(const CaptureFilterSpec& spec) {
  EventFilter filter;
  filter.spec_ = spec;
  if (!spec.ranks.empty()) {
    ASSIGN_OR_RETURN(filter.ranks_, ParseRankList(spec.ranks));
    std::sort(filter.ranks_.begin(), filter.ranks_.end());
    filter.ranks_.erase(std::unique(filter.ranks_.begin(), filter.ranks_.end()),
                        filter.ranks_.end());
  }
  if (!spec.steps.empty())
    RETURN_IF_ERROR(ParseIntRange(spec.steps, &filter.first_step_, &filter.last_step_));
  if (!spec.window.empty()) {
    const size_t dash = spec.window.find('-', 1);
    if (dash == std::string::npos)
      return absl::InvalidArgumentError("a window must be FROM-TO, e.g. 200ms-1.5s");
    ASSIGN_OR_RETURN(filter.from_ms_, ParseDurationMs(spec.window.substr(0, dash)));
    ASSIGN_OR_RETURN(filter.to_ms_, ParseDurationMs(spec.window.substr(dash + 1)));
    if (filter.to_ms_ <= filter.from_ms_)
      return absl::InvalidArgumentError("a window's TO must be after its FROM");
  }
  return filter;
}

bool EventFilter::KeepsRank(int32_t rank) const {
  return ranks_.empty() || std::find(ranks_.begin(), ranks_.end(), rank) != ranks_.end();
}

absl::Status EventFilter::KeepSteps(WorkerTrace* w) const {
  if (spec_.steps.empty()) return absl::OkStatus();
  TimeNs begin = INT64_MAX, end = INT64_MIN;
  const StepTable& steps = w->steps;
  for (size_t i = 0; i < steps.number.size(); ++i) {
    if (steps.number[i] < first_step_ || steps.number[i] > last_step_) continue;
    begin = std::min(begin, steps.start[i]);
    end = std::max(end, steps.end[i]);
  }
  if (begin > end) {
    return absl::NotFoundError(
        StrCat("rank ", w->info.rank, " has no step ", spec_.steps, " (its markers)"));
  }
  common::KeepWindow(begin, end, w);
  return absl::OkStatus();
}

void EventFilter::KeepWindow(TimeNs origin, WorkerTrace* w) const {
  if (spec_.window.empty()) return;
  // From the capture's first instant on the aligned clock, back into each worker's own; a window
  // past the end of time ends there.
  auto after = [origin](int64_t ms) {
    TimeNs t = 0;
    return __builtin_add_overflow(origin, ms * 1'000'000, &t) ? INT64_MAX : t;
  };
  common::KeepWindow(w->clock.ToLocal(after(from_ms_)), w->clock.ToLocal(after(to_ms_)), w);
}

absl::Status FilterCapture(const CaptureFilterSpec& spec, Capture* capture) {
  ASSIGN_OR_RETURN(const EventFilter filter, EventFilter::Parse(spec));
  if (!filter.ranks().empty()) {
    std::erase_if(capture->workers,
                  [&](const WorkerTrace& w) { return !filter.KeepsRank(w.info.rank); });
    if (capture->workers.empty())
      return absl::NotFoundError(StrCat("no input holds ranks ", spec.ranks));
  }
  for (WorkerTrace& w : capture->workers) RETURN_IF_ERROR(filter.KeepSteps(&w));
  if (filter.has_window()) {
    const TimeNs origin = FirstAlignedInstant(CaptureView(*capture));
    if (origin == INT64_MAX) return absl::NotFoundError("the inputs hold no events");
    for (WorkerTrace& w : capture->workers) filter.KeepWindow(origin, &w);
  }
  return absl::OkStatus();
}

absl::Status ValidateCaptureFilter(const CaptureFilterSpec& spec) {
  return EventFilter::Parse(spec).status();
}

absl::Status FilteredWorkers::ForEachStepFiltered(
    const std::function<absl::Status(WorkerTrace& trace)>& visit) {
  bool any = false;
  RETURN_IF_ERROR(inner_.ForEachWorker([&](const WorkerTrace& trace) -> absl::Status {
    if (!filter_.KeepsRank(trace.info.rank)) return absl::OkStatus();
    any = true;
    WorkerTrace kept = trace;
    RETURN_IF_ERROR(filter_.KeepSteps(&kept));
    return visit(kept);
  }));
  if (!any) {
    return filter_.ranks().empty()
               ? absl::OkStatus()
               : absl::NotFoundError(StrCat("no input holds ranks ", filter_.spec().ranks));
  }
  return absl::OkStatus();
}

absl::Status FilteredWorkers::ForEachWorker(
    const std::function<absl::Status(const WorkerTrace& trace)>& visit) {
  if (filter_.empty()) return inner_.ForEachWorker(visit);
  if (filter_.has_window() && !origin_) {
    TimeNs origin = INT64_MAX;
    RETURN_IF_ERROR(ForEachStepFiltered([&origin](WorkerTrace& trace) {
      origin = std::min(origin, FirstAlignedInstant(trace));
      return absl::OkStatus();
    }));
    if (origin == INT64_MAX) return absl::NotFoundError("the inputs hold no events");
    origin_ = origin;
  }
  return ForEachStepFiltered([&](WorkerTrace& trace) {
    if (origin_) filter_.KeepWindow(*origin_, &trace);
    return visit(trace);
  });
}

}  // namespace podscope::common
