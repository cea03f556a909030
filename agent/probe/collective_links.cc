#include "agent/probe/collective_links.h"

#include <algorithm>
#include <cstdlib>

namespace podscope::agent::probe {

void AppendCommKernels(const common::WorkerTrace& cupti, std::vector<CommKernelRef>* refs) {
  const common::KernelTable& k = cupti.kernels;
  for (size_t i = 0; i < k.size(); ++i) {
    if (k.kernel_class[i] == common::KernelClass::kCommunication)
      refs->push_back({k.start[i], k.correlation[i]});
  }
}

size_t LinkCollectivesToKernels(std::vector<CommKernelRef> kernels, common::WorkerTrace* nccl,
                                common::TimeNs tolerance_ns) {
  std::stable_sort(
      kernels.begin(), kernels.end(),
      [](const CommKernelRef& a, const CommKernelRef& b) { return a.start < b.start; });
  std::vector<bool> taken(kernels.size(), false);
  common::CollectiveTable& c = nccl->collectives;
  size_t linked = 0;
  for (size_t row = 0; row < c.size(); ++row) {
    if (c.correlation[row] >= 0) continue;
    const common::TimeNs t = c.kernel_start[row];
    auto it =
        std::lower_bound(kernels.begin(), kernels.end(), t - tolerance_ns,
                         [](const CommKernelRef& k, common::TimeNs v) { return k.start < v; });
    size_t best = kernels.size();
    common::TimeNs best_gap = tolerance_ns + 1;
    for (; it != kernels.end() && it->start <= t + tolerance_ns; ++it) {
      const size_t at = static_cast<size_t>(it - kernels.begin());
      const common::TimeNs gap = std::abs(it->start - t);
      if (!taken[at] && gap < best_gap) {
        best = at;
        best_gap = gap;
      }
    }
    if (best == kernels.size()) continue;
    taken[best] = true;
    c.correlation[row] = kernels[best].correlation;
    ++linked;
  }
  return linked;
}

size_t LinkCollectivesToKernels(const common::WorkerTrace& cupti, common::WorkerTrace* nccl,
                                common::TimeNs tolerance_ns) {
  std::vector<CommKernelRef> kernels;
  AppendCommKernels(cupti, &kernels);
  return LinkCollectivesToKernels(std::move(kernels), nccl, tolerance_ns);
}

}  // namespace podscope::agent::probe
