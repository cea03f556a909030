// Loading the CLI's trace inputs (directories or files) with a progress bar.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/capture.h"
#include "common/packed_workers.h"

namespace podscope::cli {

absl::StatusOr<common::Capture> LoadInputsWithProgress(const std::vector<std::string>& inputs);
// The same inputs packed (common::PackedWorkers), for readers that take a worker at a time.
absl::StatusOr<common::PackedWorkers> LoadPackedInputsWithProgress(
    const std::vector<std::string>& inputs);

}  // namespace podscope::cli
