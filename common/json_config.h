// Reading a daemon's JSON config file: bounded, and every failure a sentence naming the file.
// Header-only: only the daemons' main.cc files use it, and they link Boost.JSON themselves.
#pragma once

#include <boost/json.hpp>
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/json_keys.h"

namespace podscope::common {

inline absl::StatusOr<boost::json::object> ReadJsonConfig(const std::string& path, size_t max_bytes = 1 << 20) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot read config " + path);
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().size() > max_bytes) {
    return absl::InvalidArgumentError("config " + path + " is larger than " + std::to_string(max_bytes) + " bytes");
  }
  if (absl::Status s = CheckUniqueJsonKeys(text.str(), 16); !s.ok()) {
    return absl::InvalidArgumentError("config " + path + ": " + std::string(s.message()));
  }
  boost::system::error_code ec;
  boost::json::parse_options options;
  options.max_depth = 16;
  boost::json::value root = boost::json::parse(text.str(), ec, {}, options);
  if (ec || !root.is_object()) {
    return absl::InvalidArgumentError("config " + path + ": not a JSON object" + (ec ? " (" + ec.message() + ")" : ""));
  }
  return std::move(root.as_object());
}

// Edit distance (insertions, deletions, substitutions; an adjacent swap counts one), for
// suggesting the key a typo meant.
inline size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
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
    throw std::invalid_argument("unknown key \"" + (section.empty() ? "" : std::string(section) + ".") +
                                std::string(key.substr(0, 64)) + "\" (" +
                                (near ? "did you mean \"" + std::string(closest) + "\"? " : "") + "known: " + names + ")");
  }
}

}  // namespace podscope::common
