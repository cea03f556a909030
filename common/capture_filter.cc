#include "common/capture_filter.h"

#include <algorithm>
#include <climits>
#include <vector>

#include "common/ranges.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "common/trace_slice.h"

namespace podscope::common {

absl::Status FilterCapture(const CaptureFilterSpec& o, Capture* capture) {
  if (!o.ranks.empty()) {
    ASSIGN_OR_RETURN(const std::vector<int32_t> ranks, ParseRankList(o.ranks));
    std::erase_if(capture->workers, [&](const WorkerTrace& w) {
      return std::find(ranks.begin(), ranks.end(), w.info.rank) == ranks.end();
    });
    if (capture->workers.empty())
      return absl::NotFoundError(StrCat("no input holds ranks ", o.ranks));
  }
  if (!o.steps.empty()) {
    int64_t first = 0, last = 0;
    RETURN_IF_ERROR(ParseIntRange(o.steps, &first, &last));
    for (WorkerTrace& w : capture->workers) {
      TimeNs begin = INT64_MAX, end = INT64_MIN;
      const StepTable& steps = w.steps;
      for (size_t i = 0; i < steps.number.size(); ++i) {
        if (steps.number[i] < first || steps.number[i] > last) continue;
        begin = std::min(begin, steps.start[i]);
        end = std::max(end, steps.end[i]);
      }
      if (begin > end) {
        return absl::NotFoundError(
            StrCat("rank ", w.info.rank, " has no step ", o.steps, " (its markers)"));
      }
      KeepWindow(begin, end, &w);
    }
  }
  if (!o.window.empty()) {
    const size_t dash = o.window.find('-', 1);
    if (dash == std::string::npos)
      return absl::InvalidArgumentError("a window must be FROM-TO, e.g. 200ms-1.5s");
    ASSIGN_OR_RETURN(const int64_t from_ms, ParseDurationMs(o.window.substr(0, dash)));
    ASSIGN_OR_RETURN(const int64_t to_ms, ParseDurationMs(o.window.substr(dash + 1)));
    if (to_ms <= from_ms) return absl::InvalidArgumentError("a window's TO must be after its FROM");
    // From the capture's first instant on the aligned clock, back into each worker's own.
    const TimeNs origin = FirstAlignedInstant(CaptureView(*capture));
    if (origin == INT64_MAX) return absl::NotFoundError("the inputs hold no events");
    for (WorkerTrace& w : capture->workers) {
      KeepWindow(w.clock.ToLocal(origin + from_ms * 1'000'000),
                 w.clock.ToLocal(origin + to_ms * 1'000'000), &w);
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateCaptureFilter(const CaptureFilterSpec& spec) {
  if (!spec.ranks.empty()) RETURN_IF_ERROR(ParseRankList(spec.ranks).status());
  if (!spec.steps.empty()) {
    int64_t first = 0, last = 0;
    RETURN_IF_ERROR(ParseIntRange(spec.steps, &first, &last));
  }
  if (!spec.window.empty()) {
    // The window is parsed before anything is looked for: on no workers only a parse error remains.
    Capture empty;
    const absl::Status window = FilterCapture({"", "", spec.window}, &empty);
    if (window.code() == absl::StatusCode::kInvalidArgument) return window;
  }
  return absl::OkStatus();
}

}  // namespace podscope::common
