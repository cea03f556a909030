#include "common/capture.h"

#include <algorithm>
#include <climits>

namespace podscope::common {

CaptureView::CaptureView(const Capture& capture) {
  workers_.reserve(capture.workers.size());
  for (const WorkerTrace& w : capture.workers) workers_.push_back(&w);
  std::stable_sort(
      workers_.begin(), workers_.end(),
      [](const WorkerTrace* a, const WorkerTrace* b) { return a->info.rank < b->info.rank; });
}

CaptureView::CaptureView(std::vector<const WorkerTrace*> workers) : workers_(std::move(workers)) {
  std::stable_sort(
      workers_.begin(), workers_.end(),
      [](const WorkerTrace* a, const WorkerTrace* b) { return a->info.rank < b->info.rank; });
}

TimeNs FirstAlignedInstant(const CaptureView& capture) {
  TimeNs first = INT64_MAX;
  for (const WorkerTrace* w : capture.workers()) first = std::min(first, FirstAlignedInstant(*w));
  return first;
}

TimeNs FirstAlignedInstant(const WorkerTrace& w) {
  TimeNs first = INT64_MAX;
  for (const std::vector<TimeNs>* starts :
       {&w.kernels.start, &w.memcpys.start, &w.runtime_calls.start, &w.host_spans.start,
        &w.collectives.enqueue, &w.steps.start}) {
    for (TimeNs t : *starts) first = std::min(first, w.clock.ToAligned(t));
  }
  return first;
}

}  // namespace podscope::common
