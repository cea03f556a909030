// Keeping part of a capture, as users ask for it: some ranks, the events inside some steps (by
// each rank's own step markers), the events inside a window after the capture's first instant.
// For `podscope export` and the REST API's trace.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "common/capture.h"

namespace podscope::common {

struct CaptureFilterSpec {
  std::string ranks;   // "0-3,7"; empty: all
  std::string steps;   // "N" or "FIRST-LAST"; empty: all
  std::string window;  // "FROM-TO" durations with units after the first instant ("200ms-1.5s")
};

// InvalidArgument for a spec that does not parse; NotFound, naming the filter, for one that
// leaves nothing.
absl::Status FilterCapture(const CaptureFilterSpec& spec, Capture* capture);

// Only whether the spec parses (InvalidArgument naming the part that does not): for callers that
// must answer before they load the capture.
absl::Status ValidateCaptureFilter(const CaptureFilterSpec& spec);

}  // namespace podscope::common
