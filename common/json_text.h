// Boost.JSON values as JSON text with numbers written the way people write them. Boost writes
// every double in exponent form (600 -> "6E2", 0.2 -> "2E-1"), which is valid JSON but reads as
// noise in a rules file or an answer a person reads. Header-only, like json_config.h: its users
// link Boost.JSON themselves.
#pragma once

#include <boost/json.hpp>
#include <charconv>
#include <cmath>
#include <string>

namespace podscope::common {

inline void AppendJsonText(const boost::json::value& v, std::string* out) {
  switch (v.kind()) {
    case boost::json::kind::double_: {
      const double d = v.get_double();
      if (!std::isfinite(d)) {  // Boost cannot make one from JSON text; null as JsonWriter does
        *out += "null";
        return;
      }
      char digits[32];
      const auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), d);  // shortest form
      out->append(digits, end);
      return;
    }
    case boost::json::kind::array: {
      *out += '[';
      bool first = true;
      for (const boost::json::value& item : v.get_array()) {
        if (!first) *out += ',';
        first = false;
        AppendJsonText(item, out);
      }
      *out += ']';
      return;
    }
    case boost::json::kind::object: {
      *out += '{';
      bool first = true;
      for (const boost::json::key_value_pair& field : v.get_object()) {
        if (!first) *out += ',';
        first = false;
        *out += boost::json::serialize(boost::json::string_view(field.key()));
        *out += ':';
        AppendJsonText(field.value(), out);
      }
      *out += '}';
      return;
    }
    default:  // strings, integers, booleans and null: Boost's text is the usual one
      *out += boost::json::serialize(v);
      return;
  }
}

inline std::string JsonText(const boost::json::value& v) {
  std::string out;
  AppendJsonText(v, &out);
  return out;
}

}  // namespace podscope::common
