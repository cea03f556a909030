#include "common/ranges.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include "common/parse_number.h"
#include "common/str_util.h"

namespace podscope::common {

absl::StatusOr<std::vector<int32_t>> ParseRankList(std::string_view text, size_t max_ranks) {
  std::vector<int32_t> ranks;
  for (std::string_view part : Split(text, ',')) {
    part = StripWhitespace(part);
    int64_t first = 0, last = 0;
    if (!ParseIntRange(part, &first, &last).ok() || last > INT32_MAX) {
      return absl::InvalidArgumentError(StrCat("\"", part, "\" is not a rank or FIRST-LAST range"));
    }
    if (static_cast<uint64_t>(last - first) + 1 > max_ranks - ranks.size()) {
      return absl::InvalidArgumentError(StrCat("more than ", max_ranks, " ranks"));
    }
    for (int64_t r = first; r <= last; ++r) ranks.push_back(static_cast<int32_t>(r));
  }
  return ranks;
}

std::string FormatRankList(std::vector<int32_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    StrAppend(&out, out.empty() ? "" : ",", ranks[i]);
    if (j > i) StrAppend(&out, "-", ranks[j]);
    i = j + 1;
  }
  return out;
}

absl::Status ParseIntRange(std::string_view text, int64_t* first, int64_t* last) {
  const size_t dash = text.find('-', 1);
  const absl::StatusOr<int64_t> a = ParseInt(text.substr(0, dash));
  const absl::StatusOr<int64_t> b =
      dash == std::string_view::npos ? a : ParseInt(text.substr(dash + 1));
  if (!a.ok() || !b.ok() || *a < 0 || *b < *a) {
    return absl::InvalidArgumentError(StrCat("\"", text, "\" is not a number or FIRST-LAST range"));
  }
  *first = *a;
  *last = *b;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ParseDurationMs(std::string_view text) {
  // The unit is required: a bare "2" was read as 2 ms where 2 s was meant.
  std::string_view number;
  double scale = 0;
  if (text.ends_with("ms")) {
    number = text.substr(0, text.size() - 2), scale = 1;
  } else if (text.ends_with("s")) {
    number = text.substr(0, text.size() - 1), scale = 1000;
  } else if (text.ends_with("m")) {
    number = text.substr(0, text.size() - 1), scale = 60'000;
  }
  const absl::StatusOr<double> v = ParseDouble(number);
  if (scale == 0 || !v.ok() || !(*v >= 0) || *v * scale > 86'400'000) {
    return absl::InvalidArgumentError(
        StrCat("\"", text, "\" is not a duration with a unit (ms, s or m; e.g. 1500ms, 2s, 1.5m)"));
  }
  return static_cast<int64_t>(std::llround(*v * scale));
}

}  // namespace podscope::common
