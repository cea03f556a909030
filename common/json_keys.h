// Duplicate keys in a JSON object are legal syntax but ambiguous: parsers disagree on which one
// wins, so a request that says {"job": "a", "job": "b"} could be checked as one and acted on as
// the other. Request bodies and config files are refused when any object repeats a key.
#pragma once

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"

namespace podscope::common {

// OK when `json` is valid JSON, nested at most `max_depth` deep, and no object in it repeats
// a key; otherwise an error naming the first repeated key (or the parse error).
absl::Status CheckUniqueJsonKeys(std::string_view json, size_t max_depth = 64);

}  // namespace podscope::common
