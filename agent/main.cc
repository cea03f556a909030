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
#include "common/unix_socket.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace {

using Settings = podscope::agent::AgentSettings;

}  // namespace

int main(int argc, char** argv) {
  // The log, errors included, goes to stderr (stdout carries nothing a daemon's user reads).
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  CLI::App app{"podscope-agent: the podscope node agent (one per machine)"};
  app.set_version_flag("--version", "podscope-agent 0.1.0");
  Settings settings;
  std::string config_path, coordinator, simulate, agent_id, host, log_level, probe_socket,
      proc_root;
  app.add_option("--config", config_path,
                 "JSON config file (coordinator, agent_id, host, simulate, limits)");
  app.add_option("--coordinator", coordinator,
                 "the coordinator's gRPC address HOST:PORT [127.0.0.1:50051]");
  app.add_option("--simulate", simulate,
                 "serve simulated ranks: "
                 "ranks=0-7,world=32,job=J,seed=S,straggler=RANK:FACTOR[:compute|input|launch],"
                 "clock-offset-ms=X,drift-ppm=Y,profile=default|light,sim-world=N");
  app.add_option("--agent-id", agent_id, "this agent's id [HOST-PID]");
  app.add_option("--host", host, "host name to report [the machine's]");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error [info]");
  app.add_option("--probe-socket", probe_socket,
                 std::string("unix socket training processes' probes register on [") +
                     podscope::common::kDefaultProbeSocketPath +
                     "]; probes are served unless --simulate is given without this flag");
  app.add_option("--proc-root", proc_root, "where the host collector reads /proc [/proc]");
  podscope::common::TlsFiles tls_flags;
  std::string tls_server_name;
  bool insecure = false;
  app.add_option("--tls-cert", tls_flags.cert,
                 "this agent's certificate, PEM; its CN is the agent's id");
  app.add_option("--tls-key", tls_flags.key, "its private key, PEM");
  app.add_option("--tls-ca", tls_flags.ca,
                 "the CA the coordinator's certificate must chain to, PEM");
  app.add_option("--tls-server-name", tls_server_name,
                 "the name the coordinator's certificate must hold [the host of --coordinator]");
  std::string watch;
  app.add_option("--watch", watch,
                 "on: stream step summaries to the coordinator between captures, for alerts "
                 "(DESIGN §11); off: "
                 "only captures [on]")
      ->check(CLI::IsMember({"on", "off"}));
  std::string health;
  app.add_option("--health", health,
                 "serve /healthz and /readyz (plain HTTP, no data) on HOST:PORT, for Kubernetes "
                 "probes [none]");
  bool check_config = false;
  app.add_flag("--check-config", check_config,
               "check the config file, flags and TLS files, print \"config OK\" and exit (0 if "
               "good, 2 if not)");
  app.add_flag("--insecure", insecure,
               "plaintext gRPC without certificates: only on a network you trust (logs a warning)");
  // Exit codes: 0 success, 1 a runtime failure, 2 a wrong command line or config.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  if (!config_path.empty()) {
    if (absl::Status s = podscope::agent::LoadAgentConfig(config_path, &settings); !s.ok()) {
      spdlog::error("{}", std::string(s.message()));
      return 2;
    }
  }
  if (!coordinator.empty()) settings.agent.coordinator = coordinator;
  if (!simulate.empty()) settings.simulate = simulate;
  if (!agent_id.empty()) settings.agent.agent_id = agent_id;
  if (!host.empty()) settings.agent.host = host;
  if (!tls_flags.cert.empty()) settings.agent.tls.cert = tls_flags.cert;
  if (!tls_flags.key.empty()) settings.agent.tls.key = tls_flags.key;
  if (!tls_flags.ca.empty()) settings.agent.tls.ca = tls_flags.ca;
  if (!tls_server_name.empty()) settings.agent.tls_server_name = tls_server_name;
  if (!watch.empty()) settings.agent.watch = watch == "on";
  if (!health.empty()) settings.health = health;
  settings.insecure = settings.insecure || insecure;
  if (absl::Status s =
          podscope::common::CheckTlsChoice(settings.agent.tls, settings.insecure, "podscope-agent");
      !s.ok()) {
    spdlog::error("{}", std::string(s.message()));
    return 2;
  }
  if (settings.insecure) {
    spdlog::warn(
        "--insecure: plaintext to the coordinator, which cannot tell this agent from an impostor");
  } else {
    // The coordinator takes an agent as its certificate's identity: the id is the certificate's.
    absl::StatusOr<std::string> pem =
        podscope::common::ReadPemFile(settings.agent.tls.cert, "--tls-cert");
    absl::StatusOr<std::string> identity = pem.ok() ? podscope::common::CertificateCommonName(*pem)
                                                    : absl::StatusOr<std::string>(pem.status());
    if (!identity.ok()) {
      spdlog::error("--tls-cert {}: {}", settings.agent.tls.cert,
                    std::string(identity.status().message()));
      return 2;
    }
    if (settings.agent.agent_id.empty()) {
      settings.agent.agent_id = *identity;
    } else if (settings.agent.agent_id != *identity) {
      spdlog::error(
          "--agent-id {} is not the identity of its certificate (CN={}): leave --agent-id out, or "
          "use a "
          "certificate made for {}",
          settings.agent.agent_id, *identity, settings.agent.agent_id);
      return 2;
    }
  }
  if (settings.agent.host.empty()) {
    // Resolved here, not in the agent, because collectors stamp it on their workers too.
    char name[256] = {0};
    settings.agent.host = gethostname(name, sizeof(name) - 1) == 0 ? name : "unknown-host";
  }
  if (!log_level.empty()) settings.log_level = log_level;
  spdlog::set_level(spdlog::level::from_str(settings.log_level));

  // A simulated agent runs on a deliberately skewed clock so alignment has work to do.
  podscope::agent::AgentClock clock;
  if (!settings.simulate.empty()) {
    absl::StatusOr<podscope::agent::SimulationSpec> spec =
        podscope::agent::ParseSimulationSpec(settings.simulate);
    if (!spec.ok()) {
      spdlog::error("{}", std::string(spec.status().message()));
      return 2;
    }
    clock = podscope::agent::AgentClock(static_cast<int64_t>(spec->clock_offset_ms * 1e6),
                                        spec->drift_ppm, podscope::agent::HostNowNs());
    // Tests compare the coordinator's fitted model against this exact skew.
    spdlog::info("simulated clock skew: offset_ns={} drift_ppb={} reference_ns={}",
                 clock.skew().offset_ns, clock.skew().drift_ppb, clock.skew().reference_ns);
  }
  // Everything above has been checked: the config's keys, the TLS files (CheckTlsChoice reads
  // and parses all three), the token file.
  if (check_config) {
    std::cout << "config OK" << std::endl;
    return 0;
  }
  // Blocked before any thread exists (collectors start theirs), so that SIGTERM reaches the
  // sigtimedwait below instead of killing the process from some other thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  podscope::agent::CollectorConfig collector_config = settings.collectors;
  collector_config.host = settings.agent.host;
  collector_config.clock = &clock;
  collector_config.simulate = settings.simulate;
  if (!probe_socket.empty()) collector_config.probe_socket = probe_socket;
  if (!proc_root.empty()) collector_config.proc_root = proc_root;
  // A real agent serves probes; a simulated one too when asked (several simulated agents on one
  // machine would otherwise fight over the default socket).
  collector_config.probes = settings.simulate.empty() || !probe_socket.empty();
  auto collectors = podscope::agent::MakeCollectors(collector_config);
  if (!collectors.ok()) {
    spdlog::error("{}", std::string(collectors.status().message()));
    return 2;
  }
  if (collectors->empty()) {
    spdlog::error("no collector configured");
    return 2;
  }

  size_t workers = 0;
  for (const auto& c : *collectors) workers += c->Workers().size();
  // One control stream per coordinator shard that owns one of this node's jobs (one in all
  // against an unsharded coordinator).
  podscope::agent::ShardedAgent agent(settings.agent, clock, *std::move(collectors));
  agent.Start();
  std::unique_ptr<podscope::agent::HealthServer> health_server;
  if (!settings.health.empty()) {
    absl::StatusOr<std::unique_ptr<podscope::agent::HealthServer>> started =
        podscope::agent::HealthServer::Start(settings.health, [&agent](std::string* why) {
          if (agent.connected()) return true;
          *why = "not connected to every coordinator shard it needs (yet)";
          return false;
        });
    if (!started.ok()) {
      spdlog::error("{}", std::string(started.status().message()));
      agent.Stop();
      return 2;
    }
    health_server = *std::move(started);
    spdlog::info("health endpoint on http://{}:{} (/healthz, /readyz)",
                 settings.health.substr(0, settings.health.rfind(':')), health_server->port());
  }
  // The exact line tests and scripts wait for.
  spdlog::info("podscope-agent {} serving {} workers, coordinator {}", agent.agent_id(), workers,
               settings.agent.coordinator);
  if (!settings.agent.watch)
    spdlog::info(
        "--watch=off: no step summaries are sent; the coordinator cannot alert on this node");

  // Wait for a signal, or for the coordinator to refuse us (checked once a second).
  int exit_code = 0;
  timespec tick{1, 0};
  while (true) {
    const int signal_number = sigtimedwait(&signals, nullptr, &tick);
    if (signal_number > 0) {
      spdlog::info("signal {}: stopping", signal_number);
      break;
    }
    if (!agent.refusal().empty()) {
      exit_code = 3;
      break;
    }
  }
  agent.Stop();
  spdlog::info("stopped");
  return exit_code;
}
