#include "coordinator/api/capture_json.h"

#include <algorithm>
#include <cstdlib>

namespace podscope::coordinator {

void WriteCaptureJson(common::JsonWriter& w, const storage::CaptureRecord& r) {
  w.Raw("{\"id\":").String(r.id).Raw(",\"job\":").String(r.job);
  w.Raw(",\"state\":").String(storage::CaptureStateName(r.state));
  w.Raw(",\"created_ns\":").Int(r.created_ns).Raw(",\"updated_ns\":").Int(r.updated_ns);
  w.Raw(",\"events\":").Uint(r.events).Raw(",\"stored_bytes\":").Uint(r.stored_bytes);
  w.Raw(",\"generation\":")
      .Uint(r.generation)
      .Raw(",\"error\":")
      .String(r.error)
      .Raw(",\"workers\":[");
  for (size_t i = 0; i < r.workers.size(); ++i) {
    const storage::WorkerRecord& k = r.workers[i];
    w.Raw(i ? "," : "")
        .Raw("{\"worker_index\":")
        .Uint(k.worker_index)
        .Raw(",\"rank\":")
        .Int(k.rank);
    w.Raw(",\"host\":").String(k.host).Raw(",\"source\":").String(k.source);
    w.Raw(",\"events\":")
        .Uint(k.events)
        .Raw(",\"chunks\":")
        .Uint(k.chunks)
        .Raw(",\"state\":")
        .String(k.state);
    if (r.window_start_ns != 0) {
      // Live captures: who served the worker, how late it really started, how its clock was
      // aligned.
      w.Raw(",\"agent_id\":").String(k.agent_id).Raw(",\"error\":").String(k.error);
      w.Raw(",\"dropped_events\":").Uint(k.dropped_events).Raw(",\"dropped_reasons\":{");
      bool first = true;
      for (const auto& [reason, n] : k.dropped_reasons) {
        w.Raw(first ? "" : ",").String(reason).Char(':').Uint(n);
        first = false;
      }
      w.Char('}');
      w.Raw(",\"acknowledged_ns\":").Int(k.acknowledged_ns);
      w.Raw(",\"actual_start_ns\":")
          .Int(k.actual_start_ns)
          .Raw(",\"actual_stop_ns\":")
          .Int(k.actual_stop_ns);
      w.Raw(",\"start_skew_ns\":");
      if (k.actual_start_ns != 0) {
        w.Int(k.actual_start_ns - r.window_start_ns);
      } else {
        w.Raw("null");
      }
      w.Raw(",\"clock\":{\"source\":").String(common::ClockSourceName(k.clock.source));
      w.Raw(",\"offset_ns\":").Int(k.clock.offset_ns).Raw(",\"drift_ppb\":").Int(k.clock.drift_ppb);
      w.Raw(",\"reference_ns\":")
          .Int(k.clock.reference_ns)
          .Raw(",\"error_bound_ns\":")
          .Int(k.clock.error_bound_ns)
          .Char('}');
    }
    w.Char('}');
  }
  w.Char(']');
  if (r.window_start_ns != 0) {
    w.Raw(",\"window\":{\"start_ns\":")
        .Int(r.window_start_ns)
        .Raw(",\"duration_ns\":")
        .Int(r.window_duration_ns);
    int64_t max_skew = 0, max_bound = 0;
    bool any = false;
    for (const storage::WorkerRecord& k : r.workers) {
      max_bound = std::max(max_bound, k.clock.error_bound_ns);
      if (k.actual_start_ns == 0) continue;
      const int64_t skew = k.actual_start_ns - r.window_start_ns;
      if (!any || std::abs(skew) > std::abs(max_skew)) max_skew = skew;
      any = true;
    }
    w.Raw(",\"max_start_skew_ns\":");
    if (any) {
      w.Int(max_skew);
    } else {
      w.Raw("null");
    }
    w.Raw(",\"max_clock_error_bound_ns\":").Int(max_bound).Char('}');
  }
  w.Char('}');
}

std::string CaptureListJson(const std::vector<storage::CaptureRecord>& records, bool more) {
  common::JsonWriter w;
  w.Raw("{\"captures\":[");
  for (size_t i = 0; i < records.size(); ++i) {
    if (i) w.Char(',');
    WriteCaptureJson(w, records[i]);
  }
  w.Raw("],\"next_after\":");
  if (more && !records.empty()) {
    w.String(records.back().id);
  } else {
    w.Raw("null");
  }
  w.Raw("}\n");
  return std::move(w.buffer());
}

}  // namespace podscope::coordinator
