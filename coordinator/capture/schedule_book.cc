#include "coordinator/capture/schedule_book.h"

#include <algorithm>
#include <boost/json.hpp>
#include <charconv>
#include <climits>
#include <cmath>

#include "common/json_config.h"
#include "common/json_writer.h"
#include "common/ranges.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "fmt/format.h"
#include "storage/trace_store.h"

namespace podscope::coordinator {
namespace {

// stored: the form the book keeps (whole nanoseconds too). warning: a last member, when not empty.
void WriteSchedule(common::JsonWriter& out, const Schedule& s, bool stored,
                   std::string_view warning = {});

// Room a schedule's stored form keeps for what its runs add: the last error and capture id.
constexpr size_t kMaxLastErrorBytes = 512;
constexpr size_t kRunRoomBytes = kMaxLastErrorBytes + 128;

// At most kMaxLastErrorBytes, cut on a character boundary, control characters as spaces: it is
// stored with the schedule, and a cut character would not read back.
std::string LastError(std::string_view error) {
  std::string out(error.substr(0, kMaxLastErrorBytes));
  if (error.size() > kMaxLastErrorBytes) {
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
    if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
  }
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return out;
}

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

// "0-7,12" or [0, 1, 12]: at most 65,536 ranks either way (the text at most 1 KiB).
std::vector<int32_t> RanksFrom(const common::ConfigSection& o, const boost::json::value& ranks) {
  constexpr size_t kMaxRanks = 65'536;
  if (ranks.is_string()) {
    if (ranks.get_string().size() > 1024) {
      throw o.Bad("ranks", "longer than 1024 characters (write ranks as ranges: 0-1023)");
    }
    if (ranks.get_string().empty()) return {};  // every rank
    absl::StatusOr<std::vector<int32_t>> list =
        common::ParseRankList(std::string_view(ranks.get_string()), kMaxRanks);
    if (!list.ok()) throw o.Bad("ranks", std::string(list.status().message()));
    return *list;
  }
  if (!ranks.is_array()) throw o.Bad("ranks", "is not ranges (\"0-7,12\") or a list of ranks");
  if (ranks.get_array().size() > kMaxRanks) throw o.Bad("ranks", "more than 65536 ranks");
  std::vector<int32_t> list;
  for (const boost::json::value& r : ranks.get_array()) {
    if (!r.is_int64() || r.get_int64() < 0 || r.get_int64() > INT32_MAX) {
      throw o.Bad("ranks", boost::json::serialize(r) + " is not a rank");
    }
    list.push_back(static_cast<int32_t>(r.get_int64()));
  }
  return list;
}

ScheduleSpec SpecFrom(const common::ConfigSection& o) {
  ScheduleSpec spec;
  if (!o.Has("job")) throw o.Bad("job", "missing (a string)");
  o.String("job", &spec.job, 256);
  if (!o.Has("every_s")) throw o.Bad("every_s", "missing (seconds between captures)");
  o.Seconds("every_s", &spec.every_ns, 0, 1e9);
  if (!o.Has("duration_ms")) throw o.Bad("duration_ms", "missing (how long each capture records)");
  o.Millis("duration_ms", &spec.duration_ns, 0, 1e9);
  if (const boost::json::value* ranks = o.Raw("ranks")) spec.ranks = RanksFrom(o, *ranks);
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
  RETURN_IF_ERROR(CheckSpec(spec, limits));
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
  // Each rank once, in order: as the stored ranges read back.
  std::sort(spec.ranks.begin(), spec.ranks.end());
  spec.ranks.erase(std::unique(spec.ranks.begin(), spec.ranks.end()), spec.ranks.end());
  RETURN_IF_ERROR(CheckSpec(spec, limits_));
  if (schedules_.size() >= limits_.max_schedules) {
    return absl::ResourceExhaustedError(
        common::StrCat("at most ", limits_.max_schedules, " schedules; delete one first"));
  }
  Schedule s;
  do {  // a stored next_id behind a loaded schedule's must not take over its id
    s.id = fmt::format("sch-{:06d}{}", next_id_++, limits_.id_suffix);
  } while (schedules_.contains(s.id));
  s.spec = std::move(spec);
  s.created_ns = now;
  s.next_ns = now + Jittered(s.id, 0, s.spec.every_ns);
  common::JsonWriter stored;
  WriteSchedule(stored, s, /*stored=*/true);
  if (stored.buffer().size() + kRunRoomBytes > limits_.max_stored_bytes) {
    return absl::InvalidArgumentError(
        common::StrCat("ranks: this schedule would take ", stored.buffer().size() + kRunRoomBytes,
                       " bytes stored, over its ", limits_.max_stored_bytes,
                       " (write ranks as ranges, \"0-1023\", or leave them out for every rank)"));
  }
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
  s.last_error = LastError(error);
  s.next_ns = now + Jittered(s.id, s.runs, s.spec.every_ns);
}

namespace {

void WriteSchedule(common::JsonWriter& out, const Schedule& s, bool stored,
                   std::string_view warning) {
  out.BeginObject().Key("id").String(s.id).Key("job").String(s.spec.job);
  out.Key("every_s").Double(static_cast<double>(s.spec.every_ns) / 1e9);
  out.Key("duration_ms").Double(static_cast<double>(s.spec.duration_ns) / 1e6);
  if (stored) out.Key("every_ns").Int(s.spec.every_ns).Key("duration_ns").Int(s.spec.duration_ns);
  out.Key("ranks").String(common::FormatRankList(s.spec.ranks));
  out.Key("created_ns").Int(s.created_ns).Key("next_ns").Int(s.next_ns);
  out.Key("last_run_ns").Int(s.last_run_ns).Key("last_capture_id");
  if (s.last_capture_id.empty()) {
    out.Null();
  } else {
    out.String(s.last_capture_id);
  }
  out.Key("last_error").String(s.last_error).Key("runs").Int(static_cast<int64_t>(s.runs));
  out.Key("deferred").Int(static_cast<int64_t>(s.deferred));
  out.Key("failed").Int(static_cast<int64_t>(s.failed));
  if (!warning.empty()) out.Key("warning").String(warning);
  out.EndObject();
}

// One stored schedule; throws (std::exception) on a field that is missing or of another type.
Schedule ScheduleFromStored(const boost::json::object& e) {
  Schedule s;
  s.id = std::string(e.at("id").as_string());
  s.spec.job = std::string(e.at("job").as_string());
  // Whole nanoseconds where this version stored them; the nearest ones to the decimal figures
  // where an older one did not.
  const boost::json::value* every_ns = e.if_contains("every_ns");
  s.spec.every_ns = every_ns != nullptr ? every_ns->as_int64()
                                        : std::llround(e.at("every_s").to_number<double>() * 1e9);
  const boost::json::value* duration_ns = e.if_contains("duration_ns");
  s.spec.duration_ns = duration_ns != nullptr
                           ? duration_ns->as_int64()
                           : std::llround(e.at("duration_ms").to_number<double>() * 1e6);
  // Ranges, or the list of ranks an older version stored.
  const boost::json::value& ranks = e.at("ranks");
  if (ranks.is_string() && ranks.get_string().empty()) {
    // every rank
  } else if (ranks.is_string()) {
    absl::StatusOr<std::vector<int32_t>> list =
        common::ParseRankList(std::string_view(ranks.get_string()));
    if (!list.ok()) throw std::invalid_argument(std::string(list.status().message()));
    s.spec.ranks = std::move(*list);
  } else {
    for (const boost::json::value& r : ranks.as_array()) {
      const int64_t rank = r.as_int64();
      if (rank < 0 || rank > INT32_MAX) throw std::out_of_range("a rank out of range");
      s.spec.ranks.push_back(static_cast<int32_t>(rank));
    }
  }
  s.created_ns = e.at("created_ns").as_int64();
  s.next_ns = e.at("next_ns").as_int64();
  s.last_run_ns = e.at("last_run_ns").as_int64();
  if (e.at("last_capture_id").is_string())
    s.last_capture_id = std::string(e.at("last_capture_id").as_string());
  s.last_error = std::string(e.at("last_error").as_string());
  s.runs = static_cast<uint64_t>(e.at("runs").as_int64());
  s.deferred = static_cast<uint64_t>(e.at("deferred").as_int64());
  s.failed = static_cast<uint64_t>(e.at("failed").as_int64());
  return s;
}

}  // namespace

std::string ScheduleToJson(const Schedule& s, std::string_view warning) {
  common::JsonWriter out;
  WriteSchedule(out, s, /*stored=*/false, warning);
  return std::move(out.buffer());
}

std::string ScheduleBook::ToJson() const {
  common::JsonWriter out;
  out.BeginObject().Key("next_id").Uint(next_id_).Key("schedules").BeginArray();
  for (const auto& [id, s] : schedules_) WriteSchedule(out, s, /*stored=*/true);
  out.EndArray().EndObject();
  return std::move(out.buffer());
}

ScheduleBook::Loaded ScheduleBook::FromJson(std::string_view json, ScheduleLimits limits) {
  Loaded loaded{ScheduleBook(limits), {}};
  ScheduleBook& book = loaded.book;
  boost::json::error_code ec;
  const boost::json::value root = boost::json::parse(json, ec);
  const boost::json::object* o = ec ? nullptr : root.if_object();
  const boost::json::value* list = o != nullptr ? o->if_contains("schedules") : nullptr;
  if (list == nullptr || !list->is_array()) {
    loaded.set_aside.push_back({.id = "",
                                .error = "the stored schedules are not a book of schedules",
                                .record = std::string(json)});
    return loaded;
  }
  if (const auto* n = o->if_contains("next_id");
      n != nullptr && n->is_int64() && n->get_int64() > 0) {
    book.next_id_ = static_cast<uint64_t>(n->get_int64());
  }
  for (const boost::json::value& v : list->get_array()) {
    const boost::json::value* id = v.is_object() ? v.get_object().if_contains("id") : nullptr;
    // New ids come after every stored one, loaded or set aside: no two records share an id.
    if (id != nullptr && id->is_string() && id->get_string().starts_with("sch-")) {
      const std::string_view digits = std::string_view(id->get_string()).substr(4);
      uint64_t number = 0;
      const auto [end, error] =
          std::from_chars(digits.data(), digits.data() + digits.size(), number);
      if (error == std::errc() && end != digits.data() && number < UINT64_MAX) {
        book.next_id_ = std::max(book.next_id_, number + 1);
      }
    }
    storage::SetAsideRecord aside{
        .id = id != nullptr && id->is_string() ? std::string(id->get_string()) : std::string(),
        .error = "",
        .record = boost::json::serialize(v)};
    try {
      Schedule s = ScheduleFromStored(v.as_object());
      if (absl::Status c = CheckSpec(s.spec, limits); !c.ok()) {
        aside.error = std::string(c.message());
      } else if (book.schedules_.contains(s.id)) {
        aside.error = "a second schedule with this id";
      } else {
        book.schedules_[s.id] = std::move(s);
        continue;
      }
    } catch (const std::exception& e) {
      aside.error = common::StrCat("does not read as a schedule: ", e.what());
    }
    loaded.set_aside.push_back(std::move(aside));
  }
  return loaded;
}

}  // namespace podscope::coordinator
