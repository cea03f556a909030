// Maps one worker's clock onto the coordinator's clock (docs/life-of-a-capture.md).
#pragma once

#include <cstdint>
#include <string_view>

#include "common/time_types.h"

namespace podscope::common {

enum class ClockSource : uint8_t {
  kNone = 0,        // identity: the worker's clock is taken as is (imported traces)
  kNetwork = 1,     // NTP-style exchange with the coordinator
  kCollective = 2,  // refined from matching collective end times
};

std::string_view ClockSourceName(ClockSource source);

// aligned(t) = t + offset_ns + (t - reference_ns) * drift_ppb / 1e9.
// A clock model is an offset, drift, error bound and source; a drift is only meaningful around a
// reference instant, so the model carries the instant its offset was fitted at.
struct ClockModel {
  int64_t offset_ns = 0;
  int64_t drift_ppb = 0;
  TimeNs reference_ns = 0;
  int64_t error_bound_ns = 0;
  ClockSource source = ClockSource::kNone;

  TimeNs ToAligned(TimeNs local) const {
    const __int128 drift = static_cast<__int128>(local - reference_ns) * drift_ppb;
    return local + offset_ns + static_cast<int64_t>(drift / kNanosPerSecond);
  }
  // The inverse of ToAligned: the local instant that maps to `aligned`. Two fixed-point
  // iterations are exact to a nanosecond for any physical drift (< 1e-3).
  TimeNs ToLocal(TimeNs aligned) const {
    TimeNs local = aligned - offset_ns;
    for (int i = 0; i < 2; ++i) local -= ToAligned(local) - aligned;
    return local;
  }
  bool IsIdentity() const { return offset_ns == 0 && drift_ppb == 0; }
  friend bool operator==(const ClockModel&, const ClockModel&) = default;
};

}  // namespace podscope::common
