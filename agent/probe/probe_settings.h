// How a probe behaves, from the training process's environment (the probe has no config file:
// it is loaded into processes we do not start). Every bound has a default that keeps the
// probe's footprint small; the variables exist for the rare job that needs more.
//
//   PODSCOPE_AGENT_SOCKET       the agent's socket              [/run/podscope/agent.sock]
//   PODSCOPE_PROBE_RECONNECT_MS how often to look for an agent  [5000]
//   PODSCOPE_PROBE_MAX_EVENTS   events kept per capture window  [4000000]
//   PODSCOPE_PROBE_QUEUE_MB     bytes waiting to go to the agent [256]
//   PODSCOPE_CUPTI_BUFFERS      CUPTI activity buffers in the pool [32]
//   PODSCOPE_CUPTI_BUFFER_KB    size of each                    [4096]
//   PODSCOPE_STEP_PATTERN       NVTX range names that mark steps (RE2 regex; the last group
//                               of digits is the step number)
//                               [^(ProfilerStep#|[Ss]tep[ _#]?)([0-9]+)$]
//   PODSCOPE_CUPTI_PATH         libcupti to load                [libcupti.so.13, libcupti.so]
//   PODSCOPE_WATCH              0: no watch data between windows (NCCL stays quiet) [1]
//   PODSCOPE_WATCH_FLUSH_MS     how often watch data goes to the agent [1000]
//   PODSCOPE_STREAM_MS          how often, inside a window, what CUPTI recorded goes to the
//                               agent (0: all of it at the window's end) [1000]
//   PODSCOPE_PROBE_DISABLE      set (to anything): the probe stays inert
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "common/unix_socket.h"

namespace podscope::agent::probe {

inline constexpr char kDefaultStepPattern[] = "^(ProfilerStep#|[Ss]tep[ _#]?)([0-9]+)$";

struct ProbeSettings {
  std::string agent_socket = common::kDefaultProbeSocketPath;
  int64_t reconnect_interval_ns = 5'000'000'000;
  uint64_t max_events_per_window = 4'000'000;
  size_t max_queue_bytes = 256u << 20;
  size_t cupti_buffers = 32;
  size_t cupti_buffer_bytes = 4u << 20;
  std::string step_pattern = kDefaultStepPattern;
  std::string cupti_path;  // empty: the default search
  bool disabled = false;
  // Watch data between windows (docs/watch.md), when the agent asks for it too.
  bool watch = true;
  int64_t watch_flush_interval_ns = 1'000'000'000;
  // How long a closed window waits for in-flight events (kernel ends, CUPTI buffers) before
  // its harvest.
  int64_t harvest_grace_ns = 50'000'000;
  // Inside a window, what the sources recorded so far goes to the agent this often, so that
  // neither the probe nor the agent holds the window's events parsed (0: all of it at the end).
  int64_t stream_interval_ns = 1'000'000'000;
};

// Unset or malformed variables keep their defaults (a probe never refuses to load over a typo;
// `warnings` says what was ignored, for the probe's one-line log).
ProbeSettings SettingsFromEnvironment(const std::function<const char*(const char*)>& getenv,
                                      std::string* warnings);

}  // namespace podscope::agent::probe
