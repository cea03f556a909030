// The agent's settings and its JSON config file: every key with its type and range in one
// place; an unknown key names itself and the closest known one.
#pragma once

#include <boost/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "agent/agent.h"
#include "agent/collector_registry.h"

namespace podscope::agent {

struct AgentSettings {
  AgentOptions agent;
  std::string simulate;
  std::string log_level = "info";
  bool insecure = false;
  CollectorConfig collectors;
  std::string health;  // HOST:PORT of the health endpoint (/healthz, /readyz); empty: none
};

// Applies a parsed config to `s` (flags are applied after, by main). Errors name the key.
absl::Status ApplyAgentConfig(const boost::json::object& root, AgentSettings* s);
// Reads, parses and applies the config file at `path`.
absl::Status LoadAgentConfig(const std::string& path, AgentSettings* s);

}  // namespace podscope::agent
