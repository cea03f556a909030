// The device time of dtype casts: kernels launched by an aten::copy_ inside aten::_to_copy, the
// path of `tensor.to(dtype)` and of autocast's casts (autocast casts each FP32 weight to bf16 or
// fp16 again for every matmul of every step). Copies that are not casts are left out: the
// host-to-device copy of a batch (a memcpy, not a kernel) and DDP's copies of gradients into its
// buckets (an aten::copy_ of its own).
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/intervals.h"
#include "common/worker_trace.h"

namespace podscope::analysis {

struct CastCopies {
  TimeNs cast_kernel_ns = 0;  // kernels launched inside aten::_to_copy > aten::copy_
  uint64_t casts = 0;         // such aten::copy_ calls that launched a kernel
  TimeNs kernel_ns = 0;       // every kernel's time, what the share is of
  uint64_t operators = 0;     // host operators in the trace: none, and casts cannot be seen
  double share() const {
    return kernel_ns > 0 ? static_cast<double>(cast_kernel_ns) / static_cast<double>(kernel_ns) : 0;
  }
  CastCopies& operator+=(const CastCopies& o) {
    cast_kernel_ns += o.cast_kernel_ns;
    casts += o.casts;
    kernel_ns += o.kernel_ns;
    operators += o.operators;
    return *this;
  }
};

// One worker's. Pure; any thread.
CastCopies ComputeWorkerCastCopies(const common::WorkerTrace& trace);

}  // namespace podscope::analysis
