#include "common/capture.h"

#include <algorithm>

namespace podscope::common {

CaptureView::CaptureView(const Capture& capture) {
  workers_.reserve(capture.workers.size());
  for (const WorkerTrace& w : capture.workers) workers_.push_back(&w);
  std::stable_sort(workers_.begin(), workers_.end(),
                   [](const WorkerTrace* a, const WorkerTrace* b) {
                     return a->info.rank < b->info.rank;
                   });
}

CaptureView::CaptureView(std::vector<const WorkerTrace*> workers) : workers_(std::move(workers)) {
  std::stable_sort(workers_.begin(), workers_.end(),
                   [](const WorkerTrace* a, const WorkerTrace* b) {
                     return a->info.rank < b->info.rank;
                   });
}

}  // namespace podscope::common
