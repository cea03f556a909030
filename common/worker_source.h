// Workers visited one at a time, in rank order: how streamed exports and analyses read a capture
// without holding all of it. A store decodes one worker per visit, so a reader's memory is one
// worker's events plus whatever it keeps between visits.
#pragma once

#include <functional>

#include "absl/status/status.h"
#include "common/capture.h"

namespace podscope::common {

class WorkerSource {
 public:
  virtual ~WorkerSource() = default;
  // Visits every worker, in the order a CaptureView puts them (by rank, ties in capture order).
  // The trace lives only for its call. Stops at the first error, the source's or `visit`'s. Each
  // call reads the workers anew, so a reader may make more than one pass.
  virtual absl::Status ForEachWorker(
      const std::function<absl::Status(const WorkerTrace& trace)>& visit) = 0;
};

// Workers already in memory.
class ViewWorkers final : public WorkerSource {
 public:
  explicit ViewWorkers(const CaptureView& view) : view_(view) {}
  absl::Status ForEachWorker(
      const std::function<absl::Status(const WorkerTrace& trace)>& visit) override;

 private:
  const CaptureView& view_;
};

}  // namespace podscope::common
