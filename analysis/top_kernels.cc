#include "analysis/top_kernels.h"

#include <algorithm>
#include <map>

#include "analysis/occupancy.h"
#include "analysis/tensor_cores.h"

namespace podscope::analysis {
namespace {

void AddKernel(KernelStats& s, TimeNs d, const std::optional<Occupancy>& occupancy) {
  s.min_ns = s.count == 0 ? d : std::min(s.min_ns, d);
  s.max_ns = std::max(s.max_ns, d);
  s.total_ns += d;
  ++s.count;
  if (occupancy && occupancy->limiter != OccupancyLimiter::kInvalid) {
    s.known_ns += d;
    s.blocks_weighted_ns += occupancy->blocks_per_sm * static_cast<double>(d);
    s.occupancy_weighted_ns += occupancy->achieved * static_cast<double>(d);
  }
}

void Merge(KernelStats& into, const KernelStats& s) {
  if (into.count == 0) {
    into = s;
    return;
  }
  into.min_ns = std::min(into.min_ns, s.min_ns);
  into.max_ns = std::max(into.max_ns, s.max_ns);
  into.total_ns += s.total_ns;
  into.count += s.count;
  into.known_ns += s.known_ns;
  into.blocks_weighted_ns += s.blocks_weighted_ns;
  into.occupancy_weighted_ns += s.occupancy_weighted_ns;
  into.fp32_gemm_ns += s.fp32_gemm_ns;
}

std::vector<KernelStats> Ranked(std::map<std::string, KernelStats>& by_name, size_t limit) {
  std::vector<KernelStats> out;
  TimeNs total = 0;
  for (auto& [name, s] : by_name) total += s.total_ns;
  for (auto& [name, s] : by_name) {
    s.share = total > 0 ? static_cast<double>(s.total_ns) / static_cast<double>(total) : 0;
    s.Finish();
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const KernelStats& a, const KernelStats& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  if (limit > 0 && out.size() > limit) out.resize(limit);
  return out;
}

}  // namespace

void KernelStats::Finish() {
  if (known_ns <= 0) return;
  blocks_per_sm = blocks_weighted_ns / static_cast<double>(known_ns);
  achieved_occupancy = occupancy_weighted_ns / static_cast<double>(known_ns);
}

KernelReport ComputeTopKernels(const common::CaptureView& capture, size_t limit) {
  KernelFold fold(limit);
  for (size_t w = 0; w < capture.size(); ++w) fold.Add(capture.worker(w));
  return fold.Finish();
}

void KernelFold::Add(const common::WorkerTrace& trace) {
  const common::KernelTable& k = trace.kernels;
  const WorkerOccupancy occupancy(trace.info);
  // Aggregate by name id first (cheap), then by string.
  std::map<common::NameId, KernelStats> by_id;
  for (size_t i = 0; i < k.size(); ++i) {
    if (k.kernel_class[i] == common::KernelClass::kSync) continue;
    KernelStats& s = by_id[k.name[i]];
    if (s.count == 0) s.kernel_class = std::string(common::KernelClassName(k.kernel_class[i]));
    AddKernel(s, k.end[i] - k.start[i], occupancy.ForKernel(k, i));
  }
  std::map<std::string, KernelStats> by_name;
  TensorCoreTime tensor_cores;
  const int32_t compute_major =
      trace.info.devices.empty() ? 0 : trace.info.devices.front().compute_major;
  for (auto& [id, s] : by_id) {
    s.name = std::string(trace.strings.Get(id));
    const KernelMathResult math = ClassifyKernelMath(s.name);
    s.tensor_core = math.math == KernelMath::kTensorCores;
    s.math = std::string(KernelMathName(math.math));
    s.math_rule = std::string(math.rule);
    s.library = IsLibraryKernel(s.name);
    tensor_cores.kernel_ns += s.total_ns;
    if (s.kernel_class == common::KernelClassName(common::KernelClass::kCompute)) {
      tensor_cores.compute_ns += s.total_ns;
      if (s.tensor_core) tensor_cores.tensor_core_ns += s.total_ns;
      if (math.math == KernelMath::kFp32GemmCudaCores &&
          HasTf32TensorCores(compute_major, s.name)) {
        tensor_cores.fp32_gemm_ns += s.total_ns;
        s.fp32_gemm_ns = s.total_ns;
      }
    }
    Merge(pod_[s.name], s);
    Merge(by_name[s.name], s);
  }
  report_.tensor_cores.compute_ns += tensor_cores.compute_ns;
  report_.tensor_cores.tensor_core_ns += tensor_cores.tensor_core_ns;
  report_.tensor_cores.fp32_gemm_ns += tensor_cores.fp32_gemm_ns;
  report_.tensor_cores.kernel_ns += tensor_cores.kernel_ns;
  report_.workers.push_back(WorkerKernels{trace.info.rank, Ranked(by_name, limit_), tensor_cores});
}

KernelReport KernelFold::Finish() {
  TimeNs most = 0;
  for (const auto& [name, s] : pod_) {
    if (s.fp32_gemm_ns > most) {
      most = s.fp32_gemm_ns;
      report_.hottest_fp32_gemm = name;
    }
  }
  report_.pod = Ranked(pod_, limit_);
  return std::move(report_);
}

}  // namespace podscope::analysis
