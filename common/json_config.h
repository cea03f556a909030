// Reading a daemon's JSON config file: bounded, and every failure a sentence naming the file.
// Header-only: only the daemons' main.cc files use it, and they link Boost.JSON themselves.
#pragma once

#include <boost/json.hpp>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

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

// Throws std::invalid_argument naming the first key of `o` that is not in `known` (a typo in a
// config must not pass as a default). `section` prefixes the name: "limits.max_body_byts".
inline void RequireKnownKeys(const boost::json::object& o, std::string_view section,
                             std::initializer_list<std::string_view> known) {
  for (const auto& field : o) {
    const std::string_view key(field.key().data(), field.key().size());
    bool found = false;
    for (std::string_view k : known) found = found || k == key;
    if (found) continue;
    std::string names;
    for (std::string_view k : known) names += (names.empty() ? "" : ", ") + std::string(k);
    throw std::invalid_argument("unknown key \"" + (section.empty() ? "" : std::string(section) + ".") +
                                std::string(key) + "\" (known: " + names + ")");
  }
}

}  // namespace podscope::common
