// Analysis results as terminal tables (times in milliseconds unless marked).
#pragma once

#include <string>

#include "coordinator/analysis/analysis_run.h"

namespace podscope::coordinator {

std::string RenderTables(const common::CaptureView& capture,
                         const analysis::AnalysisRequest& request,
                         const analysis::AnalysisResults& results);

}  // namespace podscope::coordinator
