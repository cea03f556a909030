#include "coordinator/watch/alert_rules.h"

#include <boost/json.hpp>
#include <initializer_list>
#include <set>
#include <stdexcept>

#include "common/json_config.h"
#include "common/json_text.h"
#include "common/status_macros.h"

namespace podscope::coordinator::watch {
namespace {

using common::ConfigSection;

constexpr AlertKind kKinds[] = {AlertKind::kStraggler,           AlertKind::kHang,
                                AlertKind::kRegression,          AlertKind::kExposedCommunication,
                                AlertKind::kAllReduceEfficiency, AlertKind::kRanksNotReporting};

// A hang is already persistent by its threshold: it fires on the first evaluation that sees it
// and resolves as soon as the missing ranks move.
constexpr Hysteresis kHangHysteresis{1, 1, 1};

// The keys a rule of each kind takes, besides the common ones.
std::initializer_list<std::string_view> KeysOf(AlertKind kind) {
  static const std::initializer_list<std::string_view> kStraggler = {"name",
                                                                     "kind",
                                                                     "enabled",
                                                                     "job",
                                                                     "hysteresis",
                                                                     "capture_evidence",
                                                                     "min_share_of_caused_delay",
                                                                     "min_share_of_step_time",
                                                                     "min_last_arriver_share"};
  static const std::initializer_list<std::string_view> kHang = {
      "name", "kind", "enabled", "job", "hysteresis", "capture_evidence", "hang_after_s"};
  static const std::initializer_list<std::string_view> kRegression = {
      "name",         "kind",
      "enabled",      "job",
      "hysteresis",   "capture_evidence",
      "max_slowdown", "min_baseline_steps"};
  static const std::initializer_list<std::string_view> kExposed = {
      "name", "kind", "enabled", "job", "hysteresis", "capture_evidence", "max_exposed_share"};
  static const std::initializer_list<std::string_view> kAllReduce = {"name",
                                                                     "kind",
                                                                     "enabled",
                                                                     "job",
                                                                     "hysteresis",
                                                                     "capture_evidence",
                                                                     "link_gbytes_per_s",
                                                                     "min_efficiency",
                                                                     "link_gbps"};
  static const std::initializer_list<std::string_view> kNotReporting = {
      "name", "kind", "enabled", "job", "hysteresis", "capture_evidence"};
  switch (kind) {
    case AlertKind::kRanksNotReporting:
      return kNotReporting;
    case AlertKind::kStraggler:
      return kStraggler;
    case AlertKind::kHang:
      return kHang;
    case AlertKind::kRegression:
      return kRegression;
    case AlertKind::kExposedCommunication:
      return kExposed;
    case AlertKind::kAllReduceEfficiency:
      return kAllReduce;
  }
  return kStraggler;
}

AlertKind KindFromName(std::string_view name, const std::string& where) {
  for (AlertKind k : kKinds) {
    if (AlertKindName(k) == name) return k;
  }
  throw std::invalid_argument(
      where + ".kind: \"" + std::string(name.substr(0, 64)) +
      "\" is not one of straggler, hang, regression, exposed_communication, "
      "allreduce_efficiency, ranks_not_reporting");
}

AlertRule ParseRule(const boost::json::value& v, size_t index) {
  const std::string where = "rules[" + std::to_string(index) + "]";
  if (!v.is_object()) throw std::invalid_argument(where + ": is not an object");
  const boost::json::object& o = v.get_object();
  AlertRule r;
  const boost::json::value* kind = o.if_contains("kind");
  if (kind == nullptr || !kind->is_string())
    throw std::invalid_argument(where + ".kind: missing (a string)");
  r.kind =
      KindFromName(std::string_view(kind->get_string().data(), kind->get_string().size()), where);
  if (r.kind == AlertKind::kHang) r.hysteresis = kHangHysteresis;
  // Ranks that stopped reporting have nothing to capture: no evidence capture unless asked.
  if (r.kind == AlertKind::kRanksNotReporting) r.capture_evidence = false;
  const ConfigSection s(o, where, KeysOf(r.kind));
  if (!s.Has("name")) throw s.Bad("name", "missing (a string)");
  s.String("name", &r.name, 64);
  if (r.name.empty()) throw s.Bad("name", "is empty");
  for (char c : r.name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) throw s.Bad("name", "may hold only letters, digits, '_', '-' and '.'");
  }
  s.Bool("enabled", &r.enabled);
  // A job name as the store takes it (1-128 printable ASCII characters), or none: every job.
  s.String("job", &r.job, 128);
  for (const char c : r.job) {
    if (c < 0x20 || c > 0x7e) throw s.Bad("job", "may hold only printable ASCII characters");
  }
  s.Bool("capture_evidence", &r.capture_evidence);
  const ConfigSection h = s.Section("hysteresis", {"fire_after", "of_windows", "resolve_after"});
  h.Integer("of_windows", &r.hysteresis.of_windows, 1, 64);
  h.Integer("fire_after", &r.hysteresis.fire_after, 1, 64);
  h.Integer("resolve_after", &r.hysteresis.resolve_after, 1, 1000);
  if (r.hysteresis.fire_after > r.hysteresis.of_windows) {
    throw h.Bad("fire_after", std::to_string(r.hysteresis.fire_after) +
                                  " is more than of_windows (" +
                                  std::to_string(r.hysteresis.of_windows) + ")");
  }
  s.Number("min_share_of_caused_delay", &r.min_share_of_caused_delay, 0, 1);
  s.Number("min_share_of_step_time", &r.min_share_of_step_time, 0, 1);
  s.Number("min_last_arriver_share", &r.min_last_arriver_share, 0, 1);
  s.Number("max_slowdown", &r.max_slowdown, 0.001, 100);
  s.Integer("min_baseline_steps", &r.min_baseline_steps, 1, 100'000);
  s.Number("max_exposed_share", &r.max_exposed_share, 0, 1);
  s.Number("link_gbytes_per_s", &r.link_gbytes_per_s, 0, 1e6);
  if (s.Raw("link_gbps") != nullptr) {  // its old name, in Gbit/s: stored rules still say it
    if (s.Raw("link_gbytes_per_s") != nullptr)
      throw s.Bad("link_gbps", "give link_gbytes_per_s alone (link_gbps is its old name, Gbit/s)");
    double gbit_per_s = 0;
    s.Number("link_gbps", &gbit_per_s, 0, 8e6);
    r.link_gbytes_per_s = gbit_per_s / 8;
  }
  s.Number("min_efficiency", &r.min_efficiency, 0, 1);
  s.Seconds("hang_after_s", &r.hang_after_ns, 0.1, 86'400);
  return r;
}

boost::json::object RuleToJson(const AlertRule& r) {
  boost::json::object o;
  o["name"] = r.name;
  o["kind"] = std::string(AlertKindName(r.kind));
  o["enabled"] = r.enabled;
  o["job"] = r.job;
  o["capture_evidence"] = r.capture_evidence;
  o["hysteresis"] = boost::json::object{{"fire_after", r.hysteresis.fire_after},
                                        {"of_windows", r.hysteresis.of_windows},
                                        {"resolve_after", r.hysteresis.resolve_after}};
  switch (r.kind) {
    case AlertKind::kStraggler:
      o["min_share_of_caused_delay"] = r.min_share_of_caused_delay;
      o["min_share_of_step_time"] = r.min_share_of_step_time;
      o["min_last_arriver_share"] = r.min_last_arriver_share;
      break;
    case AlertKind::kHang:
      o["hang_after_s"] = static_cast<double>(r.hang_after_ns) / 1e9;
      break;
    case AlertKind::kRegression:
      o["max_slowdown"] = r.max_slowdown;
      o["min_baseline_steps"] = r.min_baseline_steps;
      break;
    case AlertKind::kExposedCommunication:
      o["max_exposed_share"] = r.max_exposed_share;
      break;
    case AlertKind::kAllReduceEfficiency:
      o["link_gbytes_per_s"] = r.link_gbytes_per_s;
      o["min_efficiency"] = r.min_efficiency;
      break;
    case AlertKind::kRanksNotReporting:
      break;
  }
  return o;
}

}  // namespace

std::string_view AlertKindName(AlertKind kind) {
  switch (kind) {
    case AlertKind::kStraggler:
      return "straggler";
    case AlertKind::kHang:
      return "hang";
    case AlertKind::kRegression:
      return "regression";
    case AlertKind::kExposedCommunication:
      return "exposed_communication";
    case AlertKind::kAllReduceEfficiency:
      return "allreduce_efficiency";
    case AlertKind::kRanksNotReporting:
      return "ranks_not_reporting";
  }
  return "straggler";
}

RuleSet DefaultRules() {
  RuleSet set;
  for (AlertKind kind : kKinds) {
    AlertRule r;
    r.kind = kind;
    r.name = std::string(AlertKindName(kind));
    if (kind == AlertKind::kHang) r.hysteresis = kHangHysteresis;
    if (kind == AlertKind::kRanksNotReporting) r.capture_evidence = false;
    set.rules.push_back(std::move(r));
  }
  return set;
}

absl::StatusOr<RuleSet> ParseRules(std::string_view json) {
  ASSIGN_OR_RETURN(boost::json::object root, common::ParseJsonConfig(json, "rules", 256 << 10));
  RuleSet set;
  try {
    // "set_aside" is GET's list of stored rules a start could not read: read-only, ignored.
    const ConfigSection s(root, "",
                          {"window_steps", "baseline_steps", "evidence", "rules", "set_aside"});
    s.Integer("window_steps", &set.window_steps, 2, 1000);
    s.Integer("baseline_steps", &set.baseline_steps, 1, 100'000);
    const ConfigSection e = s.Section("evidence", {"interval_s", "duration_ms"});
    e.Seconds("interval_s", &set.evidence_interval_ns, 1, 7 * 86'400);
    e.Millis("duration_ms", &set.evidence_duration_ns, 10, 600'000);
    const boost::json::value* rules = s.Raw("rules");
    if (rules == nullptr || !rules->is_array()) throw s.Bad("rules", "missing (an array of rules)");
    if (rules->get_array().size() > kMaxRules) {
      throw s.Bad("rules", "more than " + std::to_string(kMaxRules) + " rules");
    }
    std::set<std::string> names;
    for (size_t i = 0; i < rules->get_array().size(); ++i) {
      AlertRule r = ParseRule(rules->get_array()[i], i);
      if (!names.insert(r.name).second) {
        throw std::invalid_argument("rules[" + std::to_string(i) + "].name: \"" + r.name +
                                    "\" is used twice");
      }
      set.rules.push_back(std::move(r));
    }
  } catch (const std::invalid_argument& e) {
    return absl::InvalidArgumentError(e.what());
  }
  return set;
}

std::string RulesToJson(const RuleSet& set) {
  boost::json::array rules;
  for (const AlertRule& r : set.rules) rules.push_back(RuleToJson(r));
  boost::json::object o;
  o["window_steps"] = set.window_steps;
  o["baseline_steps"] = set.baseline_steps;
  o["evidence"] =
      boost::json::object{{"interval_s", static_cast<double>(set.evidence_interval_ns) / 1e9},
                          {"duration_ms", static_cast<double>(set.evidence_duration_ns) / 1e6}};
  o["rules"] = std::move(rules);
  return common::JsonText(o);
}

}  // namespace podscope::coordinator::watch
