// Whether a kernel runs on Tensor Cores, decided from its name as the PyTorch profiler does
// (a kernel whose name holds one of its patterns), with the patterns of kernels newer than its
// list added (docs/gpu-efficiency.md lists both).
#pragma once

#include <span>
#include <string_view>

namespace podscope::coordinator::analysis {

bool UsesTensorCores(std::string_view kernel_name);

// The PyTorch profiler's patterns, then podscope's additions; for the docs and tests.
std::span<const std::string_view> PyTorchTensorCorePatterns();
std::span<const std::string_view> AddedTensorCorePatterns();

}  // namespace podscope::coordinator::analysis
