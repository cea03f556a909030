#include "analysis/overview.h"

#include <algorithm>

#include "fmt/format.h"

namespace podscope::analysis {
namespace {

std::string Pct(double fraction) { return fmt::format("{:.1f}%", 100 * fraction); }
std::string MsText(double ns) { return fmt::format("{:.3f} ms", ns / 1e6); }

PodBreakdown SumBreakdown(const std::vector<WorkerBreakdown>& breakdown) {
  PodBreakdown b;
  for (const WorkerBreakdown& w : breakdown) {
    for (const StepBreakdown& s : w.steps) {
      b.step_ns += s.span_ns + s.before_ns;
      b.compute_ns += s.compute_ns;
      b.overlap_ns += s.overlap_ns;
      b.comm_wait_ns += s.comm_wait_ns;
      b.comm_transfer_ns += s.comm_transfer_ns;
      b.memcpy_ns += s.memcpy_ns;
      b.idle_input_ns += s.idle_input_ns + s.before_input_ns;
      b.idle_launch_ns += s.idle_launch_ns + s.before_launch_ns;
      b.idle_host_ns += s.idle_host_ns + s.before_host_ns;
      b.idle_other_ns += s.idle_other_ns + s.before_other_ns;
    }
  }
  return b;
}

// What to try for a straggler, by the category its extra time went to (stragglers.h).
std::string StragglerAdvice(const std::string& category) {
  if (category.starts_with("compute")) {
    return "its GPU computes slower: check its clocks, temperature and power capping (nvidia-smi "
           "-q -d PERFORMANCE), "
           "and whether it gets more work than the others (uneven batches or sequence lengths)";
  }
  if (category == "idle_input")
    return "its dataloader is slow: that host's CPU, disk or network, or its share of the data";
  if (category == "idle_launch")
    return "its host launches kernels late: CPU contention or throttling on that host";
  if (category == "idle_host")
    return "its host is busy between kernels: other processes on that host, or Python work only it "
           "does";
  if (category == "comm_transfer")
    return "its transfers are slow: check that node's network link and NCCL's path for it";
  if (category == "memcpy")
    return "its copies are slow: pinned memory, and the PCIe link of that GPU";
  return "compare its trace with a healthy rank's (podscope export --ranks) around the steps it "
         "delayed";
}

// The stragglers the overview names: those whose loss (else caused delay) is at least
// straggler_share of the step time. Advice that points at "the straggler" points at these.
std::vector<const Straggler*> NamedStragglers(const SummaryReport& s, const OverviewOptions& opt) {
  std::vector<const Straggler*> out;
  const double window = static_cast<double>(s.window_step_time_ns);
  for (const Straggler& g : s.stragglers) {
    const double loss = static_cast<double>(g.step_time_loss_ns.value_or(g.caused_delay_ns));
    if (window > 0 && loss / window >= opt.straggler_share) out.push_back(&g);
  }
  return out;
}

void LowUtilization(const OverviewReport& o, const OverviewOptions& opt,
                    std::vector<Recommendation>& out) {
  if (!o.gpu.median_gpu_utilization || *o.gpu.median_gpu_utilization >= opt.low_utilization) return;
  const double u = *o.gpu.median_gpu_utilization;
  const PodBreakdown& b = o.breakdown;
  Recommendation r{
      .rule = "low_gpu_utilization",
      .title = fmt::format("The GPUs run no kernel {} of the step time (median GPU utilization {})",
                           Pct(1 - u), Pct(u)),
      .advice =
          "Give each GPU more work per kernel (a larger batch per GPU), and remove what the device "
          "waits "
          "on: the idle time splits into input, launch, host and other below, each with its own "
          "remedy",
      .step_share = 1 - u,
      .evidence = {{"median_gpu_utilization", u},
                   {"idle_input_share", b.Share(b.idle_input_ns)},
                   {"idle_launch_share", b.Share(b.idle_launch_ns)},
                   {"idle_host_share", b.Share(b.idle_host_ns)},
                   {"idle_other_share", b.Share(b.idle_other_ns)}},
      .ranks = o.gpu.least_utilized};
  out.push_back(std::move(r));
}

void LaunchBound(const OverviewReport& o, const GpuReport& gpu, const OverviewOptions& opt,
                 std::vector<Recommendation>& out) {
  const double share = o.breakdown.Share(o.breakdown.idle_launch_ns);
  if (share < opt.launch_share) return;
  uint64_t kernels = 0, steps = 0;
  TimeNs busy = 0;
  for (const WorkerGpu& w : gpu.workers) {
    kernels += w.kernels;
    steps += w.steps.size();
    busy += w.total.busy_ns;
  }
  out.push_back(
      {.rule = "launch_bound",
       .title = fmt::format("Launch-bound: the device waits on kernel launches {} of the step time",
                            Pct(share)),
       .advice = "Capture the step in CUDA graphs (torch.compile with mode=\"reduce-overhead\", or "
                 "torch.cuda.graphs), fuse small kernels, and keep the launching thread free of "
                 "other work",
       .step_share = share,
       .evidence = {{"idle_launch_share", share},
                    {"kernels_per_step",
                     steps ? static_cast<double>(kernels) / static_cast<double>(steps) : 0},
                    {"mean_kernel_busy_ns",
                     kernels ? static_cast<double>(busy) / static_cast<double>(kernels) : 0}}});
}

void InputBound(const InputReport& input, std::vector<Recommendation>& out) {
  if (input.input_bound.empty()) return;
  const WorkerInput* worst = nullptr;
  for (const WorkerInput& w : input.workers) {
    if (w.rank == input.input_bound.front()) worst = &w;
  }
  if (worst == nullptr) return;
  out.push_back(
      {.rule = "input_bound",
       .title = fmt::format(
           "Input-bound: rank {} waits on its dataloader {} of its step time ({} of {} workers "
           "input-bound)",
           worst->rank, Pct(worst->input_share), input.input_bound.size(), input.workers.size()),
       .advice = "More DataLoader workers (num_workers), pin_memory=True, a larger "
                 "prefetch_factor, and data "
                 "decoded and cached ahead; check the CPU of the hosts named",
       .step_share = worst->input_share,
       .evidence = {{"input_share", worst->input_share},
                    {"median_input_share", input.median_input_share.value_or(0)},
                    {"input_bound_workers", static_cast<double>(input.input_bound.size())}},
       .ranks = input.input_bound});
}

// What hides or shortens exposed communication, by what the collectives are for.
std::string CommunicationAdvice(ParallelismKind kind) {
  switch (kind) {
    case ParallelismKind::kDataParallel:
      return "Start gradient reductions earlier in the backward pass: smaller DDP buckets "
             "(bucket_cap_mb), gradient_as_bucket_view=True, and no work that serialises the "
             "communication stream; or reduce less often, accumulating gradients over "
             "micro-batches under no_sync()";
    case ParallelismKind::kShardedDataParallel:
      return "Prefetch the parameter AllGathers: FSDP forward_prefetch=True and "
             "backward_prefetch=BACKWARD_PRE (ZeRO-3: overlap_comm and a larger prefetch bucket), "
             "and larger wrapping units so fewer, larger collectives run";
    case ParallelismKind::kTensorParallel:
      return "Tensor-parallel collectives sit on every layer's critical path, forward and "
             "backward, and cannot hide behind gradient computation: keep the tensor-parallel "
             "group inside one NVLink domain, overlap them with the layer's GEMMs (sequence "
             "parallelism with Megatron's --tp-comm-overlap, Transformer Engine), or use a "
             "smaller tensor-parallel size with more pipeline or data parallelism";
    case ParallelismKind::kPipelineParallel:
      return "Pipeline transfers and bubbles: more micro-batches per step, an interleaved "
             "schedule (virtual pipeline stages), and stages of equal cost";
    case ParallelismKind::kContextParallel:
      return "Context-parallel attention passes keys and values around its ring every layer: "
             "overlap the exchange with the attention computation (ring or all-to-all "
             "attention in Transformer Engine), and keep the context-parallel group inside one "
             "NVLink domain";
    case ParallelismKind::kAllToAll:
      return "All-to-all exchanges (expert or embedding parallelism): balance the tokens or "
             "lookups per rank, overlap the exchange with computation, and keep the group inside "
             "one node where it fits";
    case ParallelismKind::kUnknown:
      break;
  }
  return "Overlap the collectives with computation (for gradient reduction: smaller DDP buckets, "
         "FSDP/ZeRO prefetching), and keep the busiest communicator inside one NVLink domain";
}

// The collectives' kind for titles: "mostly tensor-parallel collectives (pg:0, 8 ranks)".
std::string KindPhrase(const ParallelismReport* p) {
  if (p == nullptr || p->communicators.empty()) return "";
  const CommunicatorUse* top = nullptr;
  for (const CommunicatorUse& c : p->communicators) {
    if (c.kind == p->dominant) {
      top = &c;
      break;
    }
  }
  if (top == nullptr) return "";
  return fmt::format("; {} {} collectives ({}, {} ranks: {})",
                     p->dominant_share >= 0.999 ? "all" : "mostly",
                     ParallelismKindWords(p->dominant), top->communicator, top->size, top->reason);
}

// Exposed communication splits into waiting for the last rank to arrive and transferring. Only
// the transfer is at stake for overlap or a faster link; the waiting is a straggler's doing
// (Stragglers, CollectiveWaiting).
void ExposedCommunication(const OverviewReport& o, const SummaryReport& s,
                          const ParallelismReport* parallelism, const OverviewOptions& opt,
                          std::vector<Recommendation>& out) {
  if (s.exposed_communication_share <= opt.exposed_communication) return;
  const PodBreakdown& b = o.breakdown;
  const double wait = b.Share(b.comm_wait_ns), transfer = b.Share(b.comm_transfer_ns);
  const ParallelismKind kind = parallelism ? parallelism->dominant : ParallelismKind::kUnknown;
  std::string advice = CommunicationAdvice(kind);
  if (wait > transfer) {
    advice = fmt::format(
        "More of it is waiting for the last rank to arrive than transferring, and no "
        "collective setting shortens waiting: {}. For the transfer itself: {}",
        NamedStragglers(s, opt).empty() ? "find why the ranks arrive apart (collective_waiting)"
                                        : "fix the straggler first (straggler)",
        advice);
  }
  out.push_back(
      {.rule = "exposed_communication",
       .title = fmt::format(
           "Communication not hidden behind computation: {} of the pod's step time, {} waiting "
           "and {} transferring ({} on the median worker, {} of whose communication is "
           "hidden){}",
           Pct(wait + transfer), Pct(wait), Pct(transfer), Pct(s.exposed_communication_share),
           s.overlap_pct ? fmt::format("{:.1f}%", *s.overlap_pct) : "none",
           KindPhrase(parallelism)),
       .advice = std::move(advice),
       .step_share = transfer,
       .evidence = {{"exposed_communication_share", s.exposed_communication_share},
                    {"overlap_pct", s.overlap_pct.value_or(0)},
                    {"comm_wait_share", wait},
                    {"comm_transfer_share", transfer},
                    {"dominant_kind_share", parallelism ? parallelism->dominant_share : 0}}});
}

// Ranks waiting in collectives for others to arrive, with no straggler to name: the late rank
// changes from step to step (load imbalance, host jitter).
void CollectiveWaiting(const OverviewReport& o, const SummaryReport& s, const OverviewOptions& opt,
                       std::vector<Recommendation>& out) {
  const double wait = o.breakdown.Share(o.breakdown.comm_wait_ns);
  if (wait < opt.collective_waiting || !NamedStragglers(s, opt).empty()) return;
  out.push_back(
      {.rule = "collective_waiting",
       .title = fmt::format("Ranks wait {} of the step time in collectives for others to arrive, "
                            "and no one rank is consistently last",
                            Pct(wait)),
       .advice = "The late rank changes from step to step: uneven work per rank (variable "
                 "sequence lengths or batch contents: pack or bucket them), host jitter (pin "
                 "the training processes, keep other work off those hosts), or data loading that "
                 "stalls now and then; the stragglers report lists who arrives last how often",
       .step_share = wait,
       .evidence = {{"comm_wait_share", wait},
                    {"comm_transfer_share", o.breakdown.Share(o.breakdown.comm_transfer_ns)}}});
}

void AllReduceEfficiency(const SummaryReport& s, const OverviewOptions& opt,
                         std::vector<Recommendation>& out) {
  if (s.link_gbytes_per_s <= 0 || !s.median_efficiency || !s.median_busbw_gbytes_per_s ||
      *s.median_efficiency >= opt.allreduce_efficiency)
    return;
  const double efficiency = *s.median_efficiency;
  const double step = static_cast<double>(s.step_p50_ns);
  const double at_stake =
      step > 0 ? static_cast<double>(s.measured_allreduce_ns) / step * (1 - efficiency) : 0;
  out.push_back(
      {.rule = "allreduce_efficiency",
       .title = fmt::format(
           "Collectives reach {} of the link ({:.1f} of {:.0f} GB/s bus bandwidth, median over "
           "collectives)",
           Pct(efficiency), *s.median_busbw_gbytes_per_s, s.link_gbytes_per_s),
       .advice = "Check which algorithm and protocol NCCL picks (NCCL_DEBUG=INFO, NCCL_ALGO, "
                 "NCCL_PROTO), that it "
                 "uses NVLink and InfiniBand/RoCE rather than sockets, and the message sizes "
                 "(small buckets cannot "
                 "fill the link)",
       .step_share = std::min(1.0, at_stake),
       .evidence = {{"median_busbw_gbytes_per_s", *s.median_busbw_gbytes_per_s},
                    {"link_gbytes_per_s", s.link_gbytes_per_s},
                    {"median_efficiency", efficiency}}});
}

// FP32 matrix multiplies on the CUDA cores of GPUs whose Tensor Cores run TF32: PyTorch leaves
// matmuls in full FP32 unless told otherwise, so an FP32 model runs its GEMMs at the CUDA cores'
// rate: about an eighth of what TF32 reaches on an A100 or H100 (dense).
void Fp32GemmOnCudaCores(const OverviewReport& o, const KernelReport& kernels,
                         const OverviewOptions& opt, std::vector<Recommendation>& out) {
  if (o.fp32_gemm_share < opt.fp32_gemm_share) return;
  const double busy = o.gpu.median_gpu_utilization.value_or(1);
  out.push_back(
      {.rule = "fp32_gemm_on_cuda_cores",
       .title = fmt::format("{} of kernel time is FP32 matrix multiply on CUDA cores, on GPUs "
                            "with Tensor Cores",
                            Pct(o.fp32_gemm_share)),
       .advice = "Let matmuls use TF32 Tensor Cores: torch.set_float32_matmul_precision(\"high\") "
                 "(or torch.backends.cuda.matmul.allow_tf32 = True), or train in bf16 with "
                 "torch.autocast(\"cuda\", dtype=torch.bfloat16); both keep FP32 weights",
       .step_share = o.fp32_gemm_share * busy,
       .evidence = {{"fp32_gemm_share", o.fp32_gemm_share},
                    {"tensor_core_share", o.tensor_core_share},
                    {"fp32_gemm_ns", static_cast<double>(kernels.tensor_cores.fp32_gemm_ns)}},
       .subject = kernels.hottest_fp32_gemm});
}

// Dtype casts (cast_copies.h): under autocast, every step casts the FP32 weights again for each
// matmul; elsewhere, .to(dtype) and .float() in the model's forward.
void CastCopyRule(const OverviewReport& o, const CastCopies* casts, const OverviewOptions& opt,
                  std::vector<Recommendation>& out) {
  if (!o.cast_copy_share || *o.cast_copy_share < opt.cast_copy_share) return;
  const double busy = o.gpu.median_gpu_utilization.value_or(1);
  const double steps = static_cast<double>(std::max<size_t>(1, o.steps * o.workers));
  out.push_back(
      {.rule = "cast_copies",
       .title =
           fmt::format("Dtype casts (aten::_to_copy) take {} of kernel time: {} of {}",
                       Pct(*o.cast_copy_share), MsText(static_cast<double>(casts->cast_kernel_ns)),
                       MsText(static_cast<double>(casts->kernel_ns))),
       .advice = "Under autocast each step casts the FP32 weights to bf16/fp16 again: keep "
                 "weights in bf16 where the optimizer allows (FSDP MixedPrecision(param_dtype="
                 "torch.bfloat16), or a bf16 model with FP32 master weights), run a step's "
                 "micro-batches inside one autocast region so its cast cache is reused, and take "
                 ".to(dtype)/.float() calls out of the model's forward",
       .step_share = *o.cast_copy_share * busy,
       .evidence = {{"cast_kernel_ns", static_cast<double>(casts->cast_kernel_ns)},
                    {"kernel_ns", static_cast<double>(casts->kernel_ns)},
                    {"cast_copy_share", *o.cast_copy_share},
                    {"casts_per_step", static_cast<double>(casts->casts) / steps}},
       .subject = "aten::_to_copy"});
}

void LowOccupancyKernels(const OverviewReport& o, const KernelReport& kernels,
                         const OverviewOptions& opt, std::vector<Recommendation>& out) {
  size_t added = 0;
  const double busy = o.gpu.median_gpu_utilization.value_or(1);
  for (const KernelStats& k : kernels.pod) {
    if (added == 3) break;
    // A library's kernels (cuBLAS, CUTLASS, cuDNN, ...) have the occupancy their tiles were
    // designed for: the user cannot change their tiles or registers.
    if (k.share < opt.hot_kernel_share || k.tensor_core || k.library ||
        k.kernel_class != "compute" || !k.achieved_occupancy ||
        *k.achieved_occupancy >= opt.low_occupancy) {
      continue;
    }
    const bool small_grid = k.blocks_per_sm && *k.blocks_per_sm < 1;
    out.push_back(
        {.rule = "low_occupancy_kernel",
         .title = fmt::format("A hot kernel runs at {} Est. Achieved Occupancy ({} of kernel time)",
                              Pct(*k.achieved_occupancy), Pct(k.share)),
         .advice =
             small_grid
                 ? fmt::format(
                       "Its grid leaves SMs idle ({:.2f} blocks per SM): a larger batch, or "
                       "fusing it with its neighbours into fewer, larger kernels",
                       *k.blocks_per_sm)
                 : "Its registers or shared memory bound the blocks per SM: a smaller tile, fewer "
                   "registers (__launch_bounds__, maxrregcount), or a library kernel tuned for the "
                   "shape",
         .step_share = k.share * busy,
         .evidence = {{"kernel_time_share", k.share},
                      {"achieved_occupancy", *k.achieved_occupancy},
                      {"blocks_per_sm", k.blocks_per_sm.value_or(0)}},
         .subject = k.name});
    ++added;
  }
}

void Stragglers(const SummaryReport& s, const OverviewOptions& opt,
                std::vector<Recommendation>& out) {
  const double window = static_cast<double>(s.window_step_time_ns);
  for (const Straggler* named : NamedStragglers(s, opt)) {
    const Straggler& g = *named;
    const double loss = static_cast<double>(g.step_time_loss_ns.value_or(g.caused_delay_ns));
    out.push_back(
        {.rule = "straggler",
         .title =
             fmt::format("Rank {}{} straggles: its extra time is in {}; it {} {} of {} of steps",
                         g.rank, g.host.empty() ? "" : " (" + g.host + ")", g.category,
                         g.step_time_loss_ns ? "cost the job" : "caused waiting of", MsText(loss),
                         MsText(window)),
         .advice = StragglerAdvice(g.category),
         .step_share = std::min(1.0, loss / window),
         .evidence = {{"step_time_loss_ns", static_cast<double>(g.step_time_loss_ns.value_or(-1))},
                      {"caused_delay_ns", static_cast<double>(g.caused_delay_ns)},
                      {"last_arriver_share", g.last_arriver_share}},
         .ranks = {g.rank}});
  }
}

}  // namespace

OverviewReport ComputeOverview(const SummaryReport& summary,
                               const std::vector<WorkerBreakdown>& breakdown, const GpuReport& gpu,
                               const KernelReport& kernels, const InputReport& input,
                               const ParallelismReport* parallelism, const CastCopies* casts,
                               const OverviewOptions& options) {
  OverviewReport o;
  o.workers = summary.ranks;
  o.steps = summary.steps;
  o.step_p50_ns = summary.step_p50_ns;
  o.step_max_ns = summary.step_max_ns;
  o.breakdown = SumBreakdown(breakdown);
  o.gpu = gpu.pod;
  o.tensor_core_share = kernels.tensor_cores.share();
  // Of all kernel time, as the occupancy rule's shares are: the rules rank against each other.
  o.fp32_gemm_share = kernels.tensor_cores.kernel_ns > 0
                          ? static_cast<double>(kernels.tensor_cores.fp32_gemm_ns) /
                                static_cast<double>(kernels.tensor_cores.kernel_ns)
                          : 0;
  o.exposed_communication_share = summary.exposed_communication_share;
  o.overlap_pct = summary.overlap_pct;
  o.median_busbw_gbytes_per_s = summary.median_busbw_gbytes_per_s;
  o.link_gbytes_per_s = summary.link_gbytes_per_s;
  o.median_efficiency = summary.median_efficiency;
  o.straggler_count = summary.straggler_count;
  if (parallelism != nullptr) o.parallelism = *parallelism;
  if (casts != nullptr && casts->operators > 0 && casts->kernel_ns > 0)
    o.cast_copy_share = casts->share();
  std::vector<Recommendation>& r = o.recommendations;
  LowUtilization(o, options, r);
  LaunchBound(o, gpu, options, r);
  InputBound(input, r);
  ExposedCommunication(o, summary, parallelism, options, r);
  CollectiveWaiting(o, summary, options, r);
  AllReduceEfficiency(summary, options, r);
  Fp32GemmOnCudaCores(o, kernels, options, r);
  CastCopyRule(o, casts, options, r);
  LowOccupancyKernels(o, kernels, options, r);
  Stragglers(summary, options, r);
  std::stable_sort(r.begin(), r.end(), [](const Recommendation& a, const Recommendation& b) {
    return a.step_share > b.step_share;
  });
  return o;
}

}  // namespace podscope::analysis
