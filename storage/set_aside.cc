#include "storage/set_aside.h"

#include <boost/json.hpp>

#include "common/json_writer.h"
#include "common/status_macros.h"
#include "common/str_util.h"

namespace podscope::storage {
namespace {

std::string CompanionName(std::string_view setting) {
  return common::StrCat(setting, ".set_aside");
}

}  // namespace

std::string SetAsideToJson(const std::vector<SetAsideRecord>& records) {
  common::JsonWriter out;
  out.BeginArray();
  for (const SetAsideRecord& r : records) {
    out.BeginObject().Key("id").String(r.id).Key("error").String(r.error);
    out.Key("record").String(r.record).Key("set_aside_ns").Int(r.set_aside_ns).EndObject();
  }
  out.EndArray();
  return std::move(out.buffer());
}

void AppendSetAsideMetrics(std::string* out,
                           const std::vector<std::pair<std::string_view, size_t>>& counts) {
  common::StrAppend(out,
                    "# HELP podscope_stored_records_set_aside Stored records a start could not "
                    "read back: kept, listed by their API, not used.\n",
                    "# TYPE podscope_stored_records_set_aside gauge\n");
  for (const auto& [setting, count] : counts) {
    common::StrAppend(out, "podscope_stored_records_set_aside{setting=\"", setting, "\"} ", count,
                      "\n");
  }
}

absl::StatusOr<std::vector<SetAsideRecord>> ReadSetAside(TraceStore& store,
                                                         std::string_view setting) {
  absl::StatusOr<std::optional<std::string>> stored = store.GetSetting(CompanionName(setting));
  if (!stored.ok()) return stored.status();
  std::vector<SetAsideRecord> records;
  if (!stored->has_value()) return records;
  boost::json::error_code ec;
  const boost::json::value root = boost::json::parse(**stored, ec);
  if (ec || !root.is_array()) {
    // The companion itself is damaged: what it held is kept as one record, not dropped.
    records.push_back({.id = "",
                       .error = "the set-aside records themselves did not read back",
                       .record = (*stored)->substr(0, kMaxSetAsideRecordBytes)});
    return records;
  }
  for (const boost::json::value& v : root.get_array()) {
    const boost::json::object* o = v.if_object();
    if (o == nullptr) continue;
    SetAsideRecord r;
    auto text = [o](std::string_view key) {
      const boost::json::value* f = o->if_contains(key);
      return f != nullptr && f->is_string() ? std::string(f->get_string()) : std::string();
    };
    r.id = text("id");
    r.error = text("error");
    r.record = text("record");
    if (const boost::json::value* at = o->if_contains("set_aside_ns"); at && at->is_int64()) {
      r.set_aside_ns = at->get_int64();
    }
    records.push_back(std::move(r));
  }
  return records;
}

absl::StatusOr<std::vector<SetAsideRecord>> SetAside(TraceStore& store, std::string_view setting,
                                                     std::vector<SetAsideRecord> records) {
  absl::StatusOr<std::vector<SetAsideRecord>> all = ReadSetAside(store, setting);
  if (!all.ok()) return all.status();
  if (records.empty()) return all;
  for (SetAsideRecord& r : records) {
    if (r.record.size() > kMaxSetAsideRecordBytes) {
      r.record.resize(kMaxSetAsideRecordBytes);
      r.error += common::StrCat(" (its text cut to ", kMaxSetAsideRecordBytes, " bytes here)");
    }
    all->push_back(std::move(r));
  }
  if (all->size() > kMaxSetAsideRecords) {
    all->erase(all->begin(), all->end() - static_cast<std::ptrdiff_t>(kMaxSetAsideRecords));
  }
  // Escaping can make a stored text up to six times its length: the oldest go first.
  std::string json = SetAsideToJson(*all);
  while (json.size() > kMaxSetAsideBytes && all->size() > 1) {
    all->erase(all->begin());
    json = SetAsideToJson(*all);
  }
  RETURN_IF_ERROR(store.PutSetting(CompanionName(setting), json));
  return all;
}

}  // namespace podscope::storage
