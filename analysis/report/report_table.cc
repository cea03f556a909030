#include "analysis/report/report_table.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <map>
#include <optional>
#include <string>

#include "common/str_util.h"
#include "fmt/format.h"

namespace podscope::analysis {
namespace {

using namespace analysis;

double Ms(TimeNs ns) { return static_cast<double>(ns) / 1e6; }

// An unknown figure is "—" in a table, never 0: `format` is fmt's, for one double.
std::string Known(const std::optional<double>& v, std::string_view format) {
  return v ? fmt::format(fmt::runtime(format), *v) : "—";
}
std::string KnownPercent(const std::optional<double>& share, std::string_view format) {
  return share ? fmt::format(fmt::runtime(format), 100 * *share) : "—";
}

std::string Truncate(std::string_view s, size_t n) {
  return s.size() <= n ? std::string(s) : std::string(s.substr(0, n - 3)) + "...";
}

}  // namespace

std::vector<std::string> ShortNames(const std::vector<std::string_view>& names, size_t width) {
  // What every C++ kernel name repeats says nothing: a leading "void " and anonymous namespaces.
  std::vector<std::string> plain;
  for (std::string_view name : names) {
    std::string s(name.starts_with("void ") ? name.substr(5) : name);
    for (size_t at; (at = s.find("(anonymous namespace)::")) != std::string::npos;) s.erase(at, 23);
    plain.push_back(std::move(s));
  }
  std::vector<std::string> out;
  for (const std::string& s : plain) out.push_back(Truncate(s, width));
  // Names cut to the same text keep a window from where they first differ: a head, then the
  // part around the first difference (a template argument, say) instead of what they share.
  std::map<std::string, std::vector<size_t>> same;
  for (size_t i = 0; i < out.size(); ++i) same[out[i]].push_back(i);
  auto shared_prefix = [](const std::string& a, const std::string& b) {
    size_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
    return k;
  };
  for (const auto& [text, group] : same) {
    if (group.size() < 2) continue;
    // The head all of them share, then for each name the window where it parts from the one
    // most like it.
    size_t group_common = plain[group[0]].size();
    for (size_t i : group)
      group_common = std::min(group_common, shared_prefix(plain[group[0]], plain[i]));
    const size_t head = std::min<size_t>(width / 3, group_common);
    for (size_t i : group) {
      const std::string& s = plain[i];
      if (s.size() <= width) continue;
      size_t common = 0;
      for (size_t j : group)
        if (j != i) common = std::max(common, shared_prefix(s, plain[j]));
      common = std::min(common, s.size());
      const size_t room = width - head - 3;
      // From the start of the identifier where they part ("TensorListMetadata<2>", not "2>"),
      // or a little before the difference when that identifier is too long to show it.
      size_t from = std::max(head, common);
      while (from > head && (std::isalnum(static_cast<unsigned char>(s[from - 1])) ||
                             s[from - 1] == '_' || s[from - 1] == '<'))
        --from;
      if (common - from + 8 > room) from = std::max(head, common - std::min<size_t>(common, 8));
      std::string window = s.substr(from, room);
      if (from + room < s.size()) window = window.substr(0, room - 3) + "...";
      out[i] = s.substr(0, head) + "..." + window;
    }
  }
  // Whatever is still the same is numbered.
  std::map<std::string, int> seen;
  for (std::string& s : out) {
    const int n = ++seen[s];
    if (n > 1) s = Truncate(s, width - 3 - std::to_string(n).size()) + " #" + std::to_string(n);
  }
  return out;
}

namespace {

// Live captures number steps from the job's own counter (11 digits and more): the tables show
// them relative to the capture's first step, which a line above the table names.
struct StepNumbers {
  int64_t base = -1;  // -1: shown as they are
  std::string operator()(int64_t step) const {
    return base < 0 ? std::to_string(step) : fmt::format("+{}", step - base);
  }
  std::string Note() const {
    return base < 0 ? ""
                    : fmt::format("(steps shown relative to the capture's first, step {})\n", base);
  }
};

StepNumbers NumbersFor(const AnalysisResults& results) {
  int64_t first = INT64_MAX;
  if (results.breakdown) {
    for (const WorkerBreakdown& w : *results.breakdown) {
      for (const StepBreakdown& s : w.steps) first = std::min(first, s.step);
    }
  }
  if (results.bandwidth) {
    for (const StepCollectiveTime& s : results.bandwidth->steps) first = std::min(first, s.step);
  }
  return StepNumbers{first != INT64_MAX && first >= 1'000'000 ? first : -1};
}

// Whether `--ranks` (or the API's ranks) keeps this rank in the tables.
bool RankShown(const AnalysisRequest& request, int32_t rank) {
  return request.ranks.empty() ||
         std::find(request.ranks.begin(), request.ranks.end(), rank) != request.ranks.end();
}

// A worker's own time in a step: its step time less what it spent waiting for the other ranks
// in collectives. In synchronous training every rank's step takes as long as the slowest one's,
// so step time ranks nothing; the rank the others wait for has the most time of its own.
TimeNs OwnTime(const StepBreakdown& s) { return s.span_ns - s.comm_wait_ns; }

// The workers a long table shows: those asked for, worst (most own time per step, mean) first, at
// most request.top_workers; `hidden` counts the others.
std::vector<const WorkerBreakdown*> Shown(const std::vector<WorkerBreakdown>& b,
                                          const AnalysisRequest& request, size_t* hidden) {
  std::vector<std::pair<TimeNs, const WorkerBreakdown*>> ranked;
  for (const WorkerBreakdown& w : b) {
    if (!RankShown(request, w.rank)) continue;
    TimeNs total = 0;
    for (const StepBreakdown& s : w.steps) total += OwnTime(s);
    ranked.emplace_back(w.steps.empty() ? 0 : total / static_cast<TimeNs>(w.steps.size()), &w);
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  const size_t keep =
      request.top_workers == 0 ? ranked.size() : std::min(ranked.size(), request.top_workers);
  *hidden = ranked.size() - keep;
  std::vector<const WorkerBreakdown*> out;
  for (size_t i = 0; i < keep; ++i) out.push_back(ranked[i].second);
  return out;
}

bool StepShown(int64_t step, const AnalysisRequest& request) {
  return (request.first_step < 0 || step >= request.first_step) &&
         (request.last_step < 0 || step <= request.last_step);
}

void MoreWorkers(std::string& out, size_t hidden) {
  if (hidden > 0)
    out += fmt::format("... {} more workers (--top 0 shows all, --ranks picks some)\n", hidden);
}

void Steps(std::string& out, const std::vector<WorkerBreakdown>& all,
           const AnalysisRequest& request, const StepNumbers& numbers) {
  size_t hidden = 0;
  const std::vector<const WorkerBreakdown*> b = Shown(all, request, &hidden);
  out +=
      "== steps: per-step breakdown (ms; the categories sum to the span; before = device idle "
      "since the "
      "previous step's span)\n";
  out +=
      fmt::format("{:>5} {:>7} {:>9} {:>9} {:>8} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}\n",
                  "rank", "step", "span", "compute", "overlap", "comm_wait", "comm_xfer", "memcpy",
                  "idle_in", "idle_lch", "idle_hst", "idle_oth", "before");
  for (const WorkerBreakdown* worker : b) {
    const WorkerBreakdown& w = *worker;
    for (const StepBreakdown& s : w.steps) {
      if (!StepShown(s.step, request)) continue;
      out += fmt::format(
          "{:>5} {:>7} {:>9.3f} {:>9.3f} {:>8.3f} {:>9.3f} {:>9.3f} {:>8.3f} {:>8.3f} {:>8.3f} "
          "{:>8.3f} {:>8.3f} {:>8.3f}\n",
          w.rank, numbers(s.step), Ms(s.span_ns), Ms(s.compute_ns), Ms(s.overlap_ns),
          Ms(s.comm_wait_ns), Ms(s.comm_transfer_ns), Ms(s.memcpy_ns), Ms(s.idle_input_ns),
          Ms(s.idle_launch_ns), Ms(s.idle_host_ns), Ms(s.idle_other_ns), Ms(s.before_ns));
    }
    if (w.steps.empty())
      out += fmt::format("{:>5} (no steps: {})\n", w.rank, StepSourceName(w.step_source));
  }
  MoreWorkers(out, hidden);
}

void Overlap(std::string& out, const std::vector<WorkerBreakdown>& all,
             const AnalysisRequest& request, const StepNumbers& numbers) {
  size_t hidden = 0;
  const std::vector<const WorkerBreakdown*> b = Shown(all, request, &hidden);
  // The PyTorch profiler's distributed view: computation and communication each without the
  // overlap, comm_kernels = overlap + communication, overlap% = overlap / comm_kernels.
  out +=
      "== overlap (ms): computation = computation kernels alone, communication = communication "
      "kernels alone "
      "(not hidden), comm_kernels = overlap + communication, overlap% = overlap / comm_kernels\n";
  out += fmt::format("{:>5} {:>7} {:>12} {:>14} {:>9} {:>13} {:>9}\n", "rank", "step",
                     "computation", "communication", "overlap", "comm_kernels", "overlap%");
  for (const WorkerBreakdown* w : b) {
    for (const StepBreakdown& s : w->steps) {
      if (!StepShown(s.step, request)) continue;
      out +=
          fmt::format("{:>5} {:>7} {:>12.3f} {:>14.3f} {:>9.3f} {:>13.3f} {:>9}\n", w->rank,
                      numbers(s.step), Ms(s.compute_ns), Ms(s.communication_ns), Ms(s.overlap_ns),
                      Ms(s.overlap_ns + s.communication_ns), Known(s.OverlapPercent(), "{:.2f}"));
    }
  }
  MoreWorkers(out, hidden);
}

// How arrivals were compared, in words, with the clock error bound when it is known.
std::string ClockWords(ClockBasis basis, TimeNs bound) {
  switch (basis) {
    case ClockBasis::kFittedModels:
      return fmt::format("aligned arrivals: fitted clock models, error bound {:.3f} ms", Ms(bound));
    case ClockBasis::kOneHost:
      return "aligned arrivals: one host's clock";
    case ClockBasis::kAsserted:
      return "arrivals taken as aligned (--clocks aligned); clock error bound unknown";
    case ClockBasis::kNotCompared:
      break;
  }
  return "clocks not comparable: min-duration fallback; pass --clocks aligned if the hosts' clocks "
         "are synchronised";
}

void Communication(std::string& out, const CommunicationReport& c) {
  out += fmt::format("== communication: wait vs transfer ({})\n",
                     ClockWords(c.clock_basis, c.clock_error_bound_ns));
  out += fmt::format("{:>5} {:>12} {:>10} {:>12} {:>7}\n", "rank", "collectives", "wait",
                     "transfer", "wait%");
  for (const auto& w : c.workers) {
    const TimeNs total = w.wait_ns + w.transfer_ns;
    out +=
        fmt::format("{:>5} {:>12} {:>10.3f} {:>12.3f} {:>7.1f}\n", w.rank, w.collectives,
                    Ms(w.wait_ns), Ms(w.transfer_ns), total > 0 ? 100.0 * w.wait_ns / total : 0.0);
  }
}

std::string LossMs(const std::optional<TimeNs>& loss) {
  return loss ? fmt::format("{:.3f} ms", Ms(*loss)) : "unknown";
}

void Stragglers(std::string& out, const StragglerReport& r) {
  out += fmt::format("== stragglers ({})\n", ClockWords(r.clock_basis, r.clock_error_bound_ns));
  if (r.stragglers.empty()) {
    out += fmt::format("no straggler found ({:.3f} ms of steps)\n", Ms(r.window_step_time_ns));
  } else {
    out += fmt::format(
        "step-time loss {} of {:.3f} ms of steps: the time saved had the stragglers arrived with "
        "the others\n",
        LossMs(r.step_time_loss_ns), Ms(r.window_step_time_ns));
    if (!r.loss_error.empty()) out += "  (" + r.loss_error + ")\n";
  }
  for (const Straggler& s : r.stragglers) {
    std::string steps;
    for (size_t i = 0; i < s.steps.size() && i < 12; ++i)
      steps += fmt::format("{}{}", i ? "," : "", s.steps[i]);
    if (s.steps.size() > 12) steps += ",...";
    out += fmt::format(
        "rank {}{}: step-time loss {}; caused delay {:.3f} ms (waiting it alone caused, the "
        "ranking "
        "signal), last to arrive in {:.0f}% of collectives, steps [{}] ({}, compute z={:.1f})\n",
        s.rank, s.host.empty() ? "" : " (" + s.host + ")", LossMs(s.step_time_loss_ns),
        Ms(s.caused_delay_ns), 100 * s.last_arriver_share, steps, s.reason, s.compute_z);
    out += fmt::format(
        "  extra time in {}: {:.3f} ms per step against {:.3f} ms on the median worker (+{:.3f} "
        "ms)\n",
        s.category, Ms(s.evidence.worker_ns), Ms(s.evidence.median_ns),
        Ms(s.evidence.worker_ns - s.evidence.median_ns));
    for (const NamedExcess& e : s.evidence.top) {
      out += fmt::format("    {}: {:.3f} ms per step against {:.3f} ms\n", Truncate(e.name, 72),
                         Ms(e.worker_ns), Ms(e.median_ns));
    }
    if (s.max_cpu_percent >= 0) {
      out += fmt::format("  host: max CPU {:.0f}%, min SM clock {} MHz, throttle reasons 0x{:x}\n",
                         s.max_cpu_percent, s.min_gpu_sm_clock_mhz, s.gpu_throttle_reasons);
    }
  }
  out +=
      fmt::format("total caused delay {:.3f} ms (summed over collectives; overstates the cost)\n",
                  Ms(r.total_caused_delay_ns));
}

void Summary(std::string& out, const SummaryReport& s) {
  out +=
      fmt::format("== summary: job {}, {} rank{}{}, {} step{} ({}..{}, from {})\n",
                  s.job.empty() ? "(unnamed)" : s.job, s.ranks, s.ranks == 1 ? "" : "s",
                  s.hosts > 0 ? fmt::format(" on {} host{}", s.hosts, s.hosts == 1 ? "" : "s") : "",
                  s.steps, s.steps == 1 ? "" : "s", s.first_step, s.last_step, s.step_source);
  // One median on this screen, the step time's p50; the rows are workers' means, and the total
  // is a sum (docs/analyses.md: "median worker").
  out += fmt::format(
      "step time (ms): min {:.3f}  p50 {:.3f}  p90 {:.3f}  max {:.3f} over every worker and step; "
      "{:.3f} ms in all on the median worker\n",
      Ms(s.step_min_ns), Ms(s.step_p50_ns), Ms(s.step_p90_ns), Ms(s.step_max_ns),
      Ms(s.window_step_time_ns));
  out += fmt::format("mean per step (ms)        {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8}\n",
                     "span", "compute", "overlap", "comm_wait", "comm_xfer", "memcpy", "idle",
                     "before");
  for (const auto& [label, p] :
       {std::pair<const char*, const WorkerProfile*>{"median worker", &s.median_worker},
        {s.worst_is_straggler ? "top straggler" : "slowest worker", &s.worst_worker}}) {
    out += fmt::format(
        "{:<14} rank {:<5}  {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>8.3f} {:>8.3f} "
        "{:>8.3f}\n",
        label, p->rank, Ms(p->span_ns), Ms(p->compute_ns), Ms(p->overlap_ns), Ms(p->comm_wait_ns),
        Ms(p->comm_transfer_ns), Ms(p->memcpy_ns), Ms(p->idle_ns), Ms(p->before_ns));
  }
  out += fmt::format(
      "exposed communication: {:.3f} ms per step on the median worker ({:.1f}% of its step); {}\n",
      Ms(s.exposed_communication_ns), 100 * s.exposed_communication_share,
      s.overlap_pct
          ? fmt::format("{:.1f}% of its communication hidden behind computation", *s.overlap_pct)
          : "no communication kernels to hide");
  if (s.straggler_count == 0) {
    out += "stragglers: none\n";
  } else {
    out += fmt::format("stragglers: {} (step-time loss {} of {:.3f} ms of steps)\n",
                       s.straggler_count, LossMs(s.step_time_loss_ns), Ms(s.window_step_time_ns));
    for (const Straggler& g : s.stragglers) {
      out += fmt::format("  rank {}{}: loss {}, caused delay {:.3f} ms, extra time in {} ({})\n",
                         g.rank, g.host.empty() ? "" : " (" + g.host + ")",
                         LossMs(g.step_time_loss_ns), Ms(g.caused_delay_ns), g.category, g.reason);
    }
    if (s.straggler_count > s.stragglers.size()) {
      out += fmt::format("  ... {} more (--report stragglers)\n",
                         s.straggler_count - s.stragglers.size());
    }
  }
  if (s.collectives == 0) {
    out += "collectives: none\n";
  } else {
    out += fmt::format("collectives: {}, median bus bandwidth {}", s.collectives,
                       Known(s.median_busbw_gbytes_per_s, "{:.1f} GB/s"));
    if (s.link_gbytes_per_s > 0) {
      out += fmt::format(", {} of the {:.0f} GB/s link",
                         KnownPercent(s.median_efficiency, "{:.0f}%"), s.link_gbytes_per_s);
    } else {
      out += " (--link-gbytes-per-s for efficiency)";
    }
    out += fmt::format("; {:.3f} ms of AllReduce per step", Ms(s.measured_allreduce_ns));
    if (s.expected_allreduce_ns)
      out += fmt::format(" (expected {:.3f} ms)", Ms(*s.expected_allreduce_ns));
    out += "\n";
  }
  out += fmt::format("warnings: {}\n",
                     s.warnings.empty() ? "none" : fmt::format("{} (above)", s.warnings.size()));
  out +=
      "more: --report "
      "overview|steps|pod|overlap|communication|stragglers|allreduce|kernels|gpu|operators|memory|"
      "input|temporal|all\n";
}

void Bandwidth(std::string& out, const BandwidthReport& r, const StepNumbers& numbers) {
  // Bytes in MB (1e6) throughout; bandwidth, the bus's and the link's, in GB/s (1e9 bytes/s).
  out +=
      "== allreduce: collective time and bandwidth per step (MB = 1e6 bytes; busbw in GB/s, "
      "bytes-weighted)\n";
  const bool link = r.link_gbytes_per_s > 0;
  out += fmt::format("{:>7} {:>12} {:>12} {:>14} {:>12} {:>10} {:>11}\n", "step", "allreduce_MB",
                     "allreduce_ms", "other_MB", "all_coll_ms", "busbw_GB/s",
                     link ? "efficiency%" : "");
  for (const StepCollectiveTime& s : r.steps) {
    const bool moved = s.bytes > 0;
    out += fmt::format("{:>7} {:>12.1f} {:>12.3f} {:>14.1f} {:>12.3f} {:>10} {:>11}\n",
                       numbers(s.step), s.allreduce_bytes / 1e6, Ms(s.allreduce_transfer_ns),
                       s.other_bytes / 1e6, Ms(s.transfer_ns),
                       moved ? fmt::format("{:.2f}", s.busbw_gbytes_per_s) : "—",
                       !link   ? ""
                       : moved ? fmt::format("{:.1f}", 100 * s.efficiency)
                               : "—");
  }
  if (!link) out += "(efficiency: give the link bandwidth with --link-gbytes-per-s)\n";
  // Every AllReduce counts: data-parallel gradients and tensor-parallel activations alike.
  out += fmt::format(
      "measured AllReduce transfer per step (median over steps, every AllReduce): {:.3f} ms\n",
      Ms(r.measured_allreduce_ns));
  if (r.expected_allreduce_ns) {
    out += fmt::format(
        "expected gradient AllReduce at {:.0f} GB/s (--params x --bytes-per-param): {:.3f} ms\n",
        r.link_gbytes_per_s, Ms(*r.expected_allreduce_ns));
  }
}

void Pod(std::string& out, const PodView& v, const AnalysisRequest& request,
         const StepNumbers& numbers) {
  out +=
      "== pod: step time per worker (ms), deviation from the median worker; worst first by own "
      "time (the step less its wait for other ranks: the rank the others wait for has the most)\n";
  for (const PodStep& s : v.steps) {
    out += fmt::format("step {} (median {:.3f} ms)\n", numbers(s.step), Ms(s.median_step_ns));
    // The steps report's categories: compute and communication alone, overlap apart.
    out += fmt::format("{:>7} {:>10} {:>10} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "rank",
                       "own", "step", "dev%", "compute", "overlap", "comm", "memcpy", "idle");
    std::vector<const PodRow*> rows;
    for (const PodRow& r : s.rows) {
      if (RankShown(request, r.rank)) {
        rows.push_back(&r);
      }
    }
    std::stable_sort(rows.begin(), rows.end(), [](const PodRow* a, const PodRow* b) {
      return OwnTime(a->breakdown) > OwnTime(b->breakdown);
    });
    const size_t keep =
        request.top_workers == 0 ? rows.size() : std::min(rows.size(), request.top_workers);
    for (size_t i = 0; i < keep; ++i) {
      const PodRow& r = *rows[i];
      const StepBreakdown& b = r.breakdown;
      out += fmt::format(
          "{:>7} {:>10.3f} {:>10.3f} {:>+8.2f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f}\n",
          r.rank, Ms(OwnTime(b)), Ms(r.step_ns), r.deviation_pct, Ms(b.compute_ns),
          Ms(b.overlap_ns), Ms(b.communication_ns), Ms(b.memcpy_ns),
          Ms(b.idle_input_ns + b.idle_launch_ns + b.idle_host_ns + b.idle_other_ns));
    }
    MoreWorkers(out, rows.size() - keep);
  }
}

// "12.3" for a fraction as a percentage, "-" when unknown.
std::string Percent(const std::optional<double>& v) {
  return v ? fmt::format("{:.1f}", 100 * *v) : "-";
}

// The names of a list, as its table shows them.
template <typename T, typename NameOf>
std::vector<std::string> ColumnNames(const std::vector<T>& rows, NameOf name_of, size_t width,
                                     bool wide) {
  std::vector<std::string_view> names;
  for (const T& row : rows) names.push_back(name_of(row));
  if (wide) return {names.begin(), names.end()};
  return ShortNames(names, width);
}

void Kernels(std::string& out, const KernelReport& r, bool wide) {
  const std::vector<std::string> names = ColumnNames(
      r.pod, [](const KernelStats& k) -> std::string_view { return k.name; }, 48, wide);
  out +=
      "== kernels: top kernels pod-wide (blk/SM: blocks per SM; occ%: Est. Achieved Occupancy; TC: "
      "Tensor Cores, f32: an FP32 GEMM on CUDA cores)\n";
  out += fmt::format("{:<48} {:>6} {:>8} {:>10} {:>10} {:>7} {:>7} {:>5} {:>3}\n", "name", "class",
                     "count", "total_ms", "mean_us", "share%", "blk/SM", "occ%", "TC");
  for (size_t i = 0; i < r.pod.size(); ++i) {
    const KernelStats& k = r.pod[i];
    out +=
        fmt::format("{:<48} {:>6} {:>8} {:>10.3f} {:>10.1f} {:>7.2f} {:>7} {:>5} {:>3}\n", names[i],
                    k.kernel_class.substr(0, 6), k.count, Ms(k.total_ns), k.mean_ns() / 1e3,
                    100 * k.share, k.blocks_per_sm ? fmt::format("{:.2f}", *k.blocks_per_sm) : "-",
                    Percent(k.achieved_occupancy),
                    k.tensor_core                      ? "yes"
                    : k.math == "fp32_gemm_cuda_cores" ? "f32"
                                                       : "no");
  }
  out += fmt::format("compute-kernel time on Tensor Cores: {:.1f}% ({:.3f} of {:.3f} ms)\n",
                     100 * r.tensor_cores.share(), Ms(r.tensor_cores.tensor_core_ns),
                     Ms(r.tensor_cores.compute_ns));
  if (r.tensor_cores.fp32_gemm_ns > 0) {
    out += fmt::format(
        "compute-kernel time in FP32 GEMMs on CUDA cores of GPUs with TF32 Tensor Cores: {:.1f}% "
        "({:.3f} ms)\n",
        100 * static_cast<double>(r.tensor_cores.fp32_gemm_ns) /
            static_cast<double>(r.tensor_cores.compute_ns),
        Ms(r.tensor_cores.fp32_gemm_ns));
  }
}

void Gpu(std::string& out, const GpuReport& r, const AnalysisRequest& request) {
  out += fmt::format(
      "== gpu: pod medians: GPU utilization {}%, Est. SM Efficiency {}%, Est. Achieved Occupancy "
      "{}%\n",
      Percent(r.pod.median_gpu_utilization), Percent(r.pod.median_sm_efficiency),
      Percent(r.pod.median_achieved_occupancy));
  out += "least utilized first\n";
  out += fmt::format("{:>7} {:<24} {:>6} {:>9} {:>9} {:>10} {:>10} {:>8}\n", "rank", "device",
                     "util%", "sm_eff%", "occ%", "busy_ms", "span_ms", "steps");
  std::vector<const WorkerGpu*> rows;
  for (const WorkerGpu& w : r.workers) {
    if (RankShown(request, w.rank)) {
      rows.push_back(&w);
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const WorkerGpu* a, const WorkerGpu* b) {
    return a->total.gpu_utilization < b->total.gpu_utilization;
  });
  const size_t keep =
      request.top_workers == 0 ? rows.size() : std::min(rows.size(), request.top_workers);
  size_t unknown = 0;
  for (size_t i = 0; i < keep; ++i) {
    const WorkerGpu& w = *rows[i];
    unknown += w.kernels_without_occupancy;
    out +=
        fmt::format("{:>7} {:<24} {:>6.1f} {:>9} {:>9} {:>10.3f} {:>10.3f} {:>8}\n", w.rank,
                    Truncate(w.device.empty() ? "-" : w.device, 24), 100 * w.total.gpu_utilization,
                    Percent(w.total.sm_efficiency), Percent(w.total.achieved_occupancy),
                    Ms(w.total.busy_ns), Ms(w.total.span_ns), w.steps.size());
  }
  MoreWorkers(out, rows.size() - keep);
  if (unknown > 0) {
    out += fmt::format(
        "({} kernels without a launch shape or device limits count as busy time only)\n", unknown);
  }
}

void Operators(std::string& out, const OperatorReport& r, bool wide) {
  const std::vector<std::string> names = ColumnNames(
      r.pod, [](const PodOperator& p) -> std::string_view { return p.stats.name; }, 40, wide);
  out +=
      "== operators: pod-wide, by device self time (host self: less child operators and CUDA "
      "calls)\n";
  out += fmt::format("{:<40} {:>8} {:>11} {:>11} {:>12} {:>11}  {}\n", "name", "calls", "host_ms",
                     "host_self", "device_ms", "dev_self", "costliest ranks (device ms)");
  for (size_t i = 0; i < r.pod.size(); ++i) {
    const PodOperator& p = r.pod[i];
    std::string costliest;
    for (const OperatorCost& c : p.costliest) {
      costliest += fmt::format("{}{} ({:.3f})", costliest.empty() ? "" : ", ", c.rank,
                               Ms(c.device_total_ns));
    }
    const OperatorStats& s = p.stats;
    out += fmt::format("{:<40} {:>8} {:>11.3f} {:>11.3f} {:>12.3f} {:>11.3f}  {}\n", names[i],
                       s.calls, Ms(s.host_total_ns), Ms(s.host_self_ns), Ms(s.device_total_ns),
                       Ms(s.device_self_ns), costliest);
  }
}

void Input(std::string& out, const InputReport& r, const AnalysisRequest& request) {
  out += fmt::format(
      "== input: device time waiting on the dataloader; median {}% of step time (input-bound above "
      "{:.0f}%, highly above "
      "{:.0f}%)\n",
      Percent(r.median_input_share), 100 * r.options.moderate_share, 100 * r.options.high_share);
  out += fmt::format("{:>7} {:>12} {:>12} {:>14} {:>8}  {}\n", "rank", "step_ms", "input_wait",
                     "dataloader_ms", "share%", "verdict");
  std::vector<const WorkerInput*> rows;
  for (const WorkerInput& w : r.workers) {
    if (RankShown(request, w.rank)) {
      rows.push_back(&w);
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const WorkerInput* a, const WorkerInput* b) {
    return a->input_share > b->input_share;
  });
  const size_t keep =
      request.top_workers == 0 ? rows.size() : std::min(rows.size(), request.top_workers);
  for (size_t i = 0; i < keep; ++i) {
    const WorkerInput& w = *rows[i];
    out += fmt::format("{:>7} {:>12.3f} {:>12.3f} {:>14.3f} {:>8.1f}  {}\n", w.rank, Ms(w.step_ns),
                       Ms(w.input_wait_ns), Ms(w.dataloader_ns), 100 * w.input_share,
                       InputVerdictName(w.verdict));
  }
  MoreWorkers(out, rows.size() - keep);
}

void Overview(std::string& out, const OverviewReport& o) {
  const PodBreakdown& b = o.breakdown;
  out += fmt::format("== overview: {} workers, {} steps; step time p50 {:.3f} ms, max {:.3f} ms\n",
                     o.workers, o.steps, Ms(o.step_p50_ns), Ms(o.step_max_ns));
  out += fmt::format(
      "step time (pod): compute {:.1f}%, overlap {:.1f}%, comm wait {:.1f}%, comm transfer "
      "{:.1f}%, memcpy "
      "{:.1f}%, idle: input {:.1f}%, launch {:.1f}%, host {:.1f}%, other {:.1f}%\n",
      100 * b.Share(b.compute_ns), 100 * b.Share(b.overlap_ns), 100 * b.Share(b.comm_wait_ns),
      100 * b.Share(b.comm_transfer_ns), 100 * b.Share(b.memcpy_ns), 100 * b.Share(b.idle_input_ns),
      100 * b.Share(b.idle_launch_ns), 100 * b.Share(b.idle_host_ns),
      100 * b.Share(b.idle_other_ns));
  out += fmt::format(
      "GPU (pod medians): utilization {}%, Est. SM Efficiency {}%, Est. Achieved Occupancy {}%; "
      "Tensor Cores {:.1f}% of compute-kernel time, FP32 GEMMs on CUDA cores {:.1f}% of kernel "
      "time\n",
      Percent(o.gpu.median_gpu_utilization), Percent(o.gpu.median_sm_efficiency),
      Percent(o.gpu.median_achieved_occupancy), 100 * o.tensor_core_share, 100 * o.fp32_gemm_share);
  if (!o.overlap_pct && !o.median_busbw_gbytes_per_s) {
    out +=
        fmt::format("communication: none; {}\n", common::Counted(o.straggler_count, "straggler"));
  } else {
    out += fmt::format(
        "communication (median worker): {:.1f}% of the step exposed, {} hidden; median bus "
        "bandwidth {}{}; {}\n",
        100 * o.exposed_communication_share, Known(o.overlap_pct, "{:.1f}%"),
        Known(o.median_busbw_gbytes_per_s, "{:.1f} GB/s"),
        o.link_gbytes_per_s > 0
            ? fmt::format(" ({} of the {:.0f} GB/s link)",
                          KnownPercent(o.median_efficiency, "{:.1f}%"), o.link_gbytes_per_s)
            : "",
        common::Counted(o.straggler_count, "straggler"));
  }
  for (const CommunicatorGroup& g : o.parallelism.groups) {
    out += fmt::format("  {} ({} ranks{}): {}, {:.1f} calls per step; {}\n",
                       g.communicators > 1
                           ? fmt::format("{} communicators like {}", g.communicators, g.example)
                           : g.example,
                       g.size, g.description.empty() ? "" : ", " + g.description,
                       ParallelismKindWords(g.kind), g.CallsPerStep(), g.reason);
  }
  if (o.cast_copy_share > 0) {
    out += fmt::format("dtype casts (aten::_to_copy): {:.1f}% of kernel time\n",
                       100 * *o.cast_copy_share);
  }
  if (o.recommendations.empty()) {
    out += "recommendations: none (no rule's threshold is crossed)\n";
    return;
  }
  out += "recommendations, most step time at stake first:\n";
  for (size_t i = 0; i < o.recommendations.size(); ++i) {
    const Recommendation& r = o.recommendations[i];
    out += fmt::format("{:>2}. {} [{}; {:.1f}% of step time at stake]\n", i + 1, r.title, r.rule,
                       100 * r.step_share);
    if (!r.subject.empty()) {
      out += fmt::format("    {}: {}\n", r.rule == "cast_copies" ? "operator" : "kernel",
                         Truncate(r.subject, 100));
    }
    out += fmt::format("    try: {}\n", r.advice);
    std::string evidence;
    for (const auto& [name, value] : r.evidence)
      evidence += fmt::format("{}{}={:.4g}", evidence.empty() ? "" : ", ", name, value);
    out += fmt::format("    evidence: {}\n", evidence);
  }
}

double GiB(int64_t bytes) { return static_cast<double>(bytes) / (1ll << 30); }

void Memory(std::string& out, const MemoryReport& r) {
  if (r.workers.empty()) {
    out += "== memory: no allocator events in this capture (PyTorch: profile_memory=True)\n";
    return;
  }
  if (const auto& n = r.nearest_oom) {
    out += fmt::format(
        "== memory: nearest to out of memory: rank {} device {}, peak {:.2f} of {:.2f} GiB ({:.2f} "
        "GiB free)\n",
        n->rank, n->device, GiB(n->peak_bytes), GiB(n->total_memory_bytes), GiB(n->headroom_bytes));
  } else {
    out += "== memory (device sizes unknown: no headroom)\n";
  }
  out += fmt::format("{:>7} {:>7} {:>9} {:>15} {:>15} {:>12}  {}\n", "rank", "device", "events",
                     "peak_alloc_GiB", "peak_rsrv_GiB", "free_GiB", "allocated most (MiB)");
  for (const WorkerMemory& w : r.workers) {
    std::string top;
    for (size_t i = 0; i < w.top_operators.size() && i < 3; ++i) {
      top += fmt::format("{}{} ({:.1f})", top.empty() ? "" : ", ",
                         Truncate(w.top_operators[i].name, 30),
                         static_cast<double>(w.top_operators[i].bytes) / (1 << 20));
    }
    for (const DeviceMemory& d : w.devices) {
      out += fmt::format(
          "{:>7} {:>7} {:>9} {:>15} {:>15} {:>12}  {}\n", w.rank,
          d.device < 0 ? "host" : std::to_string(d.device), d.events,
          d.peak_allocated_bytes >= 0 ? fmt::format("{:.3f}", GiB(d.peak_allocated_bytes)) : "-",
          d.peak_reserved_bytes >= 0 ? fmt::format("{:.3f}", GiB(d.peak_reserved_bytes)) : "-",
          d.headroom_bytes ? fmt::format("{:.3f}", GiB(*d.headroom_bytes)) : "-", top);
    }
  }
}

void Temporal(std::string& out, const TemporalReport& r) {
  out +=
      fmt::format("== temporal ({} window; ms)\n", r.window == WindowMode::kHta ? "HTA" : "steps");
  out += fmt::format("{:>5} {:>12} {:>10} {:>10} {:>12} {:>9}\n", "rank", "kernel_time", "idle",
                     "compute", "non_compute", "overlap%");
  for (const WorkerTemporal& t : r.workers) {
    out += fmt::format("{:>5} {:>12.3f} {:>10.3f} {:>10.3f} {:>12.3f} {:>9.2f}\n", t.rank,
                       Ms(t.kernel_time_ns), Ms(t.idle_ns), Ms(t.compute_ns), Ms(t.non_compute_ns),
                       t.overlap_pct);
  }
}

}  // namespace

std::string RenderTables(const common::CaptureView& capture, const AnalysisRequest& request,
                         const AnalysisResults& results) {
  std::string out;
  for (const std::string& warning : results.warnings) out += "warning: " + warning + "\n";
  const StepNumbers numbers = NumbersFor(results);
  for (const std::string& name : request.reports) {
    if (!out.empty()) out += '\n';
    if (name == "steps" || name == "overlap" || name == "pod" || name == "allreduce")
      out += numbers.Note();
    if (name == "summary") Summary(out, *results.summary);
    if (name == "steps") Steps(out, *results.breakdown, request, numbers);
    if (name == "overlap") Overlap(out, *results.breakdown, request, numbers);
    if (name == "communication") Communication(out, *results.communication);
    if (name == "stragglers") Stragglers(out, *results.stragglers);
    if (name == "allreduce") Bandwidth(out, *results.bandwidth, numbers);
    if (name == "pod") Pod(out, *results.pod, request, numbers);
    if (name == "kernels") Kernels(out, *results.kernels, request.wide_names);
    if (name == "gpu") Gpu(out, *results.gpu, request);
    if (name == "overview") Overview(out, *results.overview);
    if (name == "operators") Operators(out, *results.operators, request.wide_names);
    if (name == "memory") Memory(out, *results.memory);
    if (name == "input") Input(out, *results.input, request);
    if (name == "temporal") Temporal(out, *results.temporal);
  }
  return out;
}

}  // namespace podscope::analysis
