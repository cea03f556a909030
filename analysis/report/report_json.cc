#include "analysis/report/report_json.h"

#include <optional>

#include "common/json_writer.h"

namespace podscope::analysis {
namespace {

using common::JsonWriter;
using namespace analysis;

// An unknown figure is null, never 0.
void OptionalFixed(JsonWriter& w, const std::optional<double>& v, int decimals) {
  if (v) {
    w.Fixed(*v, decimals);
  } else {
    w.Raw("null");
  }
}

// A link bandwidth is given or not (0): null when not.
std::optional<double> GivenLink(double link_gbytes_per_s) {
  if (link_gbytes_per_s > 0) return link_gbytes_per_s;
  return std::nullopt;
}

void BreakdownFields(JsonWriter& w, const StepBreakdown& s) {
  w.Key("span_ns").Int(s.span_ns).Char(',').Key("compute_ns").Int(s.compute_ns);
  w.Char(',')
      .Key("overlap_ns")
      .Int(s.overlap_ns)
      .Char(',')
      .Key("communication_ns")
      .Int(s.communication_ns);
  w.Char(',')
      .Key("comm_wait_ns")
      .Int(s.comm_wait_ns)
      .Char(',')
      .Key("comm_transfer_ns")
      .Int(s.comm_transfer_ns);
  w.Char(',').Key("memcpy_ns").Int(s.memcpy_ns).Char(',').Key("memcpy_h2d_ns").Int(s.memcpy_h2d_ns);
  w.Char(',')
      .Key("memcpy_d2h_ns")
      .Int(s.memcpy_d2h_ns)
      .Char(',')
      .Key("memcpy_d2d_ns")
      .Int(s.memcpy_d2d_ns);
  w.Char(',').Key("memcpy_other_ns").Int(s.memcpy_other_ns);
  w.Char(',')
      .Key("idle_input_ns")
      .Int(s.idle_input_ns)
      .Char(',')
      .Key("idle_launch_ns")
      .Int(s.idle_launch_ns);
  w.Char(',')
      .Key("idle_host_ns")
      .Int(s.idle_host_ns)
      .Char(',')
      .Key("idle_other_ns")
      .Int(s.idle_other_ns);
  w.Char(',')
      .Key("before_ns")
      .Int(s.before_ns)
      .Char(',')
      .Key("before_input_ns")
      .Int(s.before_input_ns);
  w.Char(',')
      .Key("before_launch_ns")
      .Int(s.before_launch_ns)
      .Char(',')
      .Key("before_host_ns")
      .Int(s.before_host_ns);
  w.Char(',').Key("before_other_ns").Int(s.before_other_ns);
}

void Steps(JsonWriter& w, const std::vector<WorkerBreakdown>& b) {
  w.Raw("{\"workers\":[");
  for (size_t i = 0; i < b.size(); ++i) {
    w.Raw(i ? "," : "").Raw("{\"rank\":").Int(b[i].rank);
    w.Raw(",\"step_source\":").String(StepSourceName(b[i].step_source)).Raw(",\"steps\":[");
    for (size_t s = 0; s < b[i].steps.size(); ++s) {
      w.Raw(s ? "," : "").Raw("{\"step\":").Int(b[i].steps[s].step).Char(',');
      BreakdownFields(w, b[i].steps[s]);
      w.Char('}');
    }
    w.Raw("]}");
  }
  w.Raw("]}");
}

// workers_only: each worker's totals over its steps instead of the steps.
void Overlap(JsonWriter& w, const std::vector<WorkerBreakdown>& b, bool workers_only) {
  w.Raw("{\"workers\":[");
  for (size_t i = 0; i < b.size(); ++i) {
    TimeNs overlap = 0, comm = 0, computation = 0, communication = 0;
    w.Raw(i ? "," : "").Raw("{\"rank\":").Int(b[i].rank);
    if (!workers_only) w.Raw(",\"steps\":[");
    for (size_t s = 0; s < b[i].steps.size(); ++s) {
      const StepBreakdown& st = b[i].steps[s];
      overlap += st.overlap_ns;
      comm += st.overlap_ns + st.communication_ns;
      computation += st.compute_ns;
      communication += st.communication_ns;
      if (workers_only) continue;
      w.Raw(s ? "," : "")
          .Raw("{\"step\":")
          .Int(st.step)
          .Raw(",\"computation_ns\":")
          .Int(st.compute_ns);
      w.Raw(",\"communication_ns\":")
          .Int(st.communication_ns)
          .Raw(",\"overlap_ns\":")
          .Int(st.overlap_ns);
      w.Raw(",\"overlap_pct\":");
      OptionalFixed(w, st.OverlapPercent(), 2);
      w.Char('}');
    }
    if (workers_only) {
      w.Raw(",\"step_count\":")
          .Uint(b[i].steps.size())
          .Raw(",\"computation_ns\":")
          .Int(computation);
      w.Raw(",\"communication_ns\":").Int(communication).Raw(",\"overlap_ns\":").Int(overlap);
    } else {
      w.Char(']');
    }
    w.Raw(",\"overlap_pct\":");
    OptionalFixed(w, comm > 0 ? std::optional<double>(100.0 * overlap / comm) : std::nullopt, 2);
    w.Char('}');
  }
  w.Raw("]}");
}

// The capture's bus bandwidth fields, as the summary and the overview give them.
void BandwidthFields(JsonWriter& w, const std::optional<double>& median_busbw, double link,
                     const std::optional<double>& median_efficiency) {
  w.Raw(",\"median_busbw_gbytes_per_s\":");
  OptionalFixed(w, median_busbw, 3);
  w.Raw(",\"link_gbytes_per_s\":");
  OptionalFixed(w, GivenLink(link), 3);
  w.Raw(",\"median_efficiency\":");
  OptionalFixed(w, median_efficiency, 4);
}

void OptionalInt(JsonWriter& w, const std::optional<TimeNs>& v) {
  if (v.has_value()) {
    w.Int(*v);
  } else {
    w.Raw("null");
  }
}

void Communication(JsonWriter& w, const CommunicationReport& c, const common::CaptureView& capture,
                   bool workers_only) {
  w.Raw("{\"aligned\":")
      .Bool(c.aligned)
      .Raw(",\"clock_basis\":")
      .String(ClockBasisName(c.clock_basis));
  w.Raw(",\"clock_error_bound_ns\":");
  OptionalInt(w,
              c.clock_bound_known() ? std::optional<TimeNs>(c.clock_error_bound_ns) : std::nullopt);
  w.Raw(",\"workers\":[");
  for (size_t i = 0; i < c.workers.size(); ++i) {
    const auto& t = c.workers[i];
    w.Raw(i ? "," : "").Raw("{\"rank\":").Int(t.rank).Raw(",\"collectives\":").Uint(t.collectives);
    w.Raw(",\"wait_ns\":").Int(t.wait_ns).Raw(",\"transfer_ns\":").Int(t.transfer_ns).Char('}');
  }
  if (workers_only) {
    w.Raw("]}");
    return;
  }
  w.Raw("],\"collectives\":[");
  for (size_t i = 0; i < c.collectives.size(); ++i) {
    const MatchedCollective& m = c.collectives[i];
    w.Raw(i ? "," : "").Raw("{\"communicator\":").String(m.communicator);
    w.Raw(",\"op\":").String(common::CollectiveOpName(m.op)).Raw(",\"sequence\":").Int(m.sequence);
    w.Raw(",\"bytes\":").Int(m.bytes).Raw(",\"nranks\":").Int(m.nranks).Raw(",\"ranks\":[");
    for (size_t p = 0; p < m.participants.size(); ++p) {
      const Participant& q = m.participants[p];
      w.Raw(p ? "," : "").Raw("{\"rank\":").Int(capture.worker(q.worker).info.rank);
      w.Raw(",\"arrival_ns\":").Int(q.arrival).Raw(",\"duration_ns\":").Int(q.duration);
      w.Raw(",\"wait_ns\":").Int(q.wait).Raw(",\"transfer_ns\":").Int(q.transfer).Char('}');
    }
    w.Raw("]}");
  }
  w.Raw("]}");
}

void Profile(JsonWriter& w, const WorkerProfile& p) {
  w.Raw("{\"rank\":").Int(p.rank).Raw(",\"host\":").String(p.host).Raw(",\"steps\":").Uint(p.steps);
  w.Raw(",\"span_ns\":")
      .Int(p.span_ns)
      .Raw(",\"compute_ns\":")
      .Int(p.compute_ns)
      .Raw(",\"overlap_ns\":")
      .Int(p.overlap_ns);
  w.Raw(",\"comm_wait_ns\":")
      .Int(p.comm_wait_ns)
      .Raw(",\"comm_transfer_ns\":")
      .Int(p.comm_transfer_ns);
  w.Raw(",\"memcpy_ns\":")
      .Int(p.memcpy_ns)
      .Raw(",\"idle_ns\":")
      .Int(p.idle_ns)
      .Raw(",\"before_ns\":")
      .Int(p.before_ns);
  w.Char('}');
}

void Summary(JsonWriter& w, const SummaryReport& s) {
  w.Raw("{\"job\":")
      .String(s.job)
      .Raw(",\"ranks\":")
      .Uint(s.ranks)
      .Raw(",\"hosts\":")
      .Uint(s.hosts);
  w.Raw(",\"steps\":")
      .Uint(s.steps)
      .Raw(",\"first_step\":")
      .Int(s.first_step)
      .Raw(",\"last_step\":")
      .Int(s.last_step);
  w.Raw(",\"step_source\":").String(s.step_source);
  w.Raw(",\"step_time\":{\"min_ns\":").Int(s.step_min_ns).Raw(",\"p50_ns\":").Int(s.step_p50_ns);
  w.Raw(",\"p90_ns\":").Int(s.step_p90_ns).Raw(",\"max_ns\":").Int(s.step_max_ns);
  w.Raw(",\"window_step_time_ns\":").Int(s.window_step_time_ns).Char('}');
  w.Raw(",\"median_worker\":");
  Profile(w, s.median_worker);
  w.Raw(",\"worst_worker\":");
  Profile(w, s.worst_worker);
  w.Raw(",\"worst_is_straggler\":").Bool(s.worst_is_straggler);
  w.Raw(",\"exposed_communication_ns\":").Int(s.exposed_communication_ns);
  w.Raw(",\"exposed_communication_share\":").Fixed(s.exposed_communication_share, 4);
  w.Raw(",\"overlap_pct\":");
  OptionalFixed(w, s.overlap_pct, 2);
  w.Raw(",\"straggler_count\":").Uint(s.straggler_count).Raw(",\"step_time_loss_ns\":");
  OptionalInt(w, s.step_time_loss_ns);
  w.Raw(",\"stragglers\":[");
  for (size_t i = 0; i < s.stragglers.size(); ++i) {
    const Straggler& g = s.stragglers[i];
    w.Raw(i ? ",{\"rank\":" : "{\"rank\":").Int(g.rank).Raw(",\"host\":").String(g.host);
    w.Raw(",\"step_time_loss_ns\":");
    OptionalInt(w, g.step_time_loss_ns);
    w.Raw(",\"caused_delay_ns\":").Int(g.caused_delay_ns).Raw(",\"category\":").String(g.category);
    w.Raw(",\"reason\":").String(g.reason).Char('}');
  }
  w.Raw("],\"allreduce\":{\"collectives\":").Uint(s.collectives);
  BandwidthFields(w, s.median_busbw_gbytes_per_s, s.link_gbytes_per_s, s.median_efficiency);
  w.Raw(",\"measured_allreduce_ns\":")
      .Int(s.measured_allreduce_ns)
      .Raw(",\"expected_allreduce_ns\":");
  OptionalInt(w, s.expected_allreduce_ns);
  w.Raw("}}");
}

void Stragglers(JsonWriter& w, const StragglerReport& r) {
  w.Raw("{\"stragglers\":[");
  for (size_t i = 0; i < r.stragglers.size(); ++i) {
    const Straggler& s = r.stragglers[i];
    w.Raw(i ? "," : "").Raw("{\"rank\":").Int(s.rank).Raw(",\"host\":").String(s.host);
    w.Raw(",\"caused_delay_ns\":").Int(s.caused_delay_ns).Raw(",\"step_time_loss_ns\":");
    OptionalInt(w, s.step_time_loss_ns);
    w.Raw(",\"step_losses\":[");
    for (size_t k = 0; k < s.step_losses.size(); ++k) {
      w.Raw(k ? ",{\"step\":" : "{\"step\":").Int(s.step_losses[k].step);
      w.Raw(",\"loss_ns\":").Int(s.step_losses[k].loss_ns).Char('}');
    }
    w.Raw("],\"last_arriver_share\":").Fixed(s.last_arriver_share, 4).Raw(",\"steps\":[");
    for (size_t k = 0; k < s.steps.size(); ++k) w.Raw(k ? "," : "").Int(s.steps[k]);
    w.Raw("],\"category\":").String(s.category);
    w.Raw(",\"evidence\":{\"worker_ns\":")
        .Int(s.evidence.worker_ns)
        .Raw(",\"median_ns\":")
        .Int(s.evidence.median_ns);
    w.Raw(",\"top\":[");
    for (size_t k = 0; k < s.evidence.top.size(); ++k) {
      const NamedExcess& e = s.evidence.top[k];
      w.Raw(k ? ",{\"name\":" : "{\"name\":")
          .String(e.name)
          .Raw(",\"worker_ns\":")
          .Int(e.worker_ns);
      w.Raw(",\"median_ns\":").Int(e.median_ns).Char('}');
    }
    w.Raw("]},\"reason\":").String(s.reason);
    w.Raw(",\"clock_error_bound_ns\":");
    OptionalInt(w,
                r.clock_bound_known ? std::optional<TimeNs>(s.clock_error_bound_ns) : std::nullopt);
    w.Raw(",\"compute_z\":").Fixed(s.compute_z, 2);
    if (s.max_cpu_percent >= 0) {
      w.Raw(",\"host_evidence\":{\"max_cpu_percent\":").Fixed(s.max_cpu_percent, 1);
      w.Raw(",\"min_gpu_sm_clock_mhz\":").Int(s.min_gpu_sm_clock_mhz);
      w.Raw(",\"gpu_throttle_reasons\":").Uint(s.gpu_throttle_reasons).Char('}');
    }
    w.Char('}');
  }
  w.Raw("],\"aligned\":")
      .Bool(r.aligned)
      .Raw(",\"clock_basis\":")
      .String(ClockBasisName(r.clock_basis));
  w.Raw(",\"clock_error_bound_ns\":");
  OptionalInt(w,
              r.clock_bound_known ? std::optional<TimeNs>(r.clock_error_bound_ns) : std::nullopt);
  w.Raw(",\"total_caused_delay_ns\":").Int(r.total_caused_delay_ns).Raw(",\"step_time_loss_ns\":");
  OptionalInt(w, r.step_time_loss_ns);
  if (!r.loss_error.empty()) w.Raw(",\"loss_error\":").String(r.loss_error);
  w.Raw(",\"window_step_time_ns\":").Int(r.window_step_time_ns).Raw(",\"workers\":[");
  for (size_t i = 0; i < r.workers.size(); ++i) {
    const WorkerLateness& l = r.workers[i];
    w.Raw(i ? "," : "")
        .Raw("{\"rank\":")
        .Int(l.rank)
        .Raw(",\"caused_delay_ns\":")
        .Int(l.caused_delay_ns);
    w.Raw(",\"last_arrivals\":").Uint(l.last_arrivals).Raw(",\"collectives\":").Uint(l.collectives);
    w.Raw(",\"last_arriver_share\":").Fixed(l.last_arriver_share, 4);
    w.Raw(",\"compute_z\":")
        .Fixed(l.compute_z, 2)
        .Raw(",\"mean_step_ns\":")
        .Int(l.mean_step_ns)
        .Char('}');
  }
  w.Raw("]}");
}

void Bandwidth(JsonWriter& w, const BandwidthReport& r) {
  const bool link = r.link_gbytes_per_s > 0;
  w.Raw("{\"link_gbytes_per_s\":");
  if (link) {
    w.Double(r.link_gbytes_per_s);
  } else {
    w.Raw("null");
  }
  w.Raw(",\"median_busbw_gbytes_per_s\":");
  OptionalFixed(w, r.median_busbw_gbytes_per_s, 3);
  w.Raw(",\"median_efficiency\":");
  OptionalFixed(w, r.median_efficiency, 4);
  w.Raw(",\"expected_allreduce_ns\":");
  if (r.expected_allreduce_ns) {
    w.Int(*r.expected_allreduce_ns);
  } else {
    w.Raw("null");
  }
  w.Raw(",\"measured_allreduce_ns\":").Int(r.measured_allreduce_ns).Raw(",\"steps\":[");
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const StepCollectiveTime& s = r.steps[i];
    w.Raw(i ? "," : "").Raw("{\"step\":").Int(s.step).Raw(",\"bytes\":").Int(s.bytes);
    w.Raw(",\"transfer_ns\":")
        .Int(s.transfer_ns)
        .Raw(",\"allreduce_bytes\":")
        .Int(s.allreduce_bytes);
    w.Raw(",\"allreduce_transfer_ns\":")
        .Int(s.allreduce_transfer_ns)
        .Raw(",\"other_bytes\":")
        .Int(s.other_bytes);
    w.Raw(",\"busbw_gbytes_per_s\":");
    OptionalFixed(w, s.bytes > 0 ? std::optional(s.busbw_gbytes_per_s) : std::nullopt, 3);
    w.Raw(",\"efficiency\":");
    OptionalFixed(w, link && s.bytes > 0 ? std::optional(s.efficiency) : std::nullopt, 4);
    w.Char('}');
  }
  w.Raw("],\"collectives\":[");
  for (size_t i = 0; i < r.collectives.size(); ++i) {
    const CollectiveBandwidth& c = r.collectives[i];
    w.Raw(i ? "," : "").Raw("{\"communicator\":").String(c.communicator);
    w.Raw(",\"op\":").String(common::CollectiveOpName(c.op)).Raw(",\"sequence\":").Int(c.sequence);
    w.Raw(",\"step\":")
        .Int(c.step)
        .Raw(",\"bytes\":")
        .Int(c.bytes)
        .Raw(",\"nranks\":")
        .Int(c.nranks);
    // A collective that took no measurable time has no bandwidth.
    const bool timed = c.transfer_ns > 0;
    w.Raw(",\"transfer_ns\":").Int(c.transfer_ns).Raw(",\"algbw_gbytes_per_s\":");
    OptionalFixed(w, timed ? std::optional(c.algbw_gbytes_per_s) : std::nullopt, 3);
    w.Raw(",\"busbw_gbytes_per_s\":");
    OptionalFixed(w, timed ? std::optional(c.busbw_gbytes_per_s) : std::nullopt, 3);
    w.Raw(",\"efficiency\":");
    OptionalFixed(w, timed && link ? std::optional(c.efficiency) : std::nullopt, 4);
    w.Char('}');
  }
  w.Raw("]}");
}

// workers_only: the matrix alone ("steps" is empty).
void Pod(JsonWriter& w, const PodView& v, bool workers_only) {
  w.Raw("{\"steps\":[");
  for (size_t i = 0; i < (workers_only ? 0 : v.steps.size()); ++i) {
    const PodStep& s = v.steps[i];
    w.Raw(i ? "," : "")
        .Raw("{\"step\":")
        .Int(s.step)
        .Raw(",\"median_step_ns\":")
        .Int(s.median_step_ns);
    w.Raw(",\"rows\":[");
    for (size_t r = 0; r < s.rows.size(); ++r) {
      const PodRow& row = s.rows[r];
      w.Raw(r ? "," : "").Raw("{\"rank\":").Int(row.rank).Raw(",\"step_ns\":").Int(row.step_ns);
      w.Raw(",\"deviation_ns\":")
          .Int(row.deviation_ns)
          .Raw(",\"deviation_pct\":")
          .Fixed(row.deviation_pct, 2)
          .Char(',');
      BreakdownFields(w, row.breakdown);
      w.Char('}');
    }
    w.Raw("]}");
  }
  w.Raw("],\"matrix\":{\"ranks\":[");
  for (size_t i = 0; i < v.ranks.size(); ++i) w.Raw(i ? "," : "").Int(v.ranks[i]);
  w.Raw("],\"steps\":[");
  for (size_t i = 0; i < v.step_numbers.size(); ++i) w.Raw(i ? "," : "").Int(v.step_numbers[i]);
  w.Raw("],\"step_time_ns\":[");
  for (size_t i = 0; i < v.step_time_ns.size(); ++i) {
    w.Raw(i ? ",[" : "[");
    for (size_t j = 0; j < v.step_time_ns[i].size(); ++j)
      w.Raw(j ? "," : "").Int(v.step_time_ns[i][j]);
    w.Char(']');
  }
  w.Raw("]}}");
}

// A fraction or null, to 4 decimals.
JsonWriter& Fraction(JsonWriter& w, const std::optional<double>& v) {
  return v ? w.Fixed(*v, 4) : w.Raw("null");
}

void TensorCores(JsonWriter& w, const TensorCoreTime& t) {
  w.Raw("{\"compute_ns\":").Int(t.compute_ns).Raw(",\"tensor_core_ns\":").Int(t.tensor_core_ns);
  w.Raw(",\"fp32_gemm_ns\":").Int(t.fp32_gemm_ns).Raw(",\"kernel_ns\":").Int(t.kernel_ns);
  w.Raw(",\"share\":").Fixed(t.share(), 4).Char('}');
}

void KernelList(JsonWriter& w, const std::vector<KernelStats>& list) {
  w.Char('[');
  for (size_t i = 0; i < list.size(); ++i) {
    const KernelStats& k = list[i];
    w.Raw(i ? "," : "").Raw("{\"name\":").String(k.name).Raw(",\"class\":").String(k.kernel_class);
    w.Raw(",\"count\":")
        .Uint(k.count)
        .Raw(",\"total_ns\":")
        .Int(k.total_ns)
        .Raw(",\"mean_ns\":")
        .Int(k.mean_ns());
    w.Raw(",\"min_ns\":")
        .Int(k.min_ns)
        .Raw(",\"max_ns\":")
        .Int(k.max_ns)
        .Raw(",\"share\":")
        .Fixed(k.share, 4);
    w.Raw(",\"tensor_core\":").Bool(k.tensor_core).Raw(",\"math\":").String(k.math);
    w.Raw(",\"math_rule\":").String(k.math_rule).Raw(",\"library\":").Bool(k.library);
    w.Raw(",\"blocks_per_sm\":");
    Fraction(w, k.blocks_per_sm).Raw(",\"achieved_occupancy\":");
    Fraction(w, k.achieved_occupancy).Char('}');
  }
  w.Char(']');
}

// workers_only: the pod-wide list alone (each worker's list is per worker x kernel).
void Kernels(JsonWriter& w, const KernelReport& r, bool workers_only) {
  w.Raw("{\"pod\":");
  KernelList(w, r.pod);
  w.Raw(",\"tensor_cores\":");
  TensorCores(w, r.tensor_cores);
  if (workers_only) {
    w.Char('}');
    return;
  }
  w.Raw(",\"workers\":[");
  for (size_t i = 0; i < r.workers.size(); ++i) {
    w.Raw(i ? "," : "").Raw("{\"rank\":").Int(r.workers[i].rank).Raw(",\"tensor_cores\":");
    TensorCores(w, r.workers[i].tensor_cores);
    w.Raw(",\"top\":");
    KernelList(w, r.workers[i].top);
    w.Char('}');
  }
  w.Raw("]}");
}

void GpuPodFields(JsonWriter& w, const GpuPod& p);

void GpuFields(JsonWriter& w, const GpuFigures& f) {
  w.Raw("\"span_ns\":").Int(f.span_ns).Raw(",\"busy_ns\":").Int(f.busy_ns);
  w.Raw(",\"gpu_utilization\":").Fixed(f.gpu_utilization, 4).Raw(",\"sm_efficiency\":");
  Fraction(w, f.sm_efficiency).Raw(",\"achieved_occupancy\":");
  Fraction(w, f.achieved_occupancy);
}

// workers_only: each worker's totals, without its steps.
void Gpu(JsonWriter& w, const GpuReport& r, bool workers_only) {
  w.Raw("{\"workers\":[");
  for (size_t i = 0; i < r.workers.size(); ++i) {
    const WorkerGpu& g = r.workers[i];
    w.Raw(i ? "," : "").Raw("{\"rank\":").Int(g.rank).Raw(",\"device\":").String(g.device);
    w.Raw(",\"kernels\":")
        .Uint(g.kernels)
        .Raw(",\"kernels_without_occupancy\":")
        .Uint(g.kernels_without_occupancy)
        .Char(',');
    GpuFields(w, g.total);
    if (workers_only) {
      w.Raw(",\"step_count\":").Uint(g.steps.size()).Char('}');
      continue;
    }
    w.Raw(",\"steps\":[");
    for (size_t s = 0; s < g.steps.size(); ++s) {
      w.Raw(s ? "," : "").Raw("{\"step\":").Int(g.steps[s].step).Char(',');
      GpuFields(w, g.steps[s].figures);
      w.Char('}');
    }
    w.Raw("]}");
  }
  w.Raw("],\"pod\":{");
  GpuPodFields(w, r.pod);
  w.Raw("}}");
}

void OperatorFields(JsonWriter& w, const OperatorStats& s) {
  w.Raw("\"name\":").String(s.name).Raw(",\"calls\":").Uint(s.calls);
  w.Raw(",\"host_total_ns\":").Int(s.host_total_ns).Raw(",\"host_self_ns\":").Int(s.host_self_ns);
  w.Raw(",\"device_total_ns\":")
      .Int(s.device_total_ns)
      .Raw(",\"device_self_ns\":")
      .Int(s.device_self_ns);
}

// workers_only: the pod-wide list alone.
void Operators(JsonWriter& w, const OperatorReport& r, bool workers_only) {
  w.Raw("{\"pod\":[");
  for (size_t i = 0; i < r.pod.size(); ++i) {
    w.Raw(i ? ",{" : "{");
    OperatorFields(w, r.pod[i].stats);
    w.Raw(",\"costliest\":[");
    for (size_t c = 0; c < r.pod[i].costliest.size(); ++c) {
      const OperatorCost& cost = r.pod[i].costliest[c];
      w.Raw(c ? "," : "")
          .Raw("{\"rank\":")
          .Int(cost.rank)
          .Raw(",\"device_total_ns\":")
          .Int(cost.device_total_ns);
      w.Raw(",\"host_total_ns\":").Int(cost.host_total_ns).Char('}');
    }
    w.Raw("]}");
  }
  w.Char(']');
  if (!workers_only) {
    w.Raw(",\"workers\":[");
    for (size_t i = 0; i < r.workers.size(); ++i) {
      w.Raw(i ? "," : "").Raw("{\"rank\":").Int(r.workers[i].rank).Raw(",\"top\":[");
      for (size_t k = 0; k < r.workers[i].top.size(); ++k) {
        w.Raw(k ? ",{" : "{");
        OperatorFields(w, r.workers[i].top[k]);
        w.Char('}');
      }
      w.Raw("]}");
    }
    w.Char(']');
  }
  w.Char('}');
}

// workers_only: each worker's totals, without its steps.
void Input(JsonWriter& w, const InputReport& r, bool workers_only) {
  w.Raw("{\"moderate_share\":")
      .Fixed(r.options.moderate_share, 4)
      .Raw(",\"high_share\":")
      .Fixed(r.options.high_share, 4);
  w.Raw(",\"workers\":[");
  for (size_t i = 0; i < r.workers.size(); ++i) {
    const WorkerInput& in = r.workers[i];
    w.Raw(i ? "," : "").Raw("{\"rank\":").Int(in.rank).Raw(",\"step_ns\":").Int(in.step_ns);
    w.Raw(",\"input_wait_ns\":")
        .Int(in.input_wait_ns)
        .Raw(",\"dataloader_ns\":")
        .Int(in.dataloader_ns);
    w.Raw(",\"input_share\":")
        .Fixed(in.input_share, 4)
        .Raw(",\"verdict\":")
        .String(InputVerdictName(in.verdict));
    if (workers_only) {
      w.Raw(",\"step_count\":").Uint(in.steps.size()).Char('}');
      continue;
    }
    w.Raw(",\"steps\":[");
    for (size_t s = 0; s < in.steps.size(); ++s) {
      const StepInput& st = in.steps[s];
      w.Raw(s ? "," : "").Raw("{\"step\":").Int(st.step).Raw(",\"step_ns\":").Int(st.step_ns);
      w.Raw(",\"input_wait_ns\":")
          .Int(st.input_wait_ns)
          .Raw(",\"dataloader_ns\":")
          .Int(st.dataloader_ns);
      w.Raw(",\"input_share\":").Fixed(st.input_share(), 4).Char('}');
    }
    w.Raw("]}");
  }
  w.Raw("],\"median_input_share\":");
  Fraction(w, r.median_input_share).Raw(",\"input_bound\":[");
  for (size_t i = 0; i < r.input_bound.size(); ++i) w.Raw(i ? "," : "").Int(r.input_bound[i]);
  w.Raw("]}");
}

void GpuPodFields(JsonWriter& w, const GpuPod& p) {
  w.Raw("\"median_gpu_utilization\":");
  Fraction(w, p.median_gpu_utilization).Raw(",\"median_sm_efficiency\":");
  Fraction(w, p.median_sm_efficiency).Raw(",\"median_achieved_occupancy\":");
  Fraction(w, p.median_achieved_occupancy).Raw(",\"least_utilized\":[");
  for (size_t i = 0; i < p.least_utilized.size(); ++i) w.Raw(i ? "," : "").Int(p.least_utilized[i]);
  w.Char(']');
}

void Overview(JsonWriter& w, const OverviewReport& o) {
  const PodBreakdown& b = o.breakdown;
  w.Raw("{\"workers\":").Uint(o.workers).Raw(",\"steps\":").Uint(o.steps);
  w.Raw(",\"step_p50_ns\":").Int(o.step_p50_ns).Raw(",\"step_max_ns\":").Int(o.step_max_ns);
  w.Raw(",\"breakdown\":{\"step_ns\":").Int(b.step_ns);
  const std::pair<const char*, TimeNs> parts[] = {
      {"compute", b.compute_ns},         {"overlap", b.overlap_ns},
      {"comm_wait", b.comm_wait_ns},     {"comm_transfer", b.comm_transfer_ns},
      {"memcpy", b.memcpy_ns},           {"idle_input", b.idle_input_ns},
      {"idle_launch", b.idle_launch_ns}, {"idle_host", b.idle_host_ns},
      {"idle_other", b.idle_other_ns}};
  for (const auto& [name, ns] : parts)
    w.Raw(",\"").Raw(name).Raw("_share\":").Fixed(b.Share(ns), 4);
  w.Raw("},\"gpu\":{");
  GpuPodFields(w, o.gpu);
  w.Raw(",\"tensor_core_share\":").Fixed(o.tensor_core_share, 4);
  w.Raw(",\"fp32_gemm_share\":").Fixed(o.fp32_gemm_share, 4);
  w.Raw(",\"cast_copy_share\":");
  OptionalFixed(w, o.cast_copy_share, 4);
  w.Raw("},\"communication\":{\"exposed_share\":").Fixed(o.exposed_communication_share, 4);
  w.Raw(",\"overlap_pct\":");
  OptionalFixed(w, o.overlap_pct, 2);
  BandwidthFields(w, o.median_busbw_gbytes_per_s, o.link_gbytes_per_s, o.median_efficiency);
  const ParallelismReport& p = o.parallelism;
  if (p.communicators.empty()) {
    w.Raw(",\"dominant_kind\":null,\"dominant_kind_share\":null");
  } else {
    w.Raw(",\"dominant_kind\":").String(ParallelismKindName(p.dominant));
    w.Raw(",\"dominant_kind_share\":").Fixed(p.dominant_share, 4);
  }
  w.Raw(",\"communicators\":[");
  for (size_t i = 0; i < p.communicators.size(); ++i) {
    const CommunicatorUse& c = p.communicators[i];
    w.Raw(i ? "," : "").Raw("{\"communicator\":").String(c.communicator);
    w.Raw(",\"description\":").String(c.description).Raw(",\"size\":").Int(c.size);
    w.Raw(",\"kind\":").String(ParallelismKindName(c.kind)).Raw(",\"reason\":").String(c.reason);
    w.Raw(",\"calls\":").Uint(c.calls).Raw(",\"calls_per_step\":").Fixed(c.CallsPerStep(), 2);
    w.Raw(",\"bytes\":").Int(c.bytes).Raw(",\"kernel_ns\":").Int(c.kernel_ns);
    w.Raw(",\"exposed_ns\":").Int(c.exposed_ns);
    w.Raw(",\"forward_calls\":").Uint(c.forward_calls);
    w.Raw(",\"backward_calls\":").Uint(c.backward_calls);
    w.Raw(",\"unknown_pass_calls\":").Uint(c.unknown_pass_calls).Raw(",\"members\":[");
    for (size_t k = 0; k < c.members.size(); ++k) w.Raw(k ? "," : "").Int(c.members[k]);
    w.Raw("]}");
  }
  w.Raw("],\"communicator_groups\":[");
  for (size_t i = 0; i < p.groups.size(); ++i) {
    const CommunicatorGroup& g = p.groups[i];
    w.Raw(i ? "," : "").Raw("{\"kind\":").String(ParallelismKindName(g.kind));
    w.Raw(",\"description\":").String(g.description).Raw(",\"size\":").Int(g.size);
    w.Raw(",\"communicators\":").Uint(g.communicators).Raw(",\"example\":").String(g.example);
    w.Raw(",\"reason\":").String(g.reason).Raw(",\"calls_per_step\":").Fixed(g.CallsPerStep(), 2);
    w.Raw(",\"kernel_ns\":").Int(g.kernel_ns).Raw(",\"exposed_ns\":").Int(g.exposed_ns).Char('}');
  }
  w.Raw("]},\"straggler_count\":").Uint(o.straggler_count).Raw(",\"recommendations\":[");
  for (size_t i = 0; i < o.recommendations.size(); ++i) {
    const Recommendation& r = o.recommendations[i];
    w.Raw(i ? "," : "").Raw("{\"rule\":").String(r.rule).Raw(",\"title\":").String(r.title);
    w.Raw(",\"advice\":").String(r.advice).Raw(",\"step_share\":").Fixed(r.step_share, 4);
    if (!r.subject.empty()) w.Raw(",\"subject\":").String(r.subject);
    w.Raw(",\"evidence\":{");
    for (size_t e = 0; e < r.evidence.size(); ++e) {
      w.Raw(e ? "," : "").String(r.evidence[e].first).Char(':').Double(r.evidence[e].second);
    }
    w.Raw("},\"ranks\":[");
    for (size_t k = 0; k < r.ranks.size(); ++k) w.Raw(k ? "," : "").Int(r.ranks[k]);
    w.Raw("]}");
  }
  w.Raw("]}");
}

// workers_only: without the timelines.
void Memory(JsonWriter& w, const MemoryReport& r, bool workers_only) {
  w.Raw("{\"workers\":[");
  for (size_t i = 0; i < r.workers.size(); ++i) {
    const WorkerMemory& m = r.workers[i];
    w.Raw(i ? "," : "").Raw("{\"rank\":").Int(m.rank).Raw(",\"devices\":[");
    for (size_t d = 0; d < m.devices.size(); ++d) {
      const DeviceMemory& dev = m.devices[d];
      w.Raw(d ? "," : "").Raw("{\"device\":").Int(dev.device).Raw(",\"events\":").Uint(dev.events);
      w.Raw(",\"peak_allocated_bytes\":");
      if (dev.peak_allocated_bytes >= 0)
        w.Int(dev.peak_allocated_bytes);
      else
        w.Raw("null");
      w.Raw(",\"peak_time_ns\":").Int(dev.peak_time);
      w.Raw(",\"peak_reserved_bytes\":");
      if (dev.peak_reserved_bytes >= 0)
        w.Int(dev.peak_reserved_bytes);
      else
        w.Raw("null");
      w.Raw(",\"total_memory_bytes\":");
      if (dev.total_memory_bytes)
        w.Int(*dev.total_memory_bytes);
      else
        w.Raw("null");
      w.Raw(",\"headroom_bytes\":");
      if (dev.headroom_bytes)
        w.Int(*dev.headroom_bytes);
      else
        w.Raw("null");
      if (!workers_only) {
        w.Raw(",\"timeline\":[");
        for (size_t p = 0; p < dev.timeline.size(); ++p) {
          const MemoryPoint& pt = dev.timeline[p];
          w.Raw(p ? ",[" : "[").Int(pt.time).Char(',');
          if (pt.allocated >= 0)
            w.Int(pt.allocated);
          else
            w.Raw("null");
          w.Char(',');
          if (pt.reserved >= 0)
            w.Int(pt.reserved);
          else
            w.Raw("null");
          w.Char(']');
        }
        w.Char(']');
      }
      w.Char('}');
    }
    w.Raw("],\"top_operators\":[");
    for (size_t k = 0; k < m.top_operators.size(); ++k) {
      const OperatorAllocation& a = m.top_operators[k];
      w.Raw(k ? "," : "")
          .Raw("{\"name\":")
          .String(a.name)
          .Raw(",\"allocations\":")
          .Uint(a.allocations);
      w.Raw(",\"bytes\":").Int(a.bytes).Char('}');
    }
    w.Raw("]}");
  }
  w.Raw("],\"nearest_oom\":");
  if (const auto& n = r.nearest_oom) {
    w.Raw("{\"rank\":")
        .Int(n->rank)
        .Raw(",\"device\":")
        .Int(n->device)
        .Raw(",\"peak_bytes\":")
        .Int(n->peak_bytes);
    w.Raw(",\"total_memory_bytes\":")
        .Int(n->total_memory_bytes)
        .Raw(",\"headroom_bytes\":")
        .Int(n->headroom_bytes);
    w.Char('}');
  } else {
    w.Raw("null");
  }
  w.Char('}');
}

void Temporal(JsonWriter& w, const TemporalReport& r) {
  w.Raw("{\"window\":")
      .String(r.window == WindowMode::kHta ? "hta" : "steps")
      .Raw(",\"workers\":[");
  for (size_t i = 0; i < r.workers.size(); ++i) {
    const WorkerTemporal& t = r.workers[i];
    w.Raw(i ? "," : "").Raw("{\"rank\":").Int(t.rank).Raw(",\"idle_ns\":").Int(t.idle_ns);
    w.Raw(",\"compute_ns\":").Int(t.compute_ns).Raw(",\"non_compute_ns\":").Int(t.non_compute_ns);
    w.Raw(",\"kernel_time_ns\":")
        .Int(t.kernel_time_ns)
        .Raw(",\"overlap_pct\":")
        .Fixed(t.overlap_pct, 2);
    w.Raw(",\"idle_by_stream\":[");
    for (size_t s = 0; s < t.idle_by_stream.size(); ++s) {
      const StreamIdle& idle = t.idle_by_stream[s];
      w.Raw(s ? "," : "").Raw("{\"device\":").Int(idle.device).Raw(",\"stream\":").Int(idle.stream);
      w.Raw(",\"host_wait_ns\":")
          .Int(idle.host_wait_ns)
          .Raw(",\"kernel_wait_ns\":")
          .Int(idle.kernel_wait_ns);
      w.Raw(",\"other_ns\":").Int(idle.other_ns).Char('}');
    }
    w.Raw("]}");
  }
  w.Raw("]}");
}

}  // namespace

std::string RenderJson(const common::CaptureView& capture, const AnalysisRequest& request,
                       const AnalysisResults& results) {
  JsonWriter w;
  const bool nested = request.reports.size() > 1;
  if (nested) w.Char('{');
  bool first = true;
  for (const std::string& name : request.reports) {
    if (nested) {
      w.Raw(first ? "" : ",").Key(name);
      first = false;
    }
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
  }
  // The inputs' disagreements (not one whole job), beside the report(s).
  std::string& text = w.buffer();
  if (!nested && !text.empty() && text.back() == '}') text.pop_back();
  w.Raw(",\"warnings\":[");
  for (size_t i = 0; i < results.warnings.size(); ++i)
    w.Raw(i ? "," : "").String(results.warnings[i]);
  w.Raw("]}");
  w.Char('\n');
  return std::move(w.buffer());
}

}  // namespace podscope::analysis
