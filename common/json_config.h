// Reading a daemon's JSON config file: bounded, and every failure a sentence naming the file.
// Header-only: only the daemons' main.cc files use it, and they link Boost.JSON themselves.
#pragma once

#include <boost/json.hpp>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"

namespace podscope::common {

inline absl::StatusOr<boost::json::object> ReadJsonConfig(const std::string& path, size_t max_bytes = 1 << 20) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot read config " + path);
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().size() > max_bytes) {
    return absl::InvalidArgumentError("config " + path + " is larger than " + std::to_string(max_bytes) + " bytes");
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

}  // namespace podscope::common
