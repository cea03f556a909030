#include "agent/probe/gpu_clock_map.h"

#include <algorithm>

namespace podscope::agent::probe {

void GpuClockMap::Add(ClockPair pair) {
  absl::MutexLock lock(&mu_);
  // The first pair since Clear and the newest: a window maps what it hands over by the line
  // from its opening pair to the pair read at that take (at its end: to its last pair). A long
  // baseline keeps the slope exact, where two pairs a moment apart would turn a microsecond of
  // read error into milliseconds a few seconds back.
  if (pairs_.size() >= 2) pairs_.pop_back();
  pairs_.push_back(pair);
}

void GpuClockMap::Clear() {
  absl::MutexLock lock(&mu_);
  pairs_.clear();
}

TimeNs GpuClockMap::ToHost(uint64_t gpu_ns) const {
  absl::MutexLock lock(&mu_);
  const auto gpu = static_cast<TimeNs>(gpu_ns);
  if (pairs_.empty()) return gpu;
  const ClockPair& a = pairs_.front();
  const ClockPair& b = pairs_.back();
  const TimeNs a_gpu = static_cast<TimeNs>(a.gpu_ns);
  const TimeNs span_gpu = static_cast<TimeNs>(b.gpu_ns) - a_gpu;
  if (pairs_.size() == 1 || span_gpu <= 0) return gpu + (a.host_ns - a_gpu);
  // host = a.host + (gpu - a.gpu) * span_host / span_gpu, in long double: windows are at most
  // hours, so the product stays exact to well under a nanosecond.
  const long double slope =
      static_cast<long double>(b.host_ns - a.host_ns) / static_cast<long double>(span_gpu);
  return a.host_ns + static_cast<TimeNs>(static_cast<long double>(gpu - a_gpu) * slope);
}

std::optional<TimeNs> GpuClockMap::ToHostIfKnown(uint64_t gpu_ns) const {
  {
    absl::MutexLock lock(&mu_);
    if (pairs_.empty()) return std::nullopt;
  }
  return ToHost(gpu_ns);
}

std::optional<HostWindow> GpuClockMap::Window() const {
  absl::MutexLock lock(&mu_);
  if (pairs_.empty()) return std::nullopt;
  const ClockPair& a = pairs_.front();
  const ClockPair& b = pairs_.back();
  const TimeNs bound = std::max(a.error_ns, b.error_ns);
  if (pairs_.size() == 1) return HostWindow{a.host_ns - bound, INT64_MAX};
  return HostWindow{a.host_ns - bound, b.host_ns + bound};
}

std::vector<ClockPair> GpuClockMap::pairs() const {
  absl::MutexLock lock(&mu_);
  return pairs_;
}

}  // namespace podscope::agent::probe
