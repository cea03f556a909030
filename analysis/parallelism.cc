#include "analysis/parallelism.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>

#include "analysis/parallel_for.h"
#include "fmt/format.h"

namespace podscope::analysis {
namespace {

using common::CollectiveOp;

// A backward operator as PyTorch's profiler names them: the autograd engine's
// "autograd::engine::evaluate_function: MmBackward0", or the node itself ("MmBackward0", a
// custom Function's "...Backward").
bool IsBackwardName(std::string_view name) {
  return name.starts_with("autograd::engine::evaluate_function") ||
         name.find("Backward") != std::string_view::npos;
}

bool IsReduction(CollectiveOp op) {
  return op == CollectiveOp::kAllReduce || op == CollectiveOp::kReduceScatter ||
         op == CollectiveOp::kReduce;
}

// Index of the step whose host span holds `t`, or -1.
int32_t StepAt(const std::vector<StepSpan>& steps, TimeNs t) {
  auto it = std::upper_bound(steps.begin(), steps.end(), t,
                             [](TimeNs v, const StepSpan& s) { return v < s.host.start; });
  if (it == steps.begin()) return -1;
  --it;
  return t < it->host.end ? static_cast<int32_t>(it - steps.begin()) : -1;
}

// Where a worker's backward operators are: per step, the first one's start and the last one's
// end, and every backward span, to tell a call inside one.
class BackwardPass {
 public:
  BackwardPass(const common::WorkerTrace& trace, const WorkerSteps& steps)
      : steps_(steps.steps),
        first_(steps.steps.size(), INT64_MAX),
        last_end_(steps.steps.size(), INT64_MIN) {
    if (steps_.empty()) return;
    const common::HostSpanTable& h = trace.host_spans;
    // Whether each name is a backward operator's, decided once per name.
    std::vector<int8_t> backward(trace.strings.size(), -1);
    for (size_t i = 0; i < h.size(); ++i) {
      const common::NameId id = h.name[i];
      if (id >= backward.size()) continue;
      if (backward[id] < 0) backward[id] = IsBackwardName(trace.strings.Get(id)) ? 1 : 0;
      if (backward[id] == 0) continue;
      spans_.push_back({h.start[i], h.end[i]});
      const int32_t s = StepAt(steps_, h.start[i]);
      if (s < 0) continue;
      first_[s] = std::min(first_[s], h.start[i]);
      last_end_[s] = std::max(last_end_[s], h.end[i]);
    }
    std::sort(spans_.begin(), spans_.end(),
              [](const Interval& a, const Interval& b) { return a.start < b.start; });
    reach_.resize(spans_.size());
    TimeNs reach = INT64_MIN;
    for (size_t i = 0; i < spans_.size(); ++i) reach_[i] = reach = std::max(reach, spans_[i].end);
  }

  enum class Pass : uint8_t { kUnknown, kForward, kBackward };

  Pass At(TimeNs t) const {
    const int32_t s = StepAt(steps_, t);
    if (s < 0 || first_[s] == INT64_MAX) return Pass::kUnknown;
    if (Inside(t) || t >= last_end_[s]) return Pass::kBackward;
    return Pass::kForward;
  }

 private:
  // Whether a backward span holds `t`: the latest span starting at or before it, or one before
  // that reaching past it.
  bool Inside(TimeNs t) const {
    auto it = std::upper_bound(spans_.begin(), spans_.end(), t,
                               [](TimeNs v, const Interval& a) { return v < a.start; });
    if (it == spans_.begin()) return false;
    return reach_[static_cast<size_t>(it - spans_.begin()) - 1] > t;
  }

  const std::vector<StepSpan>& steps_;
  std::vector<TimeNs> first_, last_end_;
  std::vector<Interval> spans_;  // by start
  std::vector<TimeNs> reach_;    // the latest end among spans_[0..i]
};

// The union of a worker's compute kernels, in one pass over its kernels (sorted by start).
IntervalSet ComputeKernels(const common::KernelTable& k) {
  IntervalSet out;
  for (size_t i = 0; i < k.size(); ++i) {
    if (k.kernel_class[i] != common::KernelClass::kCompute || k.end[i] <= k.start[i]) continue;
    if (!out.empty() && k.start[i] <= out.back().end) {
      out.back().end = std::max(out.back().end, k.end[i]);
    } else {
      out.push_back({k.start[i], k.end[i]});
    }
  }
  return out;
}

// How much of [start, end) no interval of `set` covers.
TimeNs Uncovered(const IntervalSet& set, TimeNs start, TimeNs end) {
  TimeNs covered = 0;
  auto it = std::upper_bound(set.begin(), set.end(), start,
                             [](TimeNs v, const Interval& a) { return v < a.end; });
  for (; it != set.end() && it->start < end; ++it)
    covered += std::min(end, it->end) - std::max(start, it->start);
  return end - start - covered;
}

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// The kind a process group's description names, or kUnknown. Megatron-LM describes its groups
// as TENSOR_MODEL_PARALLEL_GROUP, PIPELINE_MODEL_PARALLEL_GROUP, DATA_PARALLEL_GROUP,
// EXPERT_MODEL_PARALLEL_GROUP, CONTEXT_PARALLEL_GROUP; others use tp/pp/dp/ep/cp in names such
// as "tp_group".
ParallelismKind KindFromDescription(std::string_view description) {
  const std::string upper = Upper(description);
  bool tp = upper.find("TENSOR") != std::string::npos;
  bool pp = upper.find("PIPELINE") != std::string::npos;
  bool ep = upper.find("EXPERT") != std::string::npos || upper.find("MOE") != std::string::npos;
  bool dp = upper.find("DATA_PARALLEL") != std::string::npos;
  bool cp = upper.find("CONTEXT") != std::string::npos;
  for (size_t at = 0; at <= upper.size();) {
    const size_t end = std::min(upper.find_first_of("_-. :/", at), upper.size());
    const std::string_view token = std::string_view(upper).substr(at, end - at);
    tp |= token == "TP";
    pp |= token == "PP";
    ep |= token == "EP";
    dp |= token == "DP";
    cp |= token == "CP";
    at = end + 1;
  }
  // A group named for two kinds (Megatron's "expert tensor parallel") is decided by its calls.
  if (tp + pp + ep + dp + cp != 1) return ParallelismKind::kUnknown;
  if (cp) return ParallelismKind::kContextParallel;
  if (tp) return ParallelismKind::kTensorParallel;
  if (pp) return ParallelismKind::kPipelineParallel;
  if (ep) return ParallelismKind::kAllToAll;
  return ParallelismKind::kDataParallel;
}

std::string MiB(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  return b >= (1 << 30) ? fmt::format("{:.1f} GiB", b / (1 << 30))
                        : fmt::format("{:.1f} MiB", b / (1 << 20));
}

// What the calls alone say (rules 2 and 3 of the header).
void ClassifyByCalls(CommunicatorUse& u) {
  const auto calls = [&u](CollectiveOp op) { return u.calls_by_op[static_cast<size_t>(op)]; };
  const uint64_t p2p =
      calls(CollectiveOp::kSend) + calls(CollectiveOp::kRecv) + calls(CollectiveOp::kSendRecv);
  if (u.calls > 0 && p2p * 10 >= u.calls * 9) {
    u.kind = ParallelismKind::kPipelineParallel;
    u.reason = "point-to-point transfers (Send/Recv) only";
    return;
  }
  if (u.calls > 0 && calls(CollectiveOp::kAllToAll) * 2 >= u.calls) {
    u.kind = ParallelismKind::kAllToAll;
    u.reason =
        fmt::format("{} of its {} calls are AllToAll", calls(CollectiveOp::kAllToAll), u.calls);
    return;
  }
  if (u.forward_calls + u.backward_calls == 0) {
    u.kind = ParallelismKind::kUnknown;
    u.reason =
        "the trace shows no backward operators in its steps, so the pass of its calls is "
        "unknown";
    return;
  }
  // A tenth of the reduced bytes in the forward pass: a scalar AllReduce of the loss there does
  // not make gradient reduction tensor-parallel.
  if (u.reduce_bytes > 0 && u.forward_reduce_bytes * 10 >= u.reduce_bytes) {
    u.kind = ParallelismKind::kTensorParallel;
    u.reason = fmt::format("{} of its {} of reductions are called in the forward pass",
                           MiB(u.forward_reduce_bytes), MiB(u.reduce_bytes));
    return;
  }
  // FSDP gathers every parameter in the forward pass and reduce-scatters every gradient in the
  // backward: forward gathers of the order of the reduce-scatters. An AllGather of features
  // (SyncBatchNorm, a contrastive loss) beside an AllReduce of gradients is far from that.
  if (u.reduce_scatter_bytes > 0 && u.forward_gather_bytes * 4 >= u.reduce_scatter_bytes) {
    u.kind = ParallelismKind::kShardedDataParallel;
    u.reason =
        fmt::format("AllGathers in the forward pass ({}), reductions only in the backward pass",
                    MiB(u.forward_gather_bytes));
    return;
  }
  if (u.reduce_bytes > 0) {
    u.kind = ParallelismKind::kDataParallel;
    u.reason = "reductions only in the backward pass";
    return;
  }
  u.kind = ParallelismKind::kUnknown;
  u.reason = "no reductions, point-to-point or all-to-all calls to judge by";
}

void Classify(CommunicatorUse& u) {
  const ParallelismKind named = KindFromDescription(u.description);
  if (named == ParallelismKind::kUnknown) {
    ClassifyByCalls(u);
    return;
  }
  u.kind = named;
  u.reason = fmt::format("its process group is described as \"{}\"", u.description);
  // A data-parallel group that gathers parameters in the forward pass shards them.
  if (named == ParallelismKind::kDataParallel && u.reduce_scatter_bytes > 0 &&
      u.forward_gather_bytes * 4 >= u.reduce_scatter_bytes) {
    u.kind = ParallelismKind::kShardedDataParallel;
    u.reason += fmt::format(", and it gathers {} in the forward pass", MiB(u.forward_gather_bytes));
  }
}

}  // namespace

std::string_view ParallelismKindName(ParallelismKind kind) {
  switch (kind) {
    case ParallelismKind::kDataParallel:
      return "data_parallel";
    case ParallelismKind::kShardedDataParallel:
      return "sharded_data_parallel";
    case ParallelismKind::kTensorParallel:
      return "tensor_parallel";
    case ParallelismKind::kPipelineParallel:
      return "pipeline_parallel";
    case ParallelismKind::kAllToAll:
      return "all_to_all";
    case ParallelismKind::kContextParallel:
      return "context_parallel";
    case ParallelismKind::kUnknown:
      break;
  }
  return "unknown";
}

std::string_view ParallelismKindWords(ParallelismKind kind) {
  switch (kind) {
    case ParallelismKind::kDataParallel:
      return "data-parallel";
    case ParallelismKind::kShardedDataParallel:
      return "sharded data-parallel";
    case ParallelismKind::kTensorParallel:
      return "tensor-parallel";
    case ParallelismKind::kPipelineParallel:
      return "pipeline-parallel";
    case ParallelismKind::kAllToAll:
      return "all-to-all";
    case ParallelismKind::kContextParallel:
      return "context-parallel";
    case ParallelismKind::kUnknown:
      break;
  }
  return "unclassified";
}

std::vector<CommunicatorUse> ComputeWorkerCommunicators(const common::WorkerTrace& trace,
                                                        const WorkerSteps& steps) {
  const common::CollectiveTable& c = trace.collectives;
  if (c.size() == 0) return {};
  const BackwardPass passes(trace, steps);
  const IntervalSet compute = ComputeKernels(trace.kernels);
  std::map<common::NameId, CommunicatorUse> by_name;
  for (size_t i = 0; i < c.size(); ++i) {
    CommunicatorUse& u = by_name[c.communicator[i]];
    if (u.calls == 0) {
      u.communicator = trace.strings.Get(c.communicator[i]);
      u.members = {trace.info.rank};
      u.member_steps = steps.steps.size();
      if (u.communicator.starts_with("pg:")) {
        const std::string_view group = std::string_view(u.communicator).substr(3);
        for (const common::ProcessGroupInfo& g : trace.info.process_groups) {
          if (g.name == group) u.description = g.description;
        }
      }
    }
    u.size = std::max(u.size, c.nranks[i]);
    ++u.calls;
    u.bytes += c.bytes[i];
    if (c.kernel_end[i] > c.kernel_start[i]) {
      u.kernel_ns += c.kernel_end[i] - c.kernel_start[i];
      u.exposed_ns += Uncovered(compute, c.kernel_start[i], c.kernel_end[i]);
    }
    const auto op = static_cast<size_t>(c.op[i]);
    if (op < u.calls_by_op.size()) ++u.calls_by_op[op];
    // An enqueue equal to the kernel's start is the device's time, taken where the trace linked
    // no launch: it cannot be compared with the host's operators.
    const BackwardPass::Pass pass =
        c.enqueue[i] == c.kernel_start[i] ? BackwardPass::Pass::kUnknown : passes.At(c.enqueue[i]);
    const bool forward = pass == BackwardPass::Pass::kForward;
    (pass == BackwardPass::Pass::kUnknown ? u.unknown_pass_calls
     : forward                            ? u.forward_calls
                                          : u.backward_calls) += 1;
    if (IsReduction(c.op[i])) {
      u.reduce_bytes += c.bytes[i];
      if (forward) u.forward_reduce_bytes += c.bytes[i];
      if (c.op[i] == CollectiveOp::kReduceScatter) u.reduce_scatter_bytes += c.bytes[i];
    } else if (c.op[i] == CollectiveOp::kAllGather) {
      u.gather_bytes += c.bytes[i];
      if (forward) u.forward_gather_bytes += c.bytes[i];
    }
  }
  std::vector<CommunicatorUse> out;
  out.reserve(by_name.size());
  for (auto& [id, use] : by_name) out.push_back(std::move(use));
  return out;
}

ParallelismReport FinishParallelism(std::vector<std::vector<CommunicatorUse>> workers) {
  std::map<std::string, CommunicatorUse> pod;
  for (std::vector<CommunicatorUse>& uses : workers) {
    for (CommunicatorUse& u : uses) {
      auto [it, added] = pod.try_emplace(u.communicator);
      CommunicatorUse& p = it->second;
      if (added) {
        p = std::move(u);
        continue;
      }
      if (p.description.empty()) p.description = u.description;
      p.size = std::max(p.size, u.size);
      p.members.insert(p.members.end(), u.members.begin(), u.members.end());
      p.calls += u.calls;
      p.bytes += u.bytes;
      p.kernel_ns += u.kernel_ns;
      p.exposed_ns += u.exposed_ns;
      p.member_steps += u.member_steps;
      for (size_t op = 0; op < p.calls_by_op.size(); ++op) p.calls_by_op[op] += u.calls_by_op[op];
      p.forward_calls += u.forward_calls;
      p.backward_calls += u.backward_calls;
      p.unknown_pass_calls += u.unknown_pass_calls;
      p.reduce_bytes += u.reduce_bytes;
      p.forward_reduce_bytes += u.forward_reduce_bytes;
      p.gather_bytes += u.gather_bytes;
      p.forward_gather_bytes += u.forward_gather_bytes;
      p.reduce_scatter_bytes += u.reduce_scatter_bytes;
    }
  }
  ParallelismReport report;
  std::map<ParallelismKind, TimeNs> exposed_by_kind;
  TimeNs total = 0;
  for (auto& [name, use] : pod) {
    std::sort(use.members.begin(), use.members.end());
    use.members.erase(std::unique(use.members.begin(), use.members.end()), use.members.end());
    Classify(use);
    exposed_by_kind[use.kind] += use.exposed_ns;
    total += use.exposed_ns;
    report.communicators.push_back(std::move(use));
  }
  std::stable_sort(report.communicators.begin(), report.communicators.end(),
                   [](const CommunicatorUse& a, const CommunicatorUse& b) {
                     return a.exposed_ns != b.exposed_ns ? a.exposed_ns > b.exposed_ns
                                                         : a.kernel_ns > b.kernel_ns;
                   });
  TimeNs most = -1;
  for (const auto& [kind, ns] : exposed_by_kind) {
    if (ns > most) {
      most = ns;
      report.dominant = kind;
    }
  }
  report.dominant_share =
      total > 0 ? static_cast<double>(most) / static_cast<double>(total) : (pod.empty() ? 0 : 1);
  // Groups, in the order of their largest communicator.
  std::map<std::tuple<ParallelismKind, std::string, int32_t>, size_t> group_of;
  for (const CommunicatorUse& c : report.communicators) {
    auto [it, added] = group_of.try_emplace({c.kind, c.description, c.size}, report.groups.size());
    if (added) {
      report.groups.push_back({.kind = c.kind,
                               .description = c.description,
                               .size = c.size,
                               .example = c.communicator,
                               .reason = c.reason});
    }
    CommunicatorGroup& g = report.groups[it->second];
    ++g.communicators;
    g.calls += c.calls;
    g.member_steps += c.member_steps;
    g.kernel_ns += c.kernel_ns;
    g.exposed_ns += c.exposed_ns;
  }
  std::stable_sort(report.groups.begin(), report.groups.end(),
                   [](const CommunicatorGroup& a, const CommunicatorGroup& b) {
                     return a.exposed_ns > b.exposed_ns;
                   });
  return report;
}

ParallelismReport ComputeParallelism(const common::CaptureView& capture,
                                     const std::vector<WorkerSteps>& steps) {
  std::vector<std::vector<CommunicatorUse>> workers(capture.size());
  ParallelFor(capture.size(), [&](size_t w) {
    workers[w] =
        ComputeWorkerCommunicators(capture.worker(w), w < steps.size() ? steps[w] : WorkerSteps());
  });
  return FinishParallelism(std::move(workers));
}

}  // namespace podscope::analysis
