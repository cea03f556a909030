// podscope-agent: the node agent. One per machine; serves the workers on it to the coordinator.
#include <signal.h>

#include <iostream>

#include "CLI/CLI.hpp"
#include "agent/agent.h"
#include "agent/agent_config.h"
#include "agent/agent_flags.h"
#include "agent/collector_registry.h"
#include "agent/collectors/simulated_ranks.h"
#include "agent/health/health_server.h"
#include "agent/sharded_agent.h"
#include "common/daemon_process.h"
#include "common/status_format.h"
#include "common/status_macros.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace {

using Settings = podscope::agent::AgentSettings;

// The host clock; a simulated agent runs on a deliberately skewed one so that alignment has work
// to do.
absl::StatusOr<podscope::agent::AgentClock> MakeClock(const Settings& settings) {
  if (settings.simulate.empty()) return podscope::agent::AgentClock();
  ASSIGN_OR_RETURN(podscope::agent::SimulationSpec spec,
                   podscope::agent::ParseSimulationSpec(settings.simulate));
  podscope::agent::AgentClock clock(static_cast<int64_t>(spec.clock_offset_ms * 1e6),
                                    spec.drift_ppm, podscope::agent::HostNowNs());
  // Tests compare the coordinator's fitted model against this exact skew.
  spdlog::info("simulated clock skew: offset_ns={} drift_ppb={} reference_ns={}",
               clock.skew().offset_ns, clock.skew().drift_ppb, clock.skew().reference_ns);
  return clock;
}

// /healthz and /readyz on settings.health, ready once every shard the agent needs has it.
absl::StatusOr<std::unique_ptr<podscope::agent::HealthServer>> StartHealth(
    const Settings& settings, podscope::agent::ShardedAgent& agent) {
  absl::StatusOr<std::unique_ptr<podscope::agent::HealthServer>> started =
      podscope::agent::HealthServer::Start(settings.health, [&agent](std::string* why) {
        if (agent.connected()) return true;
        *why = "not connected to every coordinator shard it needs (yet)";
        return false;
      });
  if (!started.ok()) return started.status();
  spdlog::info("health endpoint on http://{}:{} (/healthz, /readyz)",
               settings.health.substr(0, settings.health.rfind(':')), (*started)->port());
  return started;
}

// Waits for SIGINT or SIGTERM (0), or for the coordinator to refuse the agent (3), checked once a
// second.
int WaitForStop(const sigset_t& signals, const podscope::agent::ShardedAgent& agent) {
  timespec tick{1, 0};
  while (true) {
    const int signal_number = sigtimedwait(&signals, nullptr, &tick);
    if (signal_number == SIGHUP) {
      // A reload sent to every podscope process must not stop the agents.
      spdlog::info("SIGHUP: the agent re-reads nothing; restart it to change its settings");
      continue;
    }
    if (signal_number > 0) {
      spdlog::info("signal {}: stopping", signal_number);
      return 0;
    }
    if (!agent.refusal().empty()) return 3;
  }
}

// Logs `s` and returns the exit code: 1 a runtime failure, 2 a wrong command line or config.
int Fail(const absl::Status& s, int code = 2) {
  spdlog::error("{}", s);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  // The log, errors included, goes to stderr (stdout carries nothing a daemon's user reads).
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  CLI::App app{"podscope-agent: the podscope node agent (one per machine)"};
  podscope::agent::AgentFlags flags;
  podscope::agent::AddAgentFlags(app, flags);
  // Exit codes: 0 success, 1 a runtime failure, 2 a wrong command line or config, 3 refused by
  // the coordinator.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  // Blocked before anything else (collectors start threads later), so that a signal sent while
  // the agent starts waits for the sigtimedwait below rather than ending the process.
  const sigset_t signals = podscope::common::BlockSignals({SIGINT, SIGTERM, SIGHUP});
  absl::StatusOr<Settings> loaded = podscope::agent::LoadAgentSettings(flags);
  if (!loaded.ok()) return Fail(loaded.status());
  Settings& settings = *loaded;
  spdlog::set_level(spdlog::level::from_str(settings.log_level));
  absl::StatusOr<podscope::agent::AgentClock> clock = MakeClock(settings);
  if (!clock.ok()) return Fail(clock.status());
  // Everything above has been checked: the config's keys, the flags, the TLS files (all three
  // read and parsed) and the certificate's identity.
  if (flags.check_config) {
    std::cout << "config OK" << std::endl;
    return 0;
  }

  settings.collectors.clock = &*clock;
  auto collectors = podscope::agent::MakeCollectors(settings.collectors);
  if (!collectors.ok()) return Fail(collectors.status());
  if (collectors->empty()) {
    spdlog::error("no collector configured");
    return 2;
  }
  size_t workers = 0;
  for (const auto& c : *collectors) workers += c->Workers().size();
  // One control stream per coordinator shard that owns one of this node's jobs (one in all
  // against an unsharded coordinator).
  podscope::agent::ShardedAgent agent(settings.agent, *clock, *std::move(collectors));
  // Listening first: an address in use fails the start before the agent reaches any coordinator.
  std::unique_ptr<podscope::agent::HealthServer> health_server;
  if (!settings.health.empty()) {
    absl::StatusOr<std::unique_ptr<podscope::agent::HealthServer>> started =
        StartHealth(settings, agent);
    if (!started.ok()) return Fail(started.status(), 1);
    health_server = *std::move(started);
  }
  agent.Start();
  // The exact line tests and scripts wait for.
  spdlog::info("podscope-agent {} serving {} workers, coordinator {}", agent.agent_id(), workers,
               settings.agent.coordinator);
  if (!settings.agent.watch)
    spdlog::info(
        "--watch=off: no step summaries are sent; the coordinator cannot alert on this node");
  const int exit_code = WaitForStop(signals, agent);
  agent.Stop();
  spdlog::info("stopped");
  return exit_code;
}
