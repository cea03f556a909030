// Ties each NCCL plugin collective to the CUPTI record of its kernel. NCCL does not say which
// kernel launch a collective became, but both come from the same GPU timer: the collective's
// kernel start (its earliest channel) lies within microseconds of one communication kernel's
// start on the device. Linked, the collective carries that kernel's correlation id, so exports
// and analyses see one operation instead of two unrelated rows.
#pragma once

#include <vector>

#include "common/worker_trace.h"

namespace podscope::agent::probe {

// What linking needs of a communication kernel. A window streamed in pieces keeps these of
// every piece sent, so that collectives, which come at the window's end, still find their
// kernels.
struct CommKernelRef {
  common::TimeNs start = 0;
  int64_t correlation = -1;
};

// The communication kernels of `cupti`, appended to `refs`.
void AppendCommKernels(const common::WorkerTrace& cupti, std::vector<CommKernelRef>* refs);

// Sets collectives.correlation in `nccl` (rows still -1) from the nearest unclaimed
// communication kernel in `kernels` whose start is within `tolerance_ns` of the collective's
// kernel start. Returns how many were linked.
size_t LinkCollectivesToKernels(std::vector<CommKernelRef> kernels, common::WorkerTrace* nccl,
                                common::TimeNs tolerance_ns = 50'000);
// The same, with the communication kernels of `cupti`.
size_t LinkCollectivesToKernels(const common::WorkerTrace& cupti, common::WorkerTrace* nccl,
                                common::TimeNs tolerance_ns = 50'000);

}  // namespace podscope::agent::probe
