// The agent's command line: flags over the config file's keys.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "agent/agent_config.h"
#include "common/tls_files.h"

namespace podscope::agent {

struct AgentFlags {
  std::string config_path, coordinator, simulate, agent_id, host, log_level, probe_socket,
      proc_root, tls_server_name, watch, health;
  common::TlsFiles tls;
  bool insecure = false;
  bool check_config = false;
};

void AddAgentFlags(CLI::App& app, AgentFlags& flags);

// The config file (when given), the flags over it, the TLS choice checked (its files read and
// parsed), and what follows from them:
//   - who this agent is: with TLS, its certificate's CN (the coordinator takes an agent as its
//     certificate's identity), and --agent-id must agree; the host name, resolved here because
//     collectors stamp it on their workers too;
//   - the collectors' settings: the host, the simulation, the probe socket and /proc root; a
//     real agent serves probes, a simulated one only when --probe-socket is given (several
//     simulated agents on one machine would otherwise fight over the default socket).
// The collectors' clock is the caller's to set. Errors are the config's or the command line's.
absl::StatusOr<AgentSettings> LoadAgentSettings(const AgentFlags& flags);

}  // namespace podscope::agent
