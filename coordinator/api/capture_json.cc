#include "coordinator/api/capture_json.h"

#include <algorithm>
#include <cstdlib>

namespace podscope::coordinator {

void WriteCaptureJson(common::JsonWriter& w, const storage::CaptureRecord& r) {
  w.BeginObject().Key("id").String(r.id).Key("job").String(r.job);
  w.Key("state").String(storage::CaptureStateName(r.state));
  w.Key("created_ns").Int(r.created_ns).Key("updated_ns").Int(r.updated_ns);
  w.Key("events").Uint(r.events).Key("stored_bytes").Uint(r.stored_bytes);
  w.Key("generation").Uint(r.generation).Key("error").String(r.error);
  w.Key("workers").BeginArray();
  for (const storage::WorkerRecord& k : r.workers) {
    w.BeginObject().Key("worker_index").Uint(k.worker_index).Key("rank").Int(k.rank);
    w.Key("host").String(k.host).Key("source").String(k.source);
    w.Key("events").Uint(k.events).Key("chunks").Uint(k.chunks).Key("state").String(k.state);
    if (r.window_start_ns != 0) {
      // Live captures: who served the worker, how late it really started, how its clock was
      // aligned.
      w.Key("agent_id").String(k.agent_id).Key("error").String(k.error);
      w.Key("dropped_events").Uint(k.dropped_events).Key("dropped_reasons").BeginObject();
      for (const auto& [reason, n] : k.dropped_reasons) w.Key(reason).Uint(n);
      w.EndObject();
      w.Key("acknowledged_ns").Int(k.acknowledged_ns);
      w.Key("actual_start_ns").Int(k.actual_start_ns).Key("actual_stop_ns").Int(k.actual_stop_ns);
      w.Key("start_skew_ns");
      if (k.actual_start_ns != 0) {
        w.Int(k.actual_start_ns - r.window_start_ns);
      } else {
        w.Null();
      }
      w.Key("clock").BeginObject().Key("source").String(common::ClockSourceName(k.clock.source));
      w.Key("offset_ns").Int(k.clock.offset_ns).Key("drift_ppb").Int(k.clock.drift_ppb);
      w.Key("reference_ns").Int(k.clock.reference_ns);
      w.Key("error_bound_ns").Int(k.clock.error_bound_ns).EndObject();
    }
    w.EndObject();
  }
  w.EndArray();
  if (r.window_start_ns != 0) {
    w.Key("window").BeginObject().Key("start_ns").Int(r.window_start_ns);
    w.Key("duration_ns").Int(r.window_duration_ns);
    int64_t max_skew = 0, max_bound = 0;
    bool any = false;
    for (const storage::WorkerRecord& k : r.workers) {
      max_bound = std::max(max_bound, k.clock.error_bound_ns);
      if (k.actual_start_ns == 0) continue;
      const int64_t skew = k.actual_start_ns - r.window_start_ns;
      if (!any || std::abs(skew) > std::abs(max_skew)) max_skew = skew;
      any = true;
    }
    w.Key("max_start_skew_ns");
    if (any) {
      w.Int(max_skew);
    } else {
      w.Null();
    }
    w.Key("max_clock_error_bound_ns").Int(max_bound).EndObject();
  }
  w.EndObject();
}

std::string CaptureListJson(const std::vector<storage::CaptureRecord>& records, bool more) {
  common::JsonWriter w;
  w.BeginObject().Key("captures").BeginArray();
  for (const storage::CaptureRecord& r : records) WriteCaptureJson(w, r);
  w.EndArray().Key("next_after");
  if (more && !records.empty()) {
    w.String(records.back().id);
  } else {
    w.Null();
  }
  w.EndObject().EndLine();
  return std::move(w.buffer());
}

}  // namespace podscope::coordinator
