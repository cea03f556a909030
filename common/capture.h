// A capture: one time window over many workers, and the read-only view analyses take.
#pragma once

#include <string>
#include <vector>

#include "common/worker_trace.h"

namespace podscope::common {

// Owns the workers of one capture. Filled by an importer, a decoder or the store.
struct Capture {
  std::string id;
  std::string job;
  std::vector<WorkerTrace> workers;
};

// Non-owning, read-only view over some workers of a capture, ordered by rank. The analysis
// engine (analysis/) works on this and nothing else; it must not outlive the
// traces it points to.
class CaptureView {
 public:
  CaptureView() = default;
  explicit CaptureView(const Capture& capture);
  explicit CaptureView(std::vector<const WorkerTrace*> workers);

  size_t size() const { return workers_.size(); }
  const WorkerTrace& worker(size_t i) const { return *workers_[i]; }
  const std::vector<const WorkerTrace*>& workers() const { return workers_; }

 private:
  std::vector<const WorkerTrace*> workers_;
};

// The earliest instant of any event of the capture on the aligned clock (INT64_MAX when it holds
// none): the origin of export time bases and windows.
TimeNs FirstAlignedInstant(const CaptureView& capture);
// The same for one worker.
TimeNs FirstAlignedInstant(const WorkerTrace& worker);

}  // namespace podscope::common
