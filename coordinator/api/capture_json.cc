#include "coordinator/api/capture_json.h"

namespace podscope::coordinator {

void WriteCaptureJson(common::JsonWriter& w, const storage::CaptureRecord& r) {
  w.Raw("{\"id\":").String(r.id).Raw(",\"job\":").String(r.job);
  w.Raw(",\"state\":").String(storage::CaptureStateName(r.state));
  w.Raw(",\"created_ns\":").Int(r.created_ns).Raw(",\"updated_ns\":").Int(r.updated_ns);
  w.Raw(",\"events\":").Uint(r.events).Raw(",\"stored_bytes\":").Uint(r.stored_bytes);
  w.Raw(",\"generation\":").Uint(r.generation).Raw(",\"error\":").String(r.error).Raw(",\"workers\":[");
  for (size_t i = 0; i < r.workers.size(); ++i) {
    const storage::WorkerRecord& k = r.workers[i];
    w.Raw(i ? "," : "").Raw("{\"worker_index\":").Uint(k.worker_index).Raw(",\"rank\":").Int(k.rank);
    w.Raw(",\"host\":").String(k.host).Raw(",\"source\":").String(k.source);
    w.Raw(",\"events\":").Uint(k.events).Raw(",\"chunks\":").Uint(k.chunks).Raw(",\"state\":").String(k.state).Char('}');
  }
  w.Raw("]}");
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
