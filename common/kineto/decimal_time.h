// Exact conversion of JSON microsecond numbers ("1682725898236567.123", "68.0", "1e3") to
// integer nanoseconds. Going through double would lose nanoseconds on epoch timestamps
// (2^53 ns is only ~104 days).
#pragma once

#include <cstdint>
#include <string_view>

namespace podscope::common {

// Parses a JSON number token in microseconds into nanoseconds, rounding half away from zero
// below 1 ns. Returns false for anything that is not a JSON number or does not fit in int64.
// Trailing whitespace in `token` is ignored.
bool ParseMicrosAsNanos(std::string_view token, int64_t* nanos);

}  // namespace podscope::common
