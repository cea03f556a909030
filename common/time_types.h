// Time types shared by every process. All times are int64 nanoseconds.
#pragma once

#include <chrono>
#include <cstdint>

namespace podscope::common {

// Nanoseconds on some clock; which clock is implied by context (a worker's own clock for
// stored events, the coordinator's clock after a ClockModel is applied).
using TimeNs = int64_t;

inline constexpr TimeNs kNanosPerMicro = 1'000;
inline constexpr TimeNs kNanosPerMilli = 1'000'000;
inline constexpr TimeNs kNanosPerSecond = 1'000'000'000;

// The host's wall clock (CLOCK_REALTIME), in nanoseconds since the Unix epoch: the clock the
// agent and the probes inside training processes agree on.
inline TimeNs HostNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace podscope::common
