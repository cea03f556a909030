// The agent <-> coordinator protocol version (common/proto/podscope/v1/agent.proto).
#pragma once

#include <cstdint>

namespace podscope::common {

// Bump the major on an incompatible change: a coordinator refuses agents of another major.
// Bump the minor on additions both sides may ignore.
inline constexpr uint32_t kAgentProtocolMajor = 1;
inline constexpr uint32_t kAgentProtocolMinor = 0;

}  // namespace podscope::common
