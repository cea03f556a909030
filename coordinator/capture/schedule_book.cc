#include "coordinator/capture/schedule_book.h"

#include <algorithm>
#include <boost/json.hpp>

#include "common/json_config.h"
#include "common/json_writer.h"
#include "common/str_util.h"
#include "fmt/format.h"
#include "storage/trace_store.h"

namespace podscope::coordinator {
namespace {

absl::Status CheckSpec(const ScheduleSpec& s, const ScheduleLimits& limits) {
  if (absl::Status v = storage::ValidateJobName(s.job); !v.ok()) {
    return absl::InvalidArgumentError(common::StrCat("job: ", v.message()));
  }
  if (s.every_ns < limits.min_every_ns || s.every_ns > limits.max_every_ns) {
    return absl::InvalidArgumentError(
        common::StrCat("every_s: must be ", limits.min_every_ns / 1'000'000'000, " to ",
                       limits.max_every_ns / 1'000'000'000, " seconds"));
  }
  if (s.duration_ns < 10'000'000 || s.duration_ns > limits.max_duration_ns) {
    return absl::InvalidArgumentError(common::StrCat(
        "duration_ms: must be 10 to ", limits.max_duration_ns / 1'000'000, " milliseconds"));
  }
  if (s.duration_ns >= s.every_ns) {
    return absl::InvalidArgumentError(
        "duration_ms: a capture must end before the next one is due (duration < every)");
  }
  if (s.ranks.size() > limits.max_ranks) return absl::InvalidArgumentError("ranks: too many");
  for (const int32_t r : s.ranks) {
    if (r < 0) return absl::InvalidArgumentError("ranks: ranks are non-negative");
  }
  return absl::OkStatus();
}

ScheduleSpec SpecFrom(const common::ConfigSection& o) {
  ScheduleSpec spec;
  if (!o.Has("job")) throw o.Bad("job", "missing (a string)");
  o.String("job", &spec.job, 256);
  double every_s = 0;
  if (!o.Has("every_s")) throw o.Bad("every_s", "missing (seconds between captures)");
  o.Number("every_s", &every_s, 0, 1e9);
  spec.every_ns = static_cast<TimeNs>(every_s * 1e9);
  if (!o.Has("duration_ms")) throw o.Bad("duration_ms", "missing (how long each capture records)");
  o.Millis("duration_ms", &spec.duration_ns, 0, 1e9);
  if (const boost::json::value* ranks = o.Raw("ranks")) {
    if (!ranks->is_array()) throw o.Bad("ranks", "is not a list of ranks");
    for (const boost::json::value& r : ranks->get_array()) {
      if (!r.is_int64() || r.get_int64() < 0 || r.get_int64() > INT32_MAX) {
        throw o.Bad("ranks", boost::json::serialize(r) + " is not a rank");
      }
      spec.ranks.push_back(static_cast<int32_t>(r.get_int64()));
    }
  }
  return spec;
}

}  // namespace

absl::StatusOr<ScheduleSpec> ParseScheduleSpec(std::string_view json,
                                               const ScheduleLimits& limits) {
  absl::StatusOr<boost::json::object> root = common::ParseJsonConfig(json, "schedule", 1 << 20);
  if (!root.ok()) return root.status();
  ScheduleSpec spec;
  try {
    const common::ConfigSection o(*root, "", {"job", "every_s", "duration_ms", "ranks"});
    spec = SpecFrom(o);
  } catch (const std::invalid_argument& e) {
    return absl::InvalidArgumentError(e.what());
  }
  if (absl::Status s = CheckSpec(spec, limits); !s.ok()) return s;
  return spec;
}

TimeNs ScheduleBook::Jittered(const std::string& id, uint64_t run, TimeNs every_ns) {
  // +-10% of the period, at most +-60 s, from a hash of (id, run): fixed per schedule and run.
  const TimeNs spread = std::min<TimeNs>(every_ns / 10, 60'000'000'000);
  if (spread == 0) return every_ns;
  uint64_t h = std::hash<std::string>{}(id) ^ (run * 0x9e3779b97f4a7c15ull);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  const TimeNs offset = static_cast<TimeNs>(h % static_cast<uint64_t>(2 * spread + 1)) - spread;
  return every_ns + offset;
}

absl::StatusOr<Schedule> ScheduleBook::Add(ScheduleSpec spec, TimeNs now) {
  if (absl::Status s = CheckSpec(spec, limits_); !s.ok()) return s;
  if (schedules_.size() >= limits_.max_schedules) {
    return absl::ResourceExhaustedError(
        common::StrCat("at most ", limits_.max_schedules, " schedules; delete one first"));
  }
  Schedule s;
  s.id = fmt::format("sch-{:06d}{}", next_id_++, limits_.id_suffix);
  s.spec = std::move(spec);
  s.created_ns = now;
  s.next_ns = now + Jittered(s.id, 0, s.spec.every_ns);
  schedules_[s.id] = s;
  return s;
}

bool ScheduleBook::Remove(const std::string& id) { return schedules_.erase(id) > 0; }

std::vector<Schedule> ScheduleBook::List() const {
  std::vector<Schedule> out;
  for (const auto& [id, s] : schedules_) out.push_back(s);
  return out;
}

const Schedule* ScheduleBook::Find(const std::string& id) const {
  const auto it = schedules_.find(id);
  return it == schedules_.end() ? nullptr : &it->second;
}

std::vector<std::string> ScheduleBook::Due(TimeNs now) const {
  std::vector<const Schedule*> due;
  for (const auto& [id, s] : schedules_) {
    if (s.next_ns <= now) due.push_back(&s);
  }
  std::sort(due.begin(), due.end(), [](const Schedule* a, const Schedule* b) {
    return a->next_ns != b->next_ns ? a->next_ns < b->next_ns : a->id < b->id;
  });
  std::vector<std::string> ids;
  for (const Schedule* s : due) ids.push_back(s->id);
  return ids;
}

void ScheduleBook::Started(const std::string& id, TimeNs now, const std::string& capture_id) {
  auto it = schedules_.find(id);
  if (it == schedules_.end()) return;
  Schedule& s = it->second;
  ++s.runs;
  s.last_run_ns = now;
  s.last_capture_id = capture_id;
  s.last_error.clear();
  s.next_ns = now + Jittered(s.id, s.runs, s.spec.every_ns);
}

void ScheduleBook::Deferred(const std::string& id, TimeNs now) {
  auto it = schedules_.find(id);
  if (it == schedules_.end()) return;
  ++it->second.deferred;
  it->second.next_ns = now + std::min<TimeNs>(it->second.spec.every_ns / 4, 30'000'000'000);
}

void ScheduleBook::Failed(const std::string& id, TimeNs now, const std::string& error) {
  auto it = schedules_.find(id);
  if (it == schedules_.end()) return;
  Schedule& s = it->second;
  ++s.runs;
  ++s.failed;
  s.last_run_ns = now;
  s.last_error = error.substr(0, 1024);
  s.next_ns = now + Jittered(s.id, s.runs, s.spec.every_ns);
}

std::string ScheduleToJson(const Schedule& s) {
  common::JsonWriter out;
  out.Char('{').Key("id").String(s.id);
  out.Char(',').Key("job").String(s.spec.job);
  out.Char(',').Key("every_s").Double(static_cast<double>(s.spec.every_ns) / 1e9);
  out.Char(',').Key("duration_ms").Double(static_cast<double>(s.spec.duration_ns) / 1e6);
  out.Char(',').Key("ranks").Char('[');
  for (size_t i = 0; i < s.spec.ranks.size(); ++i) (i ? out.Char(',') : out).Int(s.spec.ranks[i]);
  out.Char(']');
  out.Char(',').Key("created_ns").Int(s.created_ns);
  out.Char(',').Key("next_ns").Int(s.next_ns);
  out.Char(',').Key("last_run_ns").Int(s.last_run_ns);
  out.Char(',').Key("last_capture_id");
  if (s.last_capture_id.empty()) {
    out.Raw("null");
  } else {
    out.String(s.last_capture_id);
  }
  out.Char(',').Key("last_error").String(s.last_error);
  out.Char(',').Key("runs").Int(static_cast<int64_t>(s.runs));
  out.Char(',').Key("deferred").Int(static_cast<int64_t>(s.deferred));
  out.Char(',').Key("failed").Int(static_cast<int64_t>(s.failed));
  out.Char('}');
  return std::move(out.buffer());
}

std::string ScheduleBook::ToJson() const {
  std::string out = "{\"next_id\":" + std::to_string(next_id_) + ",\"schedules\":[";
  bool first = true;
  for (const auto& [id, s] : schedules_) {
    if (!first) out += ',';
    first = false;
    out += ScheduleToJson(s);
  }
  out += "]}";
  return out;
}

absl::StatusOr<ScheduleBook> ScheduleBook::FromJson(std::string_view json, ScheduleLimits limits) {
  ScheduleBook book(limits);
  boost::json::error_code ec;
  const boost::json::value root = boost::json::parse(json, ec);
  if (ec || !root.is_object()) return absl::DataLossError("stored schedules: not a JSON object");
  try {
    const boost::json::object& o = root.get_object();
    if (const auto* n = o.if_contains("next_id");
        n != nullptr && n->is_int64() && n->get_int64() > 0) {
      book.next_id_ = static_cast<uint64_t>(n->get_int64());
    }
    const auto* list = o.if_contains("schedules");
    if (list == nullptr || !list->is_array())
      return absl::DataLossError("stored schedules: no list");
    for (const boost::json::value& v : list->get_array()) {
      const boost::json::object& e = v.as_object();
      Schedule s;
      s.id = std::string(e.at("id").as_string());
      s.spec.job = std::string(e.at("job").as_string());
      s.spec.every_ns = static_cast<TimeNs>(e.at("every_s").to_number<double>() * 1e9);
      s.spec.duration_ns = static_cast<TimeNs>(e.at("duration_ms").to_number<double>() * 1e6);
      for (const boost::json::value& r : e.at("ranks").as_array())
        s.spec.ranks.push_back(static_cast<int32_t>(r.as_int64()));
      s.created_ns = e.at("created_ns").as_int64();
      s.next_ns = e.at("next_ns").as_int64();
      s.last_run_ns = e.at("last_run_ns").as_int64();
      if (e.at("last_capture_id").is_string())
        s.last_capture_id = std::string(e.at("last_capture_id").as_string());
      s.last_error = std::string(e.at("last_error").as_string());
      s.runs = static_cast<uint64_t>(e.at("runs").as_int64());
      s.deferred = static_cast<uint64_t>(e.at("deferred").as_int64());
      s.failed = static_cast<uint64_t>(e.at("failed").as_int64());
      if (absl::Status c = CheckSpec(s.spec, limits); !c.ok()) {
        return absl::DataLossError(common::StrCat("stored schedule ", s.id, ": ", c.message()));
      }
      book.schedules_[s.id] = std::move(s);
    }
  } catch (const std::exception& e) {
    return absl::DataLossError(common::StrCat("stored schedules: ", e.what()));
  }
  return book;
}

}  // namespace podscope::coordinator
