// Whether the workers of a capture are one job: traces from different jobs, world sizes that
// disagree, a rank twice (stale files from an earlier run in the same folder) or out of its
// world make cross-rank reports meaningless; ranks missing from the world only thin them.
#pragma once

#include <string>
#include <vector>

#include "common/capture.h"

namespace podscope::analysis {

struct JobCheck {
  std::vector<std::string> warnings;  // every disagreement, in words
  bool mixed = false;                 // not one job: refuse cross-rank reports unless insisted on
};

// Pure; any thread.
JobCheck CheckOneJob(const common::CaptureView& capture);

}  // namespace podscope::analysis
