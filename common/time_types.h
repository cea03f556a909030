// Time types shared by every process. All times are int64 nanoseconds.
#pragma once

#include <cstdint>

namespace podscope::common {

// Nanoseconds on some clock; which clock is implied by context (a worker's own clock for
// stored events, the coordinator's clock after a ClockModel is applied).
using TimeNs = int64_t;

inline constexpr TimeNs kNanosPerMicro = 1'000;
inline constexpr TimeNs kNanosPerMilli = 1'000'000;
inline constexpr TimeNs kNanosPerSecond = 1'000'000'000;

}  // namespace podscope::common
