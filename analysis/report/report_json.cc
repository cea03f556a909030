#include "analysis/report/report_json.h"

#include <optional>
#include <span>

#include "common/json_writer.h"

namespace podscope::analysis {
namespace {

using common::JsonWriter;
using namespace analysis;

// Each report writes its members into an object its caller opened (RenderJson puts the warnings
// beside them); the helpers that write a whole value (Profile, TensorCores, KernelList) open
// their own.

// An unknown figure is null, never 0.
JsonWriter& OptionalFixed(JsonWriter& w, const std::optional<double>& v, int decimals) {
  return v ? w.Fixed(*v, decimals) : w.Null();
}

JsonWriter& OptionalInt(JsonWriter& w, const std::optional<int64_t>& v) {
  return v ? w.Int(*v) : w.Null();
}

// A fraction or null, to 4 decimals.
JsonWriter& Fraction(JsonWriter& w, const std::optional<double>& v) {
  return OptionalFixed(w, v, 4);
}

// A memory figure that is negative when unknown: null then.
JsonWriter& KnownBytes(JsonWriter& w, int64_t bytes) {
  return bytes >= 0 ? w.Int(bytes) : w.Null();
}

// A link bandwidth is given or not (0): null when not.
std::optional<double> GivenLink(double link_gbytes_per_s) {
  if (link_gbytes_per_s > 0) return link_gbytes_per_s;
  return std::nullopt;
}

void BreakdownFields(JsonWriter& w, const StepBreakdown& s) {
  w.Key("span_ns").Int(s.span_ns).Key("compute_ns").Int(s.compute_ns);
  w.Key("overlap_ns").Int(s.overlap_ns).Key("communication_ns").Int(s.communication_ns);
  w.Key("comm_wait_ns").Int(s.comm_wait_ns).Key("comm_transfer_ns").Int(s.comm_transfer_ns);
  w.Key("memcpy_ns").Int(s.memcpy_ns).Key("memcpy_h2d_ns").Int(s.memcpy_h2d_ns);
  w.Key("memcpy_d2h_ns").Int(s.memcpy_d2h_ns).Key("memcpy_d2d_ns").Int(s.memcpy_d2d_ns);
  w.Key("memcpy_other_ns").Int(s.memcpy_other_ns);
  w.Key("idle_input_ns").Int(s.idle_input_ns).Key("idle_launch_ns").Int(s.idle_launch_ns);
  w.Key("idle_host_ns").Int(s.idle_host_ns).Key("idle_other_ns").Int(s.idle_other_ns);
  w.Key("before_ns").Int(s.before_ns).Key("before_input_ns").Int(s.before_input_ns);
  w.Key("before_launch_ns").Int(s.before_launch_ns).Key("before_host_ns").Int(s.before_host_ns);
  w.Key("before_other_ns").Int(s.before_other_ns);
}

void Steps(JsonWriter& w, const std::vector<WorkerBreakdown>& b) {
  w.Key("workers").BeginArray();
  for (const WorkerBreakdown& worker : b) {
    w.BeginObject().Key("rank").Int(worker.rank);
    w.Key("step_source").String(StepSourceName(worker.step_source)).Key("steps").BeginArray();
    for (const StepBreakdown& s : worker.steps) {
      w.BeginObject().Key("step").Int(s.step);
      BreakdownFields(w, s);
      w.EndObject();
    }
    w.EndArray().EndObject();
  }
  w.EndArray();
}

// workers_only: each worker's totals over its steps instead of the steps.
void Overlap(JsonWriter& w, const std::vector<WorkerBreakdown>& b, bool workers_only) {
  w.Key("workers").BeginArray();
  for (const WorkerBreakdown& worker : b) {
    TimeNs overlap = 0, comm = 0, computation = 0, communication = 0;
    w.BeginObject().Key("rank").Int(worker.rank);
    if (!workers_only) w.Key("steps").BeginArray();
    for (const StepBreakdown& st : worker.steps) {
      overlap += st.overlap_ns;
      comm += st.overlap_ns + st.communication_ns;
      computation += st.compute_ns;
      communication += st.communication_ns;
      if (workers_only) continue;
      w.BeginObject().Key("step").Int(st.step).Key("computation_ns").Int(st.compute_ns);
      w.Key("communication_ns").Int(st.communication_ns).Key("overlap_ns").Int(st.overlap_ns);
      OptionalFixed(w.Key("overlap_pct"), st.OverlapPercent(), 2).EndObject();
    }
    if (workers_only) {
      w.Key("step_count").Uint(worker.steps.size()).Key("computation_ns").Int(computation);
      w.Key("communication_ns").Int(communication).Key("overlap_ns").Int(overlap);
    } else {
      w.EndArray();
    }
    OptionalFixed(w.Key("overlap_pct"),
                  comm > 0 ? std::optional<double>(100.0 * overlap / comm) : std::nullopt, 2);
    w.EndObject();
  }
  w.EndArray();
}

// The capture's bus bandwidth fields, as the summary and the overview give them.
void BandwidthFields(JsonWriter& w, const std::optional<double>& median_busbw, double link,
                     const std::optional<double>& median_efficiency) {
  OptionalFixed(w.Key("median_busbw_gbytes_per_s"), median_busbw, 3);
  OptionalFixed(w.Key("link_gbytes_per_s"), GivenLink(link), 3);
  OptionalFixed(w.Key("median_efficiency"), median_efficiency, 4);
}

void Communication(JsonWriter& w, const CommunicationReport& c, const common::CaptureView& capture,
                   bool workers_only) {
  w.Key("aligned").Bool(c.aligned).Key("clock_basis").String(ClockBasisName(c.clock_basis));
  OptionalInt(w.Key("clock_error_bound_ns"),
              c.clock_bound_known() ? std::optional<TimeNs>(c.clock_error_bound_ns) : std::nullopt);
  w.Key("workers").BeginArray();
  for (const auto& t : c.workers) {
    w.BeginObject().Key("rank").Int(t.rank).Key("collectives").Uint(t.collectives);
    w.Key("wait_ns").Int(t.wait_ns).Key("transfer_ns").Int(t.transfer_ns).EndObject();
  }
  w.EndArray();
  if (workers_only) return;
  w.Key("collectives").BeginArray();
  for (const MatchedCollective& m : c.collectives) {
    w.BeginObject().Key("communicator").String(m.communicator);
    w.Key("op").String(common::CollectiveOpName(m.op)).Key("sequence").Int(m.sequence);
    w.Key("bytes").Int(m.bytes).Key("nranks").Int(m.nranks).Key("ranks").BeginArray();
    for (const Participant& q : m.participants) {
      w.BeginObject().Key("rank").Int(capture.worker(q.worker).info.rank);
      w.Key("arrival_ns").Int(q.arrival).Key("duration_ns").Int(q.duration);
      w.Key("wait_ns").Int(q.wait).Key("transfer_ns").Int(q.transfer).EndObject();
    }
    w.EndArray().EndObject();
  }
  w.EndArray();
}

void Profile(JsonWriter& w, const WorkerProfile& p) {
  w.BeginObject().Key("rank").Int(p.rank).Key("host").String(p.host).Key("steps").Uint(p.steps);
  w.Key("span_ns").Int(p.span_ns).Key("compute_ns").Int(p.compute_ns);
  w.Key("overlap_ns").Int(p.overlap_ns).Key("comm_wait_ns").Int(p.comm_wait_ns);
  w.Key("comm_transfer_ns").Int(p.comm_transfer_ns).Key("memcpy_ns").Int(p.memcpy_ns);
  w.Key("idle_ns").Int(p.idle_ns).Key("before_ns").Int(p.before_ns).EndObject();
}

void Summary(JsonWriter& w, const SummaryReport& s) {
  w.Key("job").String(s.job).Key("ranks").Uint(s.ranks).Key("hosts").Uint(s.hosts);
  w.Key("steps").Uint(s.steps).Key("first_step").Int(s.first_step);
  w.Key("last_step").Int(s.last_step).Key("step_source").String(s.step_source);
  w.Key("step_time").BeginObject().Key("min_ns").Int(s.step_min_ns);
  w.Key("p50_ns").Int(s.step_p50_ns).Key("p90_ns").Int(s.step_p90_ns);
  w.Key("max_ns").Int(s.step_max_ns).Key("window_step_time_ns").Int(s.window_step_time_ns);
  w.EndObject().Key("median_worker");
  Profile(w, s.median_worker);
  w.Key("worst_worker");
  Profile(w, s.worst_worker);
  w.Key("worst_is_straggler").Bool(s.worst_is_straggler);
  w.Key("exposed_communication_ns").Int(s.exposed_communication_ns);
  w.Key("exposed_communication_share").Fixed(s.exposed_communication_share, 4);
  OptionalFixed(w.Key("overlap_pct"), s.overlap_pct, 2);
  w.Key("straggler_count").Uint(s.straggler_count);
  OptionalInt(w.Key("step_time_loss_ns"), s.step_time_loss_ns);
  w.Key("stragglers").BeginArray();
  for (const Straggler& g : s.stragglers) {
    w.BeginObject().Key("rank").Int(g.rank).Key("host").String(g.host);
    OptionalInt(w.Key("step_time_loss_ns"), g.step_time_loss_ns);
    w.Key("caused_delay_ns").Int(g.caused_delay_ns).Key("category").String(g.category);
    w.Key("reason").String(g.reason).EndObject();
  }
  w.EndArray().Key("allreduce").BeginObject().Key("collectives").Uint(s.collectives);
  BandwidthFields(w, s.median_busbw_gbytes_per_s, s.link_gbytes_per_s, s.median_efficiency);
  w.Key("measured_allreduce_ns").Int(s.measured_allreduce_ns);
  OptionalInt(w.Key("expected_allreduce_ns"), s.expected_allreduce_ns).EndObject();
}

void Stragglers(JsonWriter& w, const StragglerReport& r) {
  w.Key("stragglers").BeginArray();
  for (const Straggler& s : r.stragglers) {
    w.BeginObject().Key("rank").Int(s.rank).Key("host").String(s.host);
    w.Key("caused_delay_ns").Int(s.caused_delay_ns);
    OptionalInt(w.Key("step_time_loss_ns"), s.step_time_loss_ns);
    w.Key("step_losses").BeginArray();
    for (const auto& loss : s.step_losses)
      w.BeginObject().Key("step").Int(loss.step).Key("loss_ns").Int(loss.loss_ns).EndObject();
    w.EndArray().Key("last_arriver_share").Fixed(s.last_arriver_share, 4);
    w.Key("steps").BeginArray();
    for (const auto step : s.steps) w.Int(step);
    w.EndArray().Key("category").String(s.category);
    w.Key("evidence").BeginObject().Key("worker_ns").Int(s.evidence.worker_ns);
    w.Key("median_ns").Int(s.evidence.median_ns).Key("top").BeginArray();
    for (const NamedExcess& e : s.evidence.top) {
      w.BeginObject().Key("name").String(e.name).Key("worker_ns").Int(e.worker_ns);
      w.Key("median_ns").Int(e.median_ns).EndObject();
    }
    w.EndArray().EndObject().Key("reason").String(s.reason);
    OptionalInt(w.Key("clock_error_bound_ns"),
                r.clock_bound_known ? std::optional<TimeNs>(s.clock_error_bound_ns) : std::nullopt);
    w.Key("compute_z").Fixed(s.compute_z, 2);
    if (s.max_cpu_percent >= 0) {
      w.Key("host_evidence").BeginObject().Key("max_cpu_percent").Fixed(s.max_cpu_percent, 1);
      w.Key("min_gpu_sm_clock_mhz").Int(s.min_gpu_sm_clock_mhz);
      w.Key("gpu_throttle_reasons").Uint(s.gpu_throttle_reasons).EndObject();
    }
    w.EndObject();
  }
  w.EndArray().Key("aligned").Bool(r.aligned);
  w.Key("clock_basis").String(ClockBasisName(r.clock_basis));
  OptionalInt(w.Key("clock_error_bound_ns"),
              r.clock_bound_known ? std::optional<TimeNs>(r.clock_error_bound_ns) : std::nullopt);
  w.Key("total_caused_delay_ns").Int(r.total_caused_delay_ns);
  OptionalInt(w.Key("step_time_loss_ns"), r.step_time_loss_ns);
  if (!r.loss_error.empty()) w.Key("loss_error").String(r.loss_error);
  w.Key("window_step_time_ns").Int(r.window_step_time_ns).Key("workers").BeginArray();
  for (const WorkerLateness& l : r.workers) {
    w.BeginObject().Key("rank").Int(l.rank).Key("caused_delay_ns").Int(l.caused_delay_ns);
    w.Key("last_arrivals").Uint(l.last_arrivals).Key("collectives").Uint(l.collectives);
    w.Key("last_arriver_share").Fixed(l.last_arriver_share, 4);
    w.Key("compute_z").Fixed(l.compute_z, 2).Key("mean_step_ns").Int(l.mean_step_ns).EndObject();
  }
  w.EndArray();
}

void Bandwidth(JsonWriter& w, const BandwidthReport& r) {
  const bool link = r.link_gbytes_per_s > 0;
  w.Key("link_gbytes_per_s");
  if (link) {
    w.Double(r.link_gbytes_per_s);
  } else {
    w.Null();
  }
  OptionalFixed(w.Key("median_busbw_gbytes_per_s"), r.median_busbw_gbytes_per_s, 3);
  OptionalFixed(w.Key("median_efficiency"), r.median_efficiency, 4);
  OptionalInt(w.Key("expected_allreduce_ns"), r.expected_allreduce_ns);
  w.Key("measured_allreduce_ns").Int(r.measured_allreduce_ns).Key("steps").BeginArray();
  for (const StepCollectiveTime& s : r.steps) {
    w.BeginObject().Key("step").Int(s.step).Key("bytes").Int(s.bytes);
    w.Key("transfer_ns").Int(s.transfer_ns).Key("allreduce_bytes").Int(s.allreduce_bytes);
    w.Key("allreduce_transfer_ns").Int(s.allreduce_transfer_ns);
    w.Key("other_bytes").Int(s.other_bytes);
    OptionalFixed(w.Key("busbw_gbytes_per_s"),
                  s.bytes > 0 ? std::optional(s.busbw_gbytes_per_s) : std::nullopt, 3);
    OptionalFixed(w.Key("efficiency"),
                  link && s.bytes > 0 ? std::optional(s.efficiency) : std::nullopt, 4);
    w.EndObject();
  }
  w.EndArray().Key("collectives").BeginArray();
  for (const CollectiveBandwidth& c : r.collectives) {
    w.BeginObject().Key("communicator").String(c.communicator);
    w.Key("op").String(common::CollectiveOpName(c.op)).Key("sequence").Int(c.sequence);
    w.Key("step").Int(c.step).Key("bytes").Int(c.bytes).Key("nranks").Int(c.nranks);
    // A collective that took no measurable time has no bandwidth.
    const bool timed = c.transfer_ns > 0;
    w.Key("transfer_ns").Int(c.transfer_ns);
    OptionalFixed(w.Key("algbw_gbytes_per_s"),
                  timed ? std::optional(c.algbw_gbytes_per_s) : std::nullopt, 3);
    OptionalFixed(w.Key("busbw_gbytes_per_s"),
                  timed ? std::optional(c.busbw_gbytes_per_s) : std::nullopt, 3);
    OptionalFixed(w.Key("efficiency"), timed && link ? std::optional(c.efficiency) : std::nullopt,
                  4);
    w.EndObject();
  }
  w.EndArray();
}

// workers_only: the matrix alone ("steps" is empty).
void Pod(JsonWriter& w, const PodView& v, bool workers_only) {
  w.Key("steps").BeginArray();
  for (const PodStep& s : workers_only ? std::span<const PodStep>() : std::span(v.steps)) {
    w.BeginObject().Key("step").Int(s.step).Key("median_step_ns").Int(s.median_step_ns);
    w.Key("rows").BeginArray();
    for (const PodRow& row : s.rows) {
      w.BeginObject().Key("rank").Int(row.rank).Key("step_ns").Int(row.step_ns);
      w.Key("deviation_ns").Int(row.deviation_ns).Key("deviation_pct").Fixed(row.deviation_pct, 2);
      BreakdownFields(w, row.breakdown);
      w.EndObject();
    }
    w.EndArray().EndObject();
  }
  w.EndArray().Key("matrix").BeginObject().Key("ranks").BeginArray();
  for (const auto rank : v.ranks) w.Int(rank);
  w.EndArray().Key("steps").BeginArray();
  for (const auto step : v.step_numbers) w.Int(step);
  w.EndArray().Key("step_time_ns").BeginArray();
  for (const auto& times : v.step_time_ns) {
    w.BeginArray();
    for (const auto ns : times) w.Int(ns);
    w.EndArray();
  }
  w.EndArray().EndObject();
}

void TensorCores(JsonWriter& w, const TensorCoreTime& t) {
  w.BeginObject().Key("compute_ns").Int(t.compute_ns).Key("tensor_core_ns").Int(t.tensor_core_ns);
  w.Key("fp32_gemm_ns").Int(t.fp32_gemm_ns).Key("kernel_ns").Int(t.kernel_ns);
  w.Key("share").Fixed(t.share(), 4).EndObject();
}

void KernelList(JsonWriter& w, const std::vector<KernelStats>& list) {
  w.BeginArray();
  for (const KernelStats& k : list) {
    w.BeginObject().Key("name").String(k.name).Key("class").String(k.kernel_class);
    w.Key("count").Uint(k.count).Key("total_ns").Int(k.total_ns).Key("mean_ns").Int(k.mean_ns());
    w.Key("min_ns").Int(k.min_ns).Key("max_ns").Int(k.max_ns).Key("share").Fixed(k.share, 4);
    w.Key("tensor_core").Bool(k.tensor_core).Key("math").String(k.math);
    w.Key("math_rule").String(k.math_rule).Key("library").Bool(k.library);
    Fraction(w.Key("blocks_per_sm"), k.blocks_per_sm);
    Fraction(w.Key("achieved_occupancy"), k.achieved_occupancy).EndObject();
  }
  w.EndArray();
}

// workers_only: the pod-wide list alone (each worker's list is per worker x kernel).
void Kernels(JsonWriter& w, const KernelReport& r, bool workers_only) {
  KernelList(w.Key("pod"), r.pod);
  TensorCores(w.Key("tensor_cores"), r.tensor_cores);
  if (workers_only) return;
  w.Key("workers").BeginArray();
  for (const auto& worker : r.workers) {
    w.BeginObject().Key("rank").Int(worker.rank);
    TensorCores(w.Key("tensor_cores"), worker.tensor_cores);
    KernelList(w.Key("top"), worker.top);
    w.EndObject();
  }
  w.EndArray();
}

void GpuFields(JsonWriter& w, const GpuFigures& f) {
  w.Key("span_ns").Int(f.span_ns).Key("busy_ns").Int(f.busy_ns);
  w.Key("gpu_utilization").Fixed(f.gpu_utilization, 4);
  Fraction(w.Key("sm_efficiency"), f.sm_efficiency);
  Fraction(w.Key("achieved_occupancy"), f.achieved_occupancy);
}

void GpuPodFields(JsonWriter& w, const GpuPod& p) {
  Fraction(w.Key("median_gpu_utilization"), p.median_gpu_utilization);
  Fraction(w.Key("median_sm_efficiency"), p.median_sm_efficiency);
  Fraction(w.Key("median_achieved_occupancy"), p.median_achieved_occupancy);
  w.Key("least_utilized").BeginArray();
  for (const auto rank : p.least_utilized) w.Int(rank);
  w.EndArray();
}

// workers_only: each worker's totals, without its steps.
void Gpu(JsonWriter& w, const GpuReport& r, bool workers_only) {
  w.Key("workers").BeginArray();
  for (const WorkerGpu& g : r.workers) {
    w.BeginObject().Key("rank").Int(g.rank).Key("device").String(g.device);
    w.Key("kernels").Uint(g.kernels);
    w.Key("kernels_without_occupancy").Uint(g.kernels_without_occupancy);
    GpuFields(w, g.total);
    if (workers_only) {
      w.Key("step_count").Uint(g.steps.size()).EndObject();
      continue;
    }
    w.Key("steps").BeginArray();
    for (const auto& step : g.steps) {
      w.BeginObject().Key("step").Int(step.step);
      GpuFields(w, step.figures);
      w.EndObject();
    }
    w.EndArray().EndObject();
  }
  w.EndArray().Key("pod").BeginObject();
  GpuPodFields(w, r.pod);
  w.EndObject();
}

void OperatorFields(JsonWriter& w, const OperatorStats& s) {
  w.Key("name").String(s.name).Key("calls").Uint(s.calls);
  w.Key("host_total_ns").Int(s.host_total_ns).Key("host_self_ns").Int(s.host_self_ns);
  w.Key("device_total_ns").Int(s.device_total_ns).Key("device_self_ns").Int(s.device_self_ns);
}

// workers_only: the pod-wide list alone.
void Operators(JsonWriter& w, const OperatorReport& r, bool workers_only) {
  w.Key("pod").BeginArray();
  for (const auto& op : r.pod) {
    w.BeginObject();
    OperatorFields(w, op.stats);
    w.Key("costliest").BeginArray();
    for (const OperatorCost& cost : op.costliest) {
      w.BeginObject().Key("rank").Int(cost.rank).Key("device_total_ns").Int(cost.device_total_ns);
      w.Key("host_total_ns").Int(cost.host_total_ns).EndObject();
    }
    w.EndArray().EndObject();
  }
  w.EndArray();
  if (workers_only) return;
  w.Key("workers").BeginArray();
  for (const auto& worker : r.workers) {
    w.BeginObject().Key("rank").Int(worker.rank).Key("top").BeginArray();
    for (const OperatorStats& s : worker.top) {
      w.BeginObject();
      OperatorFields(w, s);
      w.EndObject();
    }
    w.EndArray().EndObject();
  }
  w.EndArray();
}

// workers_only: each worker's totals, without its steps.
void Input(JsonWriter& w, const InputReport& r, bool workers_only) {
  w.Key("moderate_share").Fixed(r.options.moderate_share, 4);
  w.Key("high_share").Fixed(r.options.high_share, 4).Key("workers").BeginArray();
  for (const WorkerInput& in : r.workers) {
    w.BeginObject().Key("rank").Int(in.rank).Key("step_ns").Int(in.step_ns);
    w.Key("input_wait_ns").Int(in.input_wait_ns).Key("dataloader_ns").Int(in.dataloader_ns);
    w.Key("input_share").Fixed(in.input_share, 4);
    w.Key("verdict").String(InputVerdictName(in.verdict));
    if (workers_only) {
      w.Key("step_count").Uint(in.steps.size()).EndObject();
      continue;
    }
    w.Key("steps").BeginArray();
    for (const StepInput& st : in.steps) {
      w.BeginObject().Key("step").Int(st.step).Key("step_ns").Int(st.step_ns);
      w.Key("input_wait_ns").Int(st.input_wait_ns).Key("dataloader_ns").Int(st.dataloader_ns);
      w.Key("input_share").Fixed(st.input_share(), 4).EndObject();
    }
    w.EndArray().EndObject();
  }
  w.EndArray();
  Fraction(w.Key("median_input_share"), r.median_input_share).Key("input_bound").BeginArray();
  for (const auto rank : r.input_bound) w.Int(rank);
  w.EndArray();
}

void Overview(JsonWriter& w, const OverviewReport& o) {
  const PodBreakdown& b = o.breakdown;
  w.Key("workers").Uint(o.workers).Key("steps").Uint(o.steps);
  w.Key("step_p50_ns").Int(o.step_p50_ns).Key("step_max_ns").Int(o.step_max_ns);
  w.Key("breakdown").BeginObject().Key("step_ns").Int(b.step_ns);
  const std::pair<const char*, TimeNs> shares[] = {
      {"compute_share", b.compute_ns},         {"overlap_share", b.overlap_ns},
      {"comm_wait_share", b.comm_wait_ns},     {"comm_transfer_share", b.comm_transfer_ns},
      {"memcpy_share", b.memcpy_ns},           {"idle_input_share", b.idle_input_ns},
      {"idle_launch_share", b.idle_launch_ns}, {"idle_host_share", b.idle_host_ns},
      {"idle_other_share", b.idle_other_ns}};
  for (const auto& [key, ns] : shares) w.Key(key).Fixed(b.Share(ns), 4);
  w.EndObject().Key("gpu").BeginObject();
  GpuPodFields(w, o.gpu);
  w.Key("tensor_core_share").Fixed(o.tensor_core_share, 4);
  w.Key("fp32_gemm_share").Fixed(o.fp32_gemm_share, 4);
  OptionalFixed(w.Key("cast_copy_share"), o.cast_copy_share, 4).EndObject();
  w.Key("communication").BeginObject();
  w.Key("exposed_share").Fixed(o.exposed_communication_share, 4);
  OptionalFixed(w.Key("overlap_pct"), o.overlap_pct, 2);
  BandwidthFields(w, o.median_busbw_gbytes_per_s, o.link_gbytes_per_s, o.median_efficiency);
  const ParallelismReport& p = o.parallelism;
  if (p.communicators.empty()) {
    w.Key("dominant_kind").Null().Key("dominant_kind_share").Null();
  } else {
    w.Key("dominant_kind").String(ParallelismKindName(p.dominant));
    w.Key("dominant_kind_share").Fixed(p.dominant_share, 4);
  }
  w.Key("communicators").BeginArray();
  for (const CommunicatorUse& c : p.communicators) {
    w.BeginObject().Key("communicator").String(c.communicator);
    w.Key("description").String(c.description).Key("size").Int(c.size);
    w.Key("kind").String(ParallelismKindName(c.kind)).Key("reason").String(c.reason);
    w.Key("calls").Uint(c.calls).Key("calls_per_step").Fixed(c.CallsPerStep(), 2);
    w.Key("bytes").Int(c.bytes).Key("kernel_ns").Int(c.kernel_ns);
    w.Key("exposed_ns").Int(c.exposed_ns).Key("forward_calls").Uint(c.forward_calls);
    w.Key("backward_calls").Uint(c.backward_calls);
    w.Key("unknown_pass_calls").Uint(c.unknown_pass_calls).Key("members").BeginArray();
    for (const auto member : c.members) w.Int(member);
    w.EndArray().EndObject();
  }
  w.EndArray().Key("communicator_groups").BeginArray();
  for (const CommunicatorGroup& g : p.groups) {
    w.BeginObject().Key("kind").String(ParallelismKindName(g.kind));
    w.Key("description").String(g.description).Key("size").Int(g.size);
    w.Key("communicators").Uint(g.communicators).Key("example").String(g.example);
    w.Key("reason").String(g.reason).Key("calls_per_step").Fixed(g.CallsPerStep(), 2);
    w.Key("kernel_ns").Int(g.kernel_ns).Key("exposed_ns").Int(g.exposed_ns).EndObject();
  }
  w.EndArray().EndObject().Key("straggler_count").Uint(o.straggler_count);
  w.Key("recommendations").BeginArray();
  for (const Recommendation& r : o.recommendations) {
    w.BeginObject().Key("rule").String(r.rule).Key("title").String(r.title);
    w.Key("advice").String(r.advice).Key("step_share").Fixed(r.step_share, 4);
    if (!r.subject.empty()) w.Key("subject").String(r.subject);
    w.Key("evidence").BeginObject();
    for (const auto& [name, value] : r.evidence) w.Key(name).Double(value);
    w.EndObject().Key("ranks").BeginArray();
    for (const auto rank : r.ranks) w.Int(rank);
    w.EndArray().EndObject();
  }
  w.EndArray();
}

// workers_only: without the timelines.
void Memory(JsonWriter& w, const MemoryReport& r, bool workers_only) {
  w.Key("workers").BeginArray();
  for (const WorkerMemory& m : r.workers) {
    w.BeginObject().Key("rank").Int(m.rank).Key("devices").BeginArray();
    for (const DeviceMemory& dev : m.devices) {
      w.BeginObject().Key("device").Int(dev.device).Key("events").Uint(dev.events);
      KnownBytes(w.Key("peak_allocated_bytes"), dev.peak_allocated_bytes);
      w.Key("peak_time_ns").Int(dev.peak_time);
      KnownBytes(w.Key("peak_reserved_bytes"), dev.peak_reserved_bytes);
      OptionalInt(w.Key("total_memory_bytes"), dev.total_memory_bytes);
      OptionalInt(w.Key("headroom_bytes"), dev.headroom_bytes);
      if (!workers_only) {
        w.Key("timeline").BeginArray();
        for (const MemoryPoint& pt : dev.timeline) {
          w.BeginArray().Int(pt.time);
          KnownBytes(w, pt.allocated);
          KnownBytes(w, pt.reserved).EndArray();
        }
        w.EndArray();
      }
      w.EndObject();
    }
    w.EndArray().Key("top_operators").BeginArray();
    for (const OperatorAllocation& a : m.top_operators) {
      w.BeginObject().Key("name").String(a.name).Key("allocations").Uint(a.allocations);
      w.Key("bytes").Int(a.bytes).EndObject();
    }
    w.EndArray().EndObject();
  }
  w.EndArray().Key("nearest_oom");
  if (const auto& n = r.nearest_oom) {
    w.BeginObject().Key("rank").Int(n->rank).Key("device").Int(n->device);
    w.Key("peak_bytes").Int(n->peak_bytes).Key("total_memory_bytes").Int(n->total_memory_bytes);
    w.Key("headroom_bytes").Int(n->headroom_bytes).EndObject();
  } else {
    w.Null();
  }
}

void Temporal(JsonWriter& w, const TemporalReport& r) {
  w.Key("window").String(r.window == WindowMode::kHta ? "hta" : "steps");
  w.Key("workers").BeginArray();
  for (const WorkerTemporal& t : r.workers) {
    w.BeginObject().Key("rank").Int(t.rank).Key("idle_ns").Int(t.idle_ns);
    w.Key("compute_ns").Int(t.compute_ns).Key("non_compute_ns").Int(t.non_compute_ns);
    w.Key("kernel_time_ns").Int(t.kernel_time_ns).Key("overlap_pct").Fixed(t.overlap_pct, 2);
    w.Key("idle_by_stream").BeginArray();
    for (const StreamIdle& idle : t.idle_by_stream) {
      w.BeginObject().Key("device").Int(idle.device).Key("stream").Int(idle.stream);
      w.Key("host_wait_ns").Int(idle.host_wait_ns).Key("kernel_wait_ns").Int(idle.kernel_wait_ns);
      w.Key("other_ns").Int(idle.other_ns).EndObject();
    }
    w.EndArray().EndObject();
  }
  w.EndArray();
}

}  // namespace

std::string RenderJson(const common::CaptureView& capture, const AnalysisRequest& request,
                       const AnalysisResults& results) {
  JsonWriter w;
  // One report's members stand at the top level; several reports are members named after them.
  const bool nested = request.reports.size() > 1;
  w.BeginObject();
  for (const std::string& name : request.reports) {
    if (nested) w.Key(name).BeginObject();
    if (name == "summary") Summary(w, *results.summary);
    if (name == "steps") Steps(w, *results.breakdown);
    if (name == "overlap") Overlap(w, *results.breakdown, request.workers_only);
    if (name == "communication")
      Communication(w, *results.communication, capture, request.workers_only);
    if (name == "stragglers") Stragglers(w, *results.stragglers);
    if (name == "allreduce") Bandwidth(w, *results.bandwidth);
    if (name == "pod") Pod(w, *results.pod, request.workers_only);
    if (name == "kernels") Kernels(w, *results.kernels, request.workers_only);
    if (name == "gpu") Gpu(w, *results.gpu, request.workers_only);
    if (name == "overview") Overview(w, *results.overview);
    if (name == "operators") Operators(w, *results.operators, request.workers_only);
    if (name == "memory") Memory(w, *results.memory, request.workers_only);
    if (name == "input") Input(w, *results.input, request.workers_only);
    if (name == "temporal") Temporal(w, *results.temporal);
    if (nested) w.EndObject();
  }
  // The inputs' disagreements (not one whole job), beside the report(s).
  w.Key("warnings").BeginArray();
  for (const std::string& warning : results.warnings) w.String(warning);
  w.EndArray().EndObject().EndLine();
  return std::move(w.buffer());
}

}  // namespace podscope::analysis
