#include "agent/probe/collective_links.h"

#include <algorithm>
#include <vector>

namespace podscope::agent::probe {

size_t LinkCollectivesToKernels(const common::WorkerTrace& cupti, common::WorkerTrace* nccl,
                                common::TimeNs tolerance_ns) {
  const common::KernelTable& k = cupti.kernels;
  std::vector<size_t> comm;  // communication kernels by start time
  for (size_t i = 0; i < k.size(); ++i) {
    if (k.kernel_class[i] == common::KernelClass::kCommunication) comm.push_back(i);
  }
  std::sort(comm.begin(), comm.end(), [&k](size_t a, size_t b) { return k.start[a] < k.start[b]; });
  std::vector<bool> taken(comm.size(), false);
  common::CollectiveTable& c = nccl->collectives;
  size_t linked = 0;
  for (size_t row = 0; row < c.size(); ++row) {
    if (c.correlation[row] >= 0) continue;
    const common::TimeNs t = c.kernel_start[row];
    auto it = std::lower_bound(comm.begin(), comm.end(), t - tolerance_ns,
                               [&k](size_t i, common::TimeNs v) { return k.start[i] < v; });
    size_t best = comm.size();
    common::TimeNs best_gap = tolerance_ns + 1;
    for (; it != comm.end() && k.start[*it] <= t + tolerance_ns; ++it) {
      const size_t at = static_cast<size_t>(it - comm.begin());
      const common::TimeNs gap = std::abs(k.start[*it] - t);
      if (!taken[at] && gap < best_gap) {
        best = at;
        best_gap = gap;
      }
    }
    if (best == comm.size()) continue;
    taken[best] = true;
    c.correlation[row] = k.correlation[comm[best]];
    ++linked;
  }
  return linked;
}

}  // namespace podscope::agent::probe
