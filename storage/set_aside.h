// Stored settings that no longer read back. The coordinator keeps a few settings across restarts
// (schedules, alert rules); a record among them that a start-up cannot read (a value out of a
// bound it once passed, a format another version wrote, a damaged byte) is set aside rather than
// stopping the coordinator: kept, as it was, under the setting's ".set_aside" companion, logged,
// counted on /metrics and listed by the API that owns the setting. Nothing is lost, and every
// other record of the setting is served.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/trace_store.h"

namespace podscope::storage {

struct SetAsideRecord {
  std::string id;      // the record's id; empty for a whole setting that did not read
  std::string error;   // why it did not read back
  std::string record;  // its stored text, unchanged
  int64_t set_aside_ns = 0;
};

// The companion keeps the newest records within these bounds (a setting is at most 1 MiB).
inline constexpr size_t kMaxSetAsideRecords = 64;
inline constexpr size_t kMaxSetAsideRecordBytes = 8 << 10;  // longer texts are cut, and say so
inline constexpr size_t kMaxSetAsideBytes = 512 << 10;      // all of them, as stored

// Adds `records` to what `setting` has set aside before, and returns them all (oldest first).
absl::StatusOr<std::vector<SetAsideRecord>> SetAside(TraceStore& store, std::string_view setting,
                                                     std::vector<SetAsideRecord> records);
// What `setting` has set aside so far.
absl::StatusOr<std::vector<SetAsideRecord>> ReadSetAside(TraceStore& store,
                                                         std::string_view setting);

// [{"id","error","record","set_aside_ns"}, ...], as the owning API lists them.
std::string SetAsideToJson(const std::vector<SetAsideRecord>& records);

// Prometheus text: podscope_stored_records_set_aside{setting="NAME"} COUNT for each setting.
void AppendSetAsideMetrics(std::string* out,
                           const std::vector<std::pair<std::string_view, size_t>>& counts);

}  // namespace podscope::storage
