#include "sim/workload_model.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "common/parse_number.h"
#include "common/str_util.h"

namespace podscope::sim {
namespace {

using common::HostSpanCategory;
using common::KernelClass;
using common::WorkerTrace;

constexpr int32_t kComputeStream = 7;
constexpr int32_t kCommStream = 20;
constexpr int32_t kCopyStream = 7;

constexpr const char* kForwardKernels[] = {
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
    "segment_k_off_kernel__5x_cublas",
    "void at::native::vectorized_elementwise_kernel<4, "
    "at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() "
    "const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, "
    "at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() "
    "const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, "
    "float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, "
    "float*, c10::BFloat16*)",
    "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
    "cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, "
    "true, false, false, true, true, false, false>(Flash_fwd_params)",
};
constexpr const char* kForwardOps[] = {"aten::mm", "aten::gelu", "aten::native_layer_norm",
                                       "FlashAttnFunc"};
constexpr const char* kBackwardKernels[] = {
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x256x64_warpgroupsize2x1x1_execute_"
    "segment_k_off_kernel__5x_cublas",
    "void at::native::vectorized_elementwise_kernel<4, "
    "at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#2}, at::detail::Array<char*, 3> >(int, "
    "at::detail::Array<char*, 3>)",
    "void at::native::(anonymous "
    "namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>(c10::BFloat16 "
    "const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16 const*, "
    "c10::BFloat16*, int)",
    "void flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, "
    "4, 2, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, "
    "cutlass::bfloat16_t> >, false, false, false, false, false, true, false>(Flash_bwd_params)",
};
constexpr const char* kBackwardOps[] = {
    "autograd::engine::evaluate_function: MmBackward0",
    "autograd::engine::evaluate_function: GeluBackward0",
    "autograd::engine::evaluate_function: NativeLayerNormBackward0",
    "autograd::engine::evaluate_function: FlashAttnFuncBackward"};
constexpr const char* kOptimizerKernel =
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
    "namespace)::TensorListMetadata<4>, at::native::(anonymous "
    "namespace)::FusedAdamMathFunctor<c10::BFloat16, 4, (at::native::ADAM_MODE)1, false>, double*, "
    "double, double, double, double, double, double, bool, double*, "
    "double*>(at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous "
    "namespace)::FusedAdamMathFunctor<c10::BFloat16, 4, (at::native::ADAM_MODE)1, false>, double*, "
    "double, double, double, double, double, double, bool, double*, double*)";
constexpr const char* kNcclKernel =
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";

// Appends events of one rank in its own clock; keeps the cursors of its host and streams.
class RankWriter {
 public:
  // A writer that does not `write` only counts correlation ids.
  RankWriter(WorkerTrace* trace, TimeNs clock_offset, int64_t drift_ppb, TimeNs epoch,
             int64_t first_correlation, bool write)
      : write_(write),
        w_(*trace),
        offset_(clock_offset),
        drift_ppb_(drift_ppb),
        epoch_(epoch),
        next_correlation_(first_correlation) {}

  TimeNs Local(TimeNs t) const {
    return t + offset_ +
           static_cast<TimeNs>(static_cast<__int128>(t - epoch_) * drift_ppb_ /
                               common::kNanosPerSecond);
  }

  void HostSpan(TimeNs start, TimeNs end, std::string_view name, HostSpanCategory category,
                int64_t step = common::kNoStep) {
    if (!write_) return;
    common::HostSpanTable& h = w_.host_spans;
    h.start.push_back(Local(start));
    h.end.push_back(Local(end));
    h.thread.push_back(w_.info.pid);
    h.name.push_back(w_.strings.Intern(name));
    h.category.push_back(category);
    h.step.push_back(step);
    h.external_id.push_back(-1);
  }

  int64_t Runtime(TimeNs start, TimeNs end, std::string_view name, bool launches) {
    const int64_t correlation = launches ? next_correlation_++ : -1;
    if (!write_) return correlation;
    common::RuntimeCallTable& r = w_.runtime_calls;
    r.start.push_back(Local(start));
    r.end.push_back(Local(end));
    r.thread.push_back(w_.info.pid);
    r.name.push_back(w_.strings.Intern(name));
    r.correlation.push_back(correlation);
    r.external_id.push_back(-1);
    r.api_kind.push_back(common::ApiKind::kRuntime);
    return correlation;
  }

  void Kernel(TimeNs start, TimeNs end, std::string_view name, int32_t stream, int64_t correlation,
              KernelClass kernel_class, uint32_t grid) {
    if (!write_) return;
    common::KernelTable& k = w_.kernels;
    k.start.push_back(Local(start));
    k.end.push_back(Local(end));
    k.device.push_back(w_.info.local_rank);
    k.stream.push_back(stream);
    k.name.push_back(w_.strings.Intern(name));
    k.correlation.push_back(correlation);
    k.grid_x.push_back(grid);
    k.grid_y.push_back(1);
    k.grid_z.push_back(1);
    k.block_x.push_back(kernel_class == KernelClass::kCommunication ? 640 : 256);
    k.block_y.push_back(1);
    k.block_z.push_back(1);
    k.registers_per_thread.push_back(kernel_class == KernelClass::kCommunication ? 96 : 128);
    k.shared_memory_bytes.push_back(kernel_class == KernelClass::kCommunication ? 41760 : 98304);
    k.kernel_class.push_back(kernel_class);
  }

  void Memcpy(TimeNs start, TimeNs end, int64_t bytes, int64_t correlation) {
    if (!write_) return;
    common::MemcpyTable& m = w_.memcpys;
    m.start.push_back(Local(start));
    m.end.push_back(Local(end));
    m.device.push_back(w_.info.local_rank);
    m.stream.push_back(kCopyStream);
    m.name.push_back(w_.strings.Intern("Memcpy HtoD (Pinned -> Device)"));
    m.bytes.push_back(bytes);
    m.correlation.push_back(correlation);
    m.kind.push_back(common::MemcpyKind::kHostToDevice);
  }

  void Collective(int64_t sequence, int64_t bytes, int32_t nranks, TimeNs enqueue, TimeNs start,
                  TimeNs end, int64_t correlation) {
    if (!write_) return;
    common::CollectiveTable& c = w_.collectives;
    c.communicator.push_back(w_.strings.Intern("pg:0"));
    c.rank.push_back(w_.info.rank);
    c.nranks.push_back(nranks);
    c.op.push_back(common::CollectiveOp::kAllReduce);
    c.sequence.push_back(sequence);
    c.count.push_back(bytes / 2);
    c.dtype.push_back(w_.strings.Intern("BFloat16"));
    c.bytes.push_back(bytes);
    c.algorithm.push_back(w_.strings.Intern("RING"));
    c.protocol.push_back(w_.strings.Intern("LL"));
    c.channels.push_back(16);
    c.enqueue.push_back(Local(enqueue));
    c.kernel_start.push_back(Local(start));
    c.kernel_end.push_back(Local(end));
    c.correlation.push_back(correlation);
  }

  void Step(int64_t number, TimeNs start, TimeNs end) {
    if (!write_) return;
    HostSpan(start, end, common::StrCat("ProfilerStep#", number), HostSpanCategory::kAnnotation,
             number);
    common::StepTable& s = w_.steps;
    s.number.push_back(number);
    s.start.push_back(Local(start));
    s.end.push_back(Local(end));
    s.thread.push_back(w_.info.pid);
  }

 private:
  const bool write_;
  WorkerTrace& w_;
  TimeNs offset_;
  int64_t drift_ppb_;
  TimeNs epoch_;
  int64_t next_correlation_;
};

// One rank's state across steps (true time).
struct RankState {
  std::mt19937_64 rng;
  double compute_factor = 1, input_factor = 1, launch_factor = 1;
  TimeNs host = 0;     // host thread cursor
  TimeNs compute = 0;  // compute stream cursor
  TimeNs comm = 0;     // communication stream cursor
  // Filled during a step's compute phase.
  std::vector<TimeNs> bucket_ready, bucket_launch;
  std::vector<int64_t> bucket_correlation;
  TimeNs step_start = 0;
};

}  // namespace

void ApplySlowdowns(const std::vector<Slowdown>& slowdowns, int32_t rank, TimeNs step_start,
                    double* compute, double* input, double* launch) {
  *compute = *input = *launch = 1;
  for (const Slowdown& slow : slowdowns) {
    if (slow.rank != rank || !slow.ActiveAt(step_start)) continue;
    (slow.kind == SlowdownKind::kCompute ? *compute
     : slow.kind == SlowdownKind::kInput ? *input
                                         : *launch) *= slow.factor;
  }
}

std::string_view SlowdownKindName(SlowdownKind kind) {
  switch (kind) {
    case SlowdownKind::kCompute:
      return "compute";
    case SlowdownKind::kInput:
      return "input";
    case SlowdownKind::kLaunch:
      return "launch";
  }
  return "compute";
}

absl::StatusOr<Slowdown> ParseSlowdown(std::string_view spec) {
  Slowdown s;
  const size_t colon = spec.find(':');
  if (colon == std::string_view::npos) {
    return absl::InvalidArgumentError(
        common::StrCat("straggler \"", spec, "\": expected RANK:FACTOR[:compute|input|launch]"));
  }
  const std::string_view rank = spec.substr(0, colon);
  std::string_view rest = spec.substr(colon + 1);
  std::string_view kind = "compute";
  if (const size_t second = rest.find(':'); second != std::string_view::npos) {
    kind = rest.substr(second + 1);
    rest = rest.substr(0, second);
  }
  const absl::StatusOr<int64_t> parsed_rank = common::ParseInt(rank);
  if (!parsed_rank.ok() || *parsed_rank < 0 || *parsed_rank > INT32_MAX) {
    return absl::InvalidArgumentError(common::StrCat("straggler \"", spec, "\": bad rank"));
  }
  s.rank = static_cast<int32_t>(*parsed_rank);
  const absl::StatusOr<double> factor = common::ParseDouble(rest);
  if (factor.ok()) s.factor = *factor;
  if (!factor.ok() || !(s.factor >= 1.0) || s.factor > 1000) {
    return absl::InvalidArgumentError(
        common::StrCat("straggler \"", spec, "\": factor must be a number in [1, 1000]"));
  }
  if (kind == "compute") {
    s.kind = SlowdownKind::kCompute;
  } else if (kind == "input") {
    s.kind = SlowdownKind::kInput;
  } else if (kind == "launch") {
    s.kind = SlowdownKind::kLaunch;
  } else {
    return absl::InvalidArgumentError(
        common::StrCat("straggler \"", spec, "\": kind must be compute, input or launch"));
  }
  return s;
}

absl::Status ApplyPreset(std::string_view name, WorkloadOptions* o) {
  if (name == "default") return absl::OkStatus();
  if (name == "light") {
    o->forward_kernels = 6, o->backward_kernels = 12, o->optimizer_kernels = 2, o->buckets = 2;
    return absl::OkStatus();
  }
  if (name == "dense") {
    o->forward_kernels = 160, o->backward_kernels = 300, o->optimizer_kernels = 40;
    o->forward_ns = 1'200'000, o->backward_ns = 2'400'000, o->optimizer_ns = 300'000;
    o->dataloader_ns = 500'000;
    o->params = 25'000'000;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      common::StrCat("unknown preset \"", name, "\" (default, light or dense)"));
}

absl::Status ValidateOptions(const WorkloadOptions& o) {
  if (o.ranks < 1 || o.ranks > 65536)
    return absl::InvalidArgumentError("ranks must be in 1..65536");
  if (o.steps < 1 || o.steps > 100000)
    return absl::InvalidArgumentError("steps must be in 1..100000");
  if (o.ranks_per_host < 1) return absl::InvalidArgumentError("ranks per host must be >= 1");
  if (o.buckets < 1 || o.buckets > o.backward_kernels) {
    return absl::InvalidArgumentError("buckets must be in 1..backward kernels");
  }
  if (o.forward_kernels < 1 || o.backward_kernels < 1 || o.optimizer_kernels < 1) {
    return absl::InvalidArgumentError("kernel counts must be >= 1");
  }
  if (o.link_gbytes_per_s <= 0) return absl::InvalidArgumentError("link bandwidth must be > 0");
  if (o.jitter < 0 || o.jitter > 0.5)
    return absl::InvalidArgumentError("jitter must be in [0, 0.5]");
  for (const Slowdown& s : o.slowdowns) {
    if (s.rank >= o.ranks) {
      return absl::InvalidArgumentError(
          common::StrCat("straggler rank ", s.rank, " is not below --ranks ", o.ranks));
    }
  }
  return absl::OkStatus();
}

namespace {

TimeNs Jittered(std::mt19937_64& rng, double mean_ns, double jitter) {
  std::normal_distribution<double> noise(1.0, jitter);
  return std::max<TimeNs>(1'000, static_cast<TimeNs>(mean_ns * std::max(0.5, noise(rng))));
}

// Every rank's identity, device and true clock (one skew per host), and its writer and state at
// the epoch.
void InitRanks(const WorkloadOptions& o, Workload* out, std::vector<RankState>* state,
               std::vector<RankWriter>* writers) {
  const int32_t n = o.ranks;
  std::mt19937_64 clock_rng(o.seed ^ 0x9e3779b97f4a7c15ull);
  const int32_t hosts = (n + o.ranks_per_host - 1) / o.ranks_per_host;
  std::vector<TimeNs> host_offset(hosts);
  std::vector<int64_t> host_drift(hosts);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  for (int32_t h = 0; h < hosts; ++h) {
    host_offset[h] = static_cast<TimeNs>(unit(clock_rng) * o.clock_offset_ms * 1e6);
    host_drift[h] = static_cast<int64_t>(unit(clock_rng) * o.drift_ppm * 1e3);
  }
  state->resize(n);
  writers->reserve(n);
  for (int32_t r = 0; r < n; ++r) {
    WorkerTrace& w = out->capture.workers[r];
    const int32_t h = r / o.ranks_per_host;
    w.info.rank = r;
    w.info.world_size = n;
    w.info.local_rank = r % o.ranks_per_host;
    w.info.pid = 1000 + w.info.local_rank;
    w.info.host = common::StrCat("node-", h);
    w.info.job = o.job;
    w.info.backend = "nccl";
    w.info.process_name = "python3";
    w.info.source = "simulated";
    // One H100 SXM per rank, as Kineto describes a device: its SM count and compute capability
    // are what occupancy and SM efficiency are computed from.
    common::DeviceInfo gpu;
    gpu.id = w.info.local_rank;
    gpu.name = "NVIDIA H100 80GB HBM3";
    gpu.total_memory_bytes = 85'045'870'592;
    gpu.compute_major = 9;
    gpu.compute_minor = 0;
    gpu.sm_count = 132;
    w.info.devices.push_back(std::move(gpu));
    w.info.tracks.push_back(
        common::TrackName{w.info.pid, false, common::StrCat("thread ", w.info.pid, " (python3)")});
    // local = t + off + (t - epoch) d  =>  t ~= local - off - (local - (epoch + off)) d.
    out->true_clocks[r] =
        common::ClockModel{-host_offset[h], -host_drift[h], o.epoch_ns + host_offset[h], 0,
                           common::ClockSource::kNetwork};
    writers->emplace_back(&w, host_offset[h], host_drift[h], o.epoch_ns, o.first_correlation,
                          r >= o.first_written_rank && r <= o.last_written_rank);
    RankState& s = (*state)[r];
    s.rng.seed(o.seed * 1'000'003ull + static_cast<uint64_t>(r) * 7919ull + 17);
    s.host = o.epoch_ns + static_cast<TimeNs>(std::uniform_int_distribution<int>(0, 20'000)(s.rng));
    s.compute = s.comm = s.host;
  }
}

// One op on the host that launches one compute kernel, which runs once the stream is free.
void LaunchKernel(const WorkloadOptions& o, RankState& s, RankWriter& wr, TimeNs launch,
                  const char* op, const char* kernel, double mean_ns, uint32_t grid) {
  const TimeNs op_start = s.host;
  const int64_t corr =
      wr.Runtime(op_start + 500, op_start + 500 + launch, "cudaLaunchKernel", true);
  s.host = op_start + 500 + launch + 500;
  wr.HostSpan(op_start, s.host, op, HostSpanCategory::kOp);
  const TimeNs start = std::max(s.compute, op_start + 500 + launch + kLaunchLatencyNs);
  const TimeNs end = start + Jittered(s.rng, mean_ns * s.compute_factor, o.jitter);
  wr.Kernel(start, end, kernel, kComputeStream, corr, KernelClass::kCompute, grid);
  s.compute = end;
}

// A step's first phase on rank `r`: input, forward, and backward with each bucket's ready and
// launch time.
void ComputePhase(const WorkloadOptions& o, int32_t r, RankState& s, RankWriter& wr) {
  const int32_t per_bucket = o.backward_kernels / o.buckets;
  s.step_start = s.host;
  ApplySlowdowns(o.slowdowns, r, s.step_start, &s.compute_factor, &s.input_factor,
                 &s.launch_factor);
  const TimeNs launch = static_cast<TimeNs>(o.launch_ns * s.launch_factor);
  // Input: the next batch, then its copy to the device.
  const TimeNs input =
      Jittered(s.rng, static_cast<double>(o.dataloader_ns) * s.input_factor, o.jitter);
  wr.HostSpan(s.host, s.host + input,
              "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
              HostSpanCategory::kInput);
  s.host += input;
  {
    const int64_t corr = wr.Runtime(s.host, s.host + launch, "cudaMemcpyAsync", true);
    const TimeNs start = std::max(s.compute, s.host + launch + kLaunchLatencyNs);
    const TimeNs end = start + 500'000;
    wr.Memcpy(start, end, 64 << 20, corr);
    s.compute = end;
    s.host += launch + 1'000;
  }
  for (int32_t i = 0; i < o.forward_kernels; ++i) {
    LaunchKernel(o, s, wr, launch, kForwardOps[i % 4], kForwardKernels[i % 4],
                 static_cast<double>(o.forward_ns) / o.forward_kernels, 132u * (1 + i % 3));
  }
  s.bucket_ready.assign(o.buckets, 0);
  s.bucket_launch.assign(o.buckets, 0);
  s.bucket_correlation.assign(o.buckets, 0);
  for (int32_t b = 0; b < o.buckets; ++b) {
    const int32_t count = b + 1 == o.buckets ? o.backward_kernels - per_bucket * b : per_bucket;
    for (int32_t i = 0; i < count; ++i) {
      LaunchKernel(o, s, wr, launch, kBackwardOps[i % 4], kBackwardKernels[i % 4],
                   static_cast<double>(o.backward_ns) / o.backward_kernels, 132u * (1 + i % 2));
    }
    s.bucket_ready[b] = s.compute;
    // DDP launches the bucket's AllReduce from a record_param_comms op, in the autograd hook
    // of the bucket's last gradient: inside that parameter's AccumulateGrad.
    const TimeNs op_start = s.host;
    s.bucket_correlation[b] =
        wr.Runtime(op_start + 1'000, op_start + 1'000 + launch, "cudaLaunchKernel", true);
    s.host = op_start + 2'000 + launch;
    wr.HostSpan(op_start, s.host,
                "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
                HostSpanCategory::kOp);
    wr.HostSpan(op_start + 100, s.host - 100, "record_param_comms", HostSpanCategory::kOp);
    s.bucket_launch[b] = op_start + 1'000;
  }
}

// A step's second phase: the collectives, in bucket order on the communication stream; each ends
// a transfer after its last rank arrives. Their truth goes to `out`.
void CollectivePhase(const WorkloadOptions& o, int32_t step, std::vector<RankState>& state,
                     std::vector<RankWriter>& writers, Workload* out) {
  const int32_t n = o.ranks;
  const int64_t bucket_bytes = o.params * o.bytes_per_param / o.buckets;
  const double bus_factor = n > 1 ? 2.0 * (n - 1) / n : 0.0;
  const TimeNs transfer_ns =
      o.collective_latency_ns +
      static_cast<TimeNs>(bucket_bytes * bus_factor / (o.link_gbytes_per_s * 1e9) * 1e9);
  TimeNs previous_end = 0;
  for (int32_t b = 0; b < o.buckets; ++b) {
    CollectiveTruth truth;
    truth.step = o.first_step + step;
    truth.bucket = b;
    truth.arrival.resize(n);
    TimeNs last = INT64_MIN;
    for (int32_t r = 0; r < n; ++r) {
      const RankState& s = state[r];
      const TimeNs launched = s.bucket_launch[b] +
                              static_cast<TimeNs>(o.launch_ns * s.launch_factor) + kLaunchLatencyNs;
      truth.arrival[r] = std::max({s.bucket_ready[b], s.comm, previous_end, launched});
      last = std::max(last, truth.arrival[r]);
    }
    const TimeNs end = last + transfer_ns;
    truth.transfer_ns = transfer_ns;
    truth.wait.resize(n);
    for (int32_t r = 0; r < n; ++r) {
      truth.wait[r] = last - truth.arrival[r];
      RankState& s = state[r];
      writers[r].Kernel(truth.arrival[r], end, kNcclKernel, kCommStream, s.bucket_correlation[b],
                        KernelClass::kCommunication, 16);
      writers[r].Collective((o.first_step + step) * o.buckets + b, bucket_bytes, n,
                            s.bucket_launch[b], truth.arrival[r], end, s.bucket_correlation[b]);
      s.comm = end;
    }
    previous_end = end;
    out->truth.push_back(std::move(truth));
  }
}

// A step's last phase on one rank: the optimizer after the last gradient is reduced, then the
// host syncs and the step ends.
void OptimizerPhase(const WorkloadOptions& o, int32_t step, RankState& s, RankWriter& wr) {
  const TimeNs launch = static_cast<TimeNs>(o.launch_ns * s.launch_factor);
  const TimeNs opt_start = s.host;
  s.compute = std::max(s.compute, s.comm);  // cudaStreamWaitEvent on the reduced gradients
  for (int32_t i = 0; i < o.optimizer_kernels; ++i) {
    const int64_t corr = wr.Runtime(s.host, s.host + launch, "cudaLaunchKernel", true);
    const TimeNs start = std::max(s.compute, s.host + launch + kLaunchLatencyNs);
    const TimeNs end =
        start +
        Jittered(s.rng, static_cast<double>(o.optimizer_ns) / o.optimizer_kernels, o.jitter);
    wr.Kernel(start, end, kOptimizerKernel, kComputeStream, corr, KernelClass::kCompute, 264);
    s.compute = end;
    s.host += launch + 1'000;
  }
  wr.HostSpan(opt_start, s.host, "Optimizer.step#FusedAdam.step", HostSpanCategory::kOptimizer);
  const TimeNs sync_end = std::max(s.host, s.compute) + 5'000;
  wr.Runtime(s.host, sync_end, "cudaStreamSynchronize", false);
  s.host = sync_end + 10'000;
  wr.Step(o.first_step + step, s.step_start, s.host);
}

}  // namespace

Workload SimulateJob(const WorkloadOptions& o) {
  const int32_t n = o.ranks;
  Workload out;
  out.capture.job = o.job;
  out.capture.workers.resize(n);
  out.true_clocks.resize(n);
  std::vector<RankState> state;
  std::vector<RankWriter> writers;
  InitRanks(o, &out, &state, &writers);
  for (int32_t step = 0; step < o.steps; ++step) {
    for (int32_t r = 0; r < n; ++r) ComputePhase(o, r, state[r], writers[r]);
    CollectivePhase(o, step, state, writers, &out);
    for (int32_t r = 0; r < n; ++r) OptimizerPhase(o, step, state[r], writers[r]);
  }
  for (WorkerTrace& w : out.capture.workers) w.SortByTime();
  return out;
}

}  // namespace podscope::sim
