// The deadline of a transfer that must keep moving: at least `min_bytes` every `interval`.
// A slow but honest client on a poor link keeps its connection however long its upload or
// download takes; one that trickles a byte now and then (slowloris), or never reads its
// response, loses it within one interval. Pure: the caller passes the time.
#pragma once

#include <chrono>
#include <cstdint>

namespace podscope::http {

class ProgressDeadline {
 public:
  using Clock = std::chrono::steady_clock;

  ProgressDeadline(Clock::time_point now, Clock::duration interval, uint64_t min_bytes)
      : interval_(interval), min_bytes_(min_bytes), deadline_(now + interval) {}

  // `bytes` more arrived (or left) at `now`; meeting the minimum starts a new interval.
  void Add(uint64_t bytes, Clock::time_point now) {
    bytes_ += bytes;
    if (bytes_ >= min_bytes_) {
      bytes_ = 0;
      deadline_ = now + interval_;
    }
  }
  Clock::time_point deadline() const { return deadline_; }

 private:
  Clock::duration interval_;
  uint64_t min_bytes_;
  uint64_t bytes_ = 0;
  Clock::time_point deadline_;
};

}  // namespace podscope::http
