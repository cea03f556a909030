// GPU timestamps -> host clock (docs/life-of-a-capture.md). CUPTI's timestamps and NCCL's kernel
// timer (the GPU's globaltimer) both count nanoseconds on a clock the driver keeps close to, but
// not on, the host's. The probe reads a (GPU, host) pair when a window opens, at every take
// while it runs, and when it closes; the line from the window's first pair to the newest maps
// the device times of what is taken then, offset and drift both.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/time_types.h"

namespace podscope::agent::probe {

using common::TimeNs;

struct ClockPair {
  uint64_t gpu_ns = 0;
  TimeNs host_ns = 0;
  TimeNs error_ns = 0;  // half the read's length: how far host_ns may be from the GPU instant
};

// CUPTI's own GPU-to-host conversion is good to microseconds, and a clock pair's read is bounded
// by its error: records this far outside a window's instants are still its own.
inline constexpr TimeNs kClockMappingSlackNs = 100'000;

// The host-clock span a window's mapped times must fall in: from its first pair to its newest,
// widened by the mapping's error.
struct HostWindow {
  TimeNs first_ns = 0, last_ns = 0;
};

class GpuClockMap {
 public:
  // Thread-safe: pairs come from the probe's window thread, reads from any.
  void Add(ClockPair pair);
  void Clear();
  // No pair: the identity (the driver starts the GPU clock on the host's epoch); one pair: its
  // offset; two: the line through them (the drift since the first). The first pair since Clear
  // and the newest are kept.
  TimeNs ToHost(uint64_t gpu_ns) const;
  // The host time when at least one pair was read, else nullopt (nothing to hold it against).
  std::optional<TimeNs> ToHostIfKnown(uint64_t gpu_ns) const;
  std::vector<ClockPair> pairs() const;
  // From the first pair's host time minus the error bound to the newest's plus it (open-ended
  // with one pair: the window's end is not read yet); nullopt without a pair. The bound is the
  // larger of the two pairs' read errors.
  std::optional<HostWindow> Window() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<ClockPair> pairs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podscope::agent::probe
