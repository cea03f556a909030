// Analysis results as JSON with stable field names, times in nanoseconds (documented in the
// README). Shared by `podscope analyze --format json` and the REST API.
#pragma once

#include <string>

#include "analysis/analysis_run.h"

namespace podscope::analysis {

// One requested report: that report's object. Several: {"<name>": {...}, ...} in request order.
std::string RenderJson(const common::CaptureView& capture, const analysis::AnalysisRequest& request,
                       const analysis::AnalysisResults& results);

}  // namespace podscope::analysis
