// Analysis results as terminal tables (times in milliseconds unless marked).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "analysis/analysis_run.h"

namespace podscope::analysis {

std::string RenderTables(const common::CaptureView& capture,
                         const analysis::AnalysisRequest& request,
                         const analysis::AnalysisResults& results);

// Names for a column `width` characters wide that stay as distinct as the names are: "void " and
// anonymous namespaces dropped; names cut to the same text show where they first differ; any
// still alike are numbered. request.wide_names prints names whole instead.
std::vector<std::string> ShortNames(const std::vector<std::string_view>& names, size_t width);

}  // namespace podscope::analysis
