// Keeping part of a capture, as users ask for it: some ranks, the events inside some steps (by
// each rank's own step markers), the events inside a window after the capture's first instant.
// For `podscope export` and the REST API's trace, on a capture in memory or streamed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/capture.h"
#include "common/worker_source.h"

namespace podscope::common {

struct CaptureFilterSpec {
  std::string ranks;   // "0-3,7"; empty: all
  std::string steps;   // "N" or "FIRST-LAST"; empty: all
  std::string window;  // "FROM-TO" durations with units after the first instant ("200ms-1.5s")
  bool empty() const { return ranks.empty() && steps.empty() && window.empty(); }
};

// A parsed spec. Ranks go first, then steps; the window's origin is the first aligned instant of
// the workers the ranks and steps keep.
class EventFilter {
 public:
  // InvalidArgument naming the part that does not parse.
  static absl::StatusOr<EventFilter> Parse(const CaptureFilterSpec& spec);

  const CaptureFilterSpec& spec() const { return spec_; }
  bool empty() const { return spec_.empty(); }
  bool has_window() const { return !spec_.window.empty(); }
  const std::vector<int32_t>& ranks() const { return ranks_; }  // ascending, once; empty: all
  bool KeepsRank(int32_t rank) const;
  // Keeps the events inside the worker's chosen steps; NotFound naming the rank when its markers
  // hold none of them.
  absl::Status KeepSteps(WorkerTrace* worker) const;
  // Keeps the events inside the window, `origin` being the window's zero on the aligned clock.
  void KeepWindow(TimeNs origin, WorkerTrace* worker) const;

 private:
  CaptureFilterSpec spec_;
  std::vector<int32_t> ranks_;
  int64_t first_step_ = 0, last_step_ = 0;
  int64_t from_ms_ = 0, to_ms_ = 0;
};

// InvalidArgument for a spec that does not parse; NotFound, naming the filter, for one that
// leaves nothing.
absl::Status FilterCapture(const CaptureFilterSpec& spec, Capture* capture);

// Only whether the spec parses (InvalidArgument naming the part that does not): for callers that
// must answer before they load the capture.
absl::Status ValidateCaptureFilter(const CaptureFilterSpec& spec);

// `inner`'s workers with a filter applied, one at a time, as FilterCapture would leave them. A
// window needs its origin first: the first pass over the workers then reads them twice. Errors
// as FilterCapture's, once the pass that finds them is over (a rank without the steps: at that
// rank).
class FilteredWorkers final : public WorkerSource {
 public:
  FilteredWorkers(WorkerSource& inner, EventFilter filter)
      : inner_(inner), filter_(std::move(filter)) {}
  absl::Status ForEachWorker(
      const std::function<absl::Status(const WorkerTrace& trace)>& visit) override;

 private:
  // The ranks and steps filters (the window's origin is found after them).
  absl::Status ForEachStepFiltered(const std::function<absl::Status(WorkerTrace& trace)>& visit);

  WorkerSource& inner_;
  const EventFilter filter_;
  std::optional<TimeNs> origin_;
};

}  // namespace podscope::common
