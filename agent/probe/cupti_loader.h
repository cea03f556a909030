// The real CUPTI, found at run time: PODSCOPE_CUPTI_PATH, else libcupti.so.13 / libcupti.so on
// the loader's path, else beside the CUDA runtime the process already loaded (PyTorch ships
// libcupti in its own wheel directory, which is how most training processes have it).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/probe/cupti_api.h"

namespace podscope::agent::probe {

// NotFound names every place tried; a library without a symbol the probe needs is
// FailedPrecondition naming it.
absl::StatusOr<std::unique_ptr<CuptiApi>> LoadCupti(const std::string& explicit_path);

// The file the loaded library came from (for NVTX_INJECTION64_PATH, so NVTX ranges reach CUPTI).
std::string LoadedCuptiPath(const CuptiApi& api);

}  // namespace podscope::agent::probe
