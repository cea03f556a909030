// Loading the CLI's trace inputs (directories or files) with a progress bar.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/capture.h"

namespace podscope::cli {

absl::StatusOr<common::Capture> LoadInputsWithProgress(const std::vector<std::string>& inputs);

}  // namespace podscope::cli
