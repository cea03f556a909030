#include "common/parse_number.h"

#include <charconv>
#include <cmath>

#include "common/str_util.h"

namespace podscope::common {

absl::StatusOr<int64_t> ParseInt(std::string_view text) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return absl::InvalidArgumentError(StrCat("\"", text.substr(0, 64), "\" is not an integer"));
  }
  return value;
}

absl::StatusOr<double> ParseDouble(std::string_view text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
      !std::isfinite(value)) {
    return absl::InvalidArgumentError(
        StrCat("\"", text.substr(0, 64), "\" is not a finite number"));
  }
  return value;
}

}  // namespace podscope::common
