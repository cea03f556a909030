#include "coordinator/analysis/top_kernels.h"

#include <algorithm>
#include <map>

namespace podscope::coordinator::analysis {
namespace {

void Add(KernelStats& s, TimeNs d) {
  s.min_ns = s.count == 0 ? d : std::min(s.min_ns, d);
  s.max_ns = std::max(s.max_ns, d);
  s.total_ns += d;
  ++s.count;
}

std::vector<KernelStats> Finish(std::map<std::string, KernelStats>& by_name, size_t limit) {
  std::vector<KernelStats> out;
  TimeNs total = 0;
  for (auto& [name, s] : by_name) total += s.total_ns;
  for (auto& [name, s] : by_name) {
    s.share = total > 0 ? static_cast<double>(s.total_ns) / static_cast<double>(total) : 0;
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const KernelStats& a, const KernelStats& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  if (limit > 0 && out.size() > limit) out.resize(limit);
  return out;
}

}  // namespace

KernelReport ComputeTopKernels(const common::CaptureView& capture, size_t limit) {
  KernelReport report;
  std::map<std::string, KernelStats> pod;
  for (size_t w = 0; w < capture.size(); ++w) {
    const common::WorkerTrace& trace = capture.worker(w);
    const common::KernelTable& k = trace.kernels;
    // Aggregate by name id first (cheap), then by string.
    std::map<common::NameId, KernelStats> by_id;
    for (size_t i = 0; i < k.size(); ++i) {
      if (k.kernel_class[i] == common::KernelClass::kSync) continue;
      KernelStats& s = by_id[k.name[i]];
      if (s.count == 0) s.kernel_class = std::string(common::KernelClassName(k.kernel_class[i]));
      Add(s, k.end[i] - k.start[i]);
    }
    std::map<std::string, KernelStats> by_name;
    for (auto& [id, s] : by_id) {
      s.name = std::string(trace.strings.Get(id));
      KernelStats& p = pod[s.name];
      if (p.count == 0) {
        p = s;
      } else {
        p.min_ns = std::min(p.min_ns, s.min_ns);
        p.max_ns = std::max(p.max_ns, s.max_ns);
        p.total_ns += s.total_ns;
        p.count += s.count;
      }
      by_name[s.name] = std::move(s);
    }
    report.workers.push_back(WorkerKernels{trace.info.rank, Finish(by_name, limit)});
  }
  report.pod = Finish(pod, limit);
  return report;
}

}  // namespace podscope::coordinator::analysis
