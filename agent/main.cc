// podscope-agent: the node agent. One per machine; serves the workers on it to the coordinator.
#include <signal.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <iostream>

#include "CLI/CLI.hpp"
#include "agent/agent.h"
#include "agent/agent_config.h"
#include "agent/collector_registry.h"
#include "agent/collectors/simulated_ranks.h"
#include "agent/health/health_server.h"
#include "agent/sharded_agent.h"
#include "common/daemon_process.h"
#include "common/status_format.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "common/unix_socket.h"
#include "podscope/version.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace {

using Settings = podscope::agent::AgentSettings;

// The command line: flags override the config file's keys.
struct CommandLine {
  std::string config_path, coordinator, simulate, agent_id, host, log_level, probe_socket,
      proc_root, tls_server_name, watch, health;
  podscope::common::TlsFiles tls;
  bool insecure = false;
  bool check_config = false;
};

void AddFlags(CLI::App& app, CommandLine& c) {
  app.set_version_flag("--version", std::string("podscope-agent ") + podscope::kVersion);
  app.add_option("--config", c.config_path,
                 "JSON config file (coordinator, agent_id, host, simulate, limits)");
  app.add_option("--coordinator", c.coordinator,
                 "the coordinator's gRPC address HOST:PORT [127.0.0.1:50051]");
  app.add_option("--simulate", c.simulate,
                 "serve simulated ranks: "
                 "ranks=0-7,world=32,job=J,seed=S,straggler=RANK:FACTOR[:compute|input|launch],"
                 "clock-offset-ms=X,drift-ppm=Y,profile=default|light|dense,sim-world=N");
  app.add_option("--agent-id", c.agent_id, "this agent's id [HOST-PID]");
  app.add_option("--host", c.host, "host name to report [the machine's]");
  app.add_option("--log-level", c.log_level, "trace, debug, info, warn, error [info]");
  app.add_option("--probe-socket", c.probe_socket,
                 std::string("unix socket training processes' probes register on [") +
                     podscope::common::kDefaultProbeSocketPath +
                     "]; probes are served unless --simulate is given without this flag");
  app.add_option("--proc-root", c.proc_root, "where the host collector reads /proc [/proc]");
  app.add_option("--tls-cert", c.tls.cert,
                 "this agent's certificate, PEM; its CN is the agent's id");
  app.add_option("--tls-key", c.tls.key, "its private key, PEM");
  app.add_option("--tls-ca", c.tls.ca, "the CA the coordinator's certificate must chain to, PEM");
  app.add_option("--tls-server-name", c.tls_server_name,
                 "the name the coordinator's certificate must hold [the host of --coordinator]");
  app.add_option("--watch", c.watch,
                 "on: stream step summaries to the coordinator between captures, for alerts "
                 "(docs/watch.md); off: "
                 "only captures [on]")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--health", c.health,
                 "serve /healthz and /readyz (plain HTTP, no data) on HOST:PORT, for Kubernetes "
                 "probes [none]");
  app.add_flag("--check-config", c.check_config,
               "check the config file, flags and TLS files, print \"config OK\" and exit (0 if "
               "good, 2 if not)");
  app.add_flag("--insecure", c.insecure,
               "plaintext gRPC without certificates: only on a network you trust (logs a warning)");
}

// The config file, then the flags over it.
absl::Status LoadSettings(const CommandLine& c, Settings* settings) {
  if (!c.config_path.empty()) {
    if (absl::Status s = podscope::agent::LoadAgentConfig(c.config_path, settings); !s.ok())
      return s;
  }
  if (!c.coordinator.empty()) settings->agent.coordinator = c.coordinator;
  if (!c.simulate.empty()) settings->simulate = c.simulate;
  if (!c.agent_id.empty()) settings->agent.agent_id = c.agent_id;
  if (!c.host.empty()) settings->agent.host = c.host;
  if (!c.tls.cert.empty()) settings->agent.tls.cert = c.tls.cert;
  if (!c.tls.key.empty()) settings->agent.tls.key = c.tls.key;
  if (!c.tls.ca.empty()) settings->agent.tls.ca = c.tls.ca;
  if (!c.tls_server_name.empty()) settings->agent.tls_server_name = c.tls_server_name;
  if (!c.watch.empty()) settings->agent.watch = c.watch == "on";
  if (!c.health.empty()) settings->health = c.health;
  if (!c.log_level.empty()) settings->log_level = c.log_level;
  settings->insecure = settings->insecure || c.insecure;
  return podscope::common::CheckTlsChoice(settings->agent.tls, settings->insecure,
                                          "podscope-agent");
}

// Who this agent is: with TLS, its certificate's CN (the coordinator takes an agent as its
// certificate's identity); and the host name, resolved here rather than in the agent because
// collectors stamp it on their workers too.
absl::Status ResolveIdentity(Settings* settings) {
  if (settings->insecure) {
    spdlog::warn(
        "--insecure: plaintext to the coordinator, which cannot tell this agent from an impostor");
  } else {
    absl::StatusOr<std::string> pem =
        podscope::common::ReadPemFile(settings->agent.tls.cert, "--tls-cert");
    absl::StatusOr<std::string> identity = pem.ok() ? podscope::common::CertificateCommonName(*pem)
                                                    : absl::StatusOr<std::string>(pem.status());
    if (!identity.ok()) {
      return absl::InvalidArgumentError(podscope::common::StrCat(
          "--tls-cert ", settings->agent.tls.cert, ": ", identity.status().message()));
    }
    if (settings->agent.agent_id.empty()) {
      settings->agent.agent_id = *identity;
    } else if (settings->agent.agent_id != *identity) {
      return absl::InvalidArgumentError(podscope::common::StrCat(
          "--agent-id ", settings->agent.agent_id,
          " is not the identity of its certificate (CN=", *identity,
          "): leave --agent-id out, or use a certificate made for ", settings->agent.agent_id));
    }
  }
  if (settings->agent.host.empty()) {
    char name[256] = {0};
    settings->agent.host = gethostname(name, sizeof(name) - 1) == 0 ? name : "unknown-host";
  }
  return absl::OkStatus();
}

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

podscope::agent::CollectorConfig MakeCollectorConfig(const Settings& settings, const CommandLine& c,
                                                     podscope::agent::AgentClock& clock) {
  podscope::agent::CollectorConfig config = settings.collectors;
  config.host = settings.agent.host;
  config.clock = &clock;
  config.simulate = settings.simulate;
  if (!c.probe_socket.empty()) config.probe_socket = c.probe_socket;
  if (!c.proc_root.empty()) config.proc_root = c.proc_root;
  // A real agent serves probes; a simulated one too when asked (several simulated agents on one
  // machine would otherwise fight over the default socket).
  config.probes = settings.simulate.empty() || !c.probe_socket.empty();
  return config;
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
    if (signal_number > 0) {
      spdlog::info("signal {}: stopping", signal_number);
      return 0;
    }
    if (!agent.refusal().empty()) return 3;
  }
}

// Logs `s` and returns the exit code: 2, a wrong command line or config.
int Fail(const absl::Status& s) {
  spdlog::error("{}", s);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // The log, errors included, goes to stderr (stdout carries nothing a daemon's user reads).
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  CLI::App app{"podscope-agent: the podscope node agent (one per machine)"};
  CommandLine command_line;
  AddFlags(app, command_line);
  // Exit codes: 0 success, 1 a runtime failure, 2 a wrong command line or config, 3 refused by
  // the coordinator.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  Settings settings;
  if (absl::Status s = LoadSettings(command_line, &settings); !s.ok()) return Fail(s);
  if (absl::Status s = ResolveIdentity(&settings); !s.ok()) return Fail(s);
  spdlog::set_level(spdlog::level::from_str(settings.log_level));
  absl::StatusOr<podscope::agent::AgentClock> clock = MakeClock(settings);
  if (!clock.ok()) return Fail(clock.status());
  // Everything above has been checked: the config's keys, the TLS files (CheckTlsChoice reads
  // and parses all three), the token file.
  if (command_line.check_config) {
    std::cout << "config OK" << std::endl;
    return 0;
  }
  // Blocked before any thread exists (collectors start theirs), so that SIGTERM reaches the
  // sigtimedwait below instead of killing the process from some other thread.
  const sigset_t signals = podscope::common::BlockSignals({SIGINT, SIGTERM});

  auto collectors =
      podscope::agent::MakeCollectors(MakeCollectorConfig(settings, command_line, *clock));
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
  agent.Start();
  std::unique_ptr<podscope::agent::HealthServer> health_server;
  if (!settings.health.empty()) {
    absl::StatusOr<std::unique_ptr<podscope::agent::HealthServer>> started =
        StartHealth(settings, agent);
    if (!started.ok()) {
      agent.Stop();
      return Fail(started.status());
    }
    health_server = *std::move(started);
  }
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
