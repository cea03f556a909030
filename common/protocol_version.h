// Protocol versions: agent <-> coordinator (agent.proto) and probe <-> agent (probe.proto).
#pragma once

#include <cstdint>

namespace podscope::common {

// Bump the major on an incompatible change: a coordinator refuses agents of another major.
// Bump the minor on additions both sides may ignore.
inline constexpr uint32_t kAgentProtocolMajor = 1;
inline constexpr uint32_t kAgentProtocolMinor = 2;  // 1: Watch; 2: shard owners

}  // namespace podscope::common

namespace podscope::common {

// The probe <-> agent protocol (common/proto/podscope/v1/probe.proto), versioned the same way:
// an agent refuses a probe of another major version, naming both.
inline constexpr uint32_t kProbeProtocolMajor = 1;
inline constexpr uint32_t kProbeProtocolMinor = 1;  // 1: watch data (ProbeWatch)

}  // namespace podscope::common
