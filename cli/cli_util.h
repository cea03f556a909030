// What the CLI's online commands share: how they fail, and reading fields of the coordinator's
// JSON answers leniently (a missing field reads as empty or zero).
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace podscope::cli {

// A failure at run time: the message on stderr, exit code 1.
inline int Fail(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "podscope %s: %s\n", command.c_str(), message.c_str());
  return 1;
}

// A command line that cannot be run as given: exit code 2, as CLI11's own usage errors.
inline int Usage(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "podscope %s: %s\n", command.c_str(), message.c_str());
  return 2;
}

inline std::string Str(simdjson::dom::element e) {
  std::string_view s;
  return e.get_string().get(s) == simdjson::SUCCESS ? std::string(s) : std::string();
}

inline int64_t Int(simdjson::dom::element e) {
  int64_t v = 0;
  return e.get_int64().get(v) == simdjson::SUCCESS ? v : 0;
}

inline double Number(simdjson::dom::element e) {
  double v = 0;
  if (e.get_double().get(v) == simdjson::SUCCESS) return v;
  return static_cast<double>(Int(e));
}

}  // namespace podscope::cli
