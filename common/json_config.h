// Reading a daemon's JSON config file: bounded, and every failure a sentence naming the file.
// Header-only: the daemons' config loaders use it, and they link Boost.JSON themselves.
#pragma once

#include <algorithm>
#include <boost/json.hpp>
#include <climits>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/json_keys.h"
#include "common/json_text.h"

namespace podscope::common {

// Parses a config's text; `origin` names it in errors ("config /etc/podscope/agent.json").
inline absl::StatusOr<boost::json::object> ParseJsonConfig(std::string_view text,
                                                           const std::string& origin,
                                                           size_t max_bytes = 1 << 20) {
  if (text.size() > max_bytes) {
    return absl::InvalidArgumentError(origin + " is larger than " + std::to_string(max_bytes) +
                                      " bytes");
  }
  if (absl::Status s = CheckUniqueJsonKeys(text, 16); !s.ok()) {
    return absl::InvalidArgumentError(origin + ": " + std::string(s.message()));
  }
  boost::system::error_code ec;
  boost::json::parse_options options;
  options.max_depth = 16;
  boost::json::value root = boost::json::parse(text, ec, {}, options);
  if (ec || !root.is_object()) {
    return absl::InvalidArgumentError(origin + ": not a JSON object" +
                                      (ec ? " (" + ec.message() + ")" : ""));
  }
  return std::move(root.as_object());
}

inline absl::StatusOr<boost::json::object> ReadJsonConfig(const std::string& path,
                                                          size_t max_bytes = 1 << 20) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot read config " + path);
  std::string text(max_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return ParseJsonConfig(text, "config " + path, max_bytes);
}

// Edit distance (insertions, deletions, substitutions; an adjacent swap counts one), for
// suggesting the key a typo meant.
inline size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// Throws std::invalid_argument naming the first key of `o` that is not in `known` (a typo in a
// config must not pass as a default), and the closest known key when one is near (at most a
// third of its letters off): `unknown key "limits.max_body_byts" (did you mean
// "max_body_bytes"? known: ...)`. `section` prefixes the name.
inline void RequireKnownKeys(const boost::json::object& o, std::string_view section,
                             std::initializer_list<std::string_view> known) {
  for (const auto& field : o) {
    const std::string_view key(field.key().data(), field.key().size());
    bool found = false;
    for (std::string_view k : known) found = found || k == key;
    if (found) continue;
    std::string names;
    std::string_view closest;
    size_t best = SIZE_MAX;
    for (std::string_view k : known) {
      names += (names.empty() ? "" : ", ") + std::string(k);
      if (key.size() > 64) continue;  // a config key is short; do not measure a paragraph
      const size_t distance = EditDistance(key, k);
      if (distance < best) {
        best = distance;
        closest = k;
      }
    }
    const bool near = !closest.empty() && best * 3 <= std::max(closest.size(), key.size());
    throw std::invalid_argument(
        "unknown key \"" + (section.empty() ? "" : std::string(section) + ".") +
        std::string(key.substr(0, 64)) + "\" (" +
        (near ? "did you mean \"" + std::string(closest) + "\"? " : "") + "known: " + names + ")");
  }
}

// One section of a daemon's config, read with its keys' types and ranges in one place. Every
// failure throws std::invalid_argument naming the key ("agents.heartbeat_interval_ms: -5 is not an
// integer in 1..3600000"); unknown keys are refused at construction (RequireKnownKeys).
class ConfigSection {
 public:
  ConfigSection(const boost::json::object& o, std::string name,
                std::initializer_list<std::string_view> known)
      : o_(o), name_(std::move(name)) {
    RequireKnownKeys(o, name_, known);
  }

  bool Has(std::string_view key) const { return o_.contains(key); }

  // An integer in [min, max].
  template <typename T>
  void Integer(std::string_view key, T* out, int64_t min, int64_t max) const {
    if (!o_.contains(key)) return;
    const boost::json::value& v = o_.at(key);
    int64_t n = 0;
    if (v.is_int64()) {
      n = v.get_int64();
    } else if (v.is_uint64() && v.get_uint64() <= static_cast<uint64_t>(INT64_MAX)) {
      n = static_cast<int64_t>(v.get_uint64());
    } else {
      throw Bad(key, Text(v) + " is not an integer in " + Range(min, max));
    }
    if (n < min || n > max) throw Bad(key, std::to_string(n) + " is not in " + Range(min, max));
    *out = static_cast<T>(n);
  }

  // A finite number in [min, max].
  void Number(std::string_view key, double* out, double min, double max) const {
    if (!o_.contains(key)) return;
    const boost::json::value& v = o_.at(key);
    if (!v.is_number()) throw Bad(key, Text(v) + " is not a number");
    const double d = v.to_number<double>();
    if (!(d >= min && d <= max)) throw Bad(key, Text(v) + " is not in " + RangeD(min, max));
    *out = d;
  }

  // Milliseconds (a number) in [min_ms, max_ms], kept as nanoseconds: the nearest one, so that
  // a value written back as milliseconds reads as the same nanoseconds (truncating read some a
  // nanosecond short, outside a bound they had passed).
  void Millis(std::string_view key, int64_t* ns, double min_ms, double max_ms) const {
    double ms = 0;
    if (!o_.contains(key)) return;
    Number(key, &ms, min_ms, max_ms);
    *ns = std::llround(ms * 1e6);
  }

  // Seconds (a number) in [min_s, max_s], kept as the nearest nanoseconds, as Millis.
  void Seconds(std::string_view key, int64_t* ns, double min_s, double max_s) const {
    double s = 0;
    if (!o_.contains(key)) return;
    Number(key, &s, min_s, max_s);
    *ns = std::llround(s * 1e9);
  }

  void Bool(std::string_view key, bool* out) const {
    if (!o_.contains(key)) return;
    if (!o_.at(key).is_bool()) throw Bad(key, Text(o_.at(key)) + " is not true or false");
    *out = o_.at(key).get_bool();
  }

  // A string of at most max_bytes.
  void String(std::string_view key, std::string* out, size_t max_bytes = 4096) const {
    if (!o_.contains(key)) return;
    if (!o_.at(key).is_string()) throw Bad(key, Text(o_.at(key)) + " is not a string");
    const boost::json::string& str = o_.at(key).get_string();
    if (str.size() > max_bytes)
      throw Bad(key, "longer than " + std::to_string(max_bytes) + " bytes");
    *out = std::string(str.data(), str.size());
  }

  // A nested section (absent: an empty one).
  ConfigSection Section(std::string_view key, std::initializer_list<std::string_view> known) const {
    static const boost::json::object kEmpty;
    if (!o_.contains(key)) return ConfigSection(kEmpty, Name(key), known);
    if (!o_.at(key).is_object()) throw Bad(key, "is not an object");
    return ConfigSection(o_.at(key).get_object(), Name(key), known);
  }

  const boost::json::value* Raw(std::string_view key) const { return o_.if_contains(key); }
  std::invalid_argument Bad(std::string_view key, const std::string& why) const {
    return std::invalid_argument(Name(key) + ": " + why);
  }

 private:
  std::string Name(std::string_view key) const {
    return (name_.empty() ? "" : name_ + ".") + std::string(key);
  }
  static std::string Text(const boost::json::value& v) {
    std::string t = JsonText(v);
    return t.size() > 40 ? t.substr(0, 37) + "..." : t;
  }
  static std::string Range(int64_t min, int64_t max) {
    return std::to_string(min) + ".." + std::to_string(max);
  }
  static std::string RangeD(double min, double max) {
    std::ostringstream out;
    out << min << ".." << max;
    return out.str();
  }

  const boost::json::object& o_;
  std::string name_;
};

}  // namespace podscope::common
