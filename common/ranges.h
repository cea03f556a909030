// Rank lists, step ranges and durations as users type them ("0-3,7", "2-4", "1.5s"), for the CLI
// and the REST API alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace podscope::common {

// "0-3,7" -> {0, 1, 2, 3, 7}; at most `max_ranks` in all (a short text must not expand to
// millions). InvalidArgument naming the part.
absl::StatusOr<std::vector<int32_t>> ParseRankList(std::string_view text,
                                                   size_t max_ranks = 65'536);

// {7, 0, 1, 2, 3, 3} -> "0-3,7": sorted, each run of consecutive ranks as one range.
std::string FormatRankList(std::vector<int32_t> ranks);

// "N" or "FIRST-LAST" of non-negative integers, FIRST <= LAST. InvalidArgument naming the text.
absl::Status ParseIntRange(std::string_view text, int64_t* first, int64_t* last);

// "1500ms", "2s", "1.5m" -> milliseconds (at most a day); the unit is required.
absl::StatusOr<int64_t> ParseDurationMs(std::string_view text);

}  // namespace podscope::common
