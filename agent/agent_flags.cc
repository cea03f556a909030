#include "agent/agent_flags.h"

#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <string_view>

#include "common/host_port.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "common/unix_socket.h"
#include "podscope/version.h"
#include "spdlog/spdlog.h"

namespace podscope::agent {
namespace {

absl::Status ResolveIdentity(AgentSettings* settings) {
  if (settings->insecure) {
    spdlog::warn(
        "--insecure: plaintext to the coordinator, which cannot tell this agent from an impostor");
  } else {
    absl::StatusOr<std::string> pem = common::ReadPemFile(settings->agent.tls.cert, "--tls-cert");
    absl::StatusOr<std::string> identity =
        pem.ok() ? common::CertificateCommonName(*pem) : absl::StatusOr<std::string>(pem.status());
    if (!identity.ok()) {
      return absl::InvalidArgumentError(common::StrCat("--tls-cert ", settings->agent.tls.cert,
                                                       ": ", identity.status().message()));
    }
    if (settings->agent.agent_id.empty()) {
      settings->agent.agent_id = *identity;
    } else if (settings->agent.agent_id != *identity) {
      return absl::InvalidArgumentError(common::StrCat(
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

}  // namespace

void AddAgentFlags(CLI::App& app, AgentFlags& c) {
  app.set_version_flag("--version", std::string("podscope-agent ") + kVersion);
  app.add_option("--config", c.config_path,
                 "JSON config file (coordinator, agent_id, host, simulate, limits)");
  app.add_option("--coordinator", c.coordinator,
                 "the coordinator's gRPC address HOST:PORT [127.0.0.1:50051]");
  app.add_option("--simulate", c.simulate,
                 "serve simulated ranks: "
                 "ranks=0-7,world=32,job=J,seed=S,straggler=RANK:FACTOR[:compute|input|launch],"
                 "straggler-at=T0[-T1],hang=RANK@T,clock-offset-ms=X,drift-ppm=Y,"
                 "profile=default|light|dense,sim-world=N");
  app.add_option("--agent-id", c.agent_id, "this agent's id [HOST-PID]");
  app.add_option("--host", c.host, "host name to report [the machine's]");
  app.add_option("--log-level", c.log_level, "trace, debug, info, warn, error [info]");
  app.add_option("--probe-socket", c.probe_socket,
                 std::string("unix socket training processes' probes register on [") +
                     common::kDefaultProbeSocketPath +
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

absl::StatusOr<AgentSettings> LoadAgentSettings(const AgentFlags& c) {
  AgentSettings settings;

  if (!c.config_path.empty()) RETURN_IF_ERROR(LoadAgentConfig(c.config_path, &settings));
  if (!c.coordinator.empty()) settings.agent.coordinator = c.coordinator;
  if (!c.simulate.empty()) settings.simulate = c.simulate;
  if (!c.agent_id.empty()) settings.agent.agent_id = c.agent_id;
  if (!c.host.empty()) settings.agent.host = c.host;
  if (!c.tls.cert.empty()) settings.agent.tls.cert = c.tls.cert;
  if (!c.tls.key.empty()) settings.agent.tls.key = c.tls.key;
  if (!c.tls.ca.empty()) settings.agent.tls.ca = c.tls.ca;
  if (!c.tls_server_name.empty()) settings.agent.tls_server_name = c.tls_server_name;
  if (!c.watch.empty()) settings.agent.watch = c.watch == "on";
  if (!c.health.empty()) settings.health = c.health;
  if (!c.log_level.empty()) settings.log_level = c.log_level;
  settings.insecure = settings.insecure || c.insecure;
  RETURN_IF_ERROR(common::CheckTlsChoice(settings.agent.tls, settings.insecure, "podscope-agent"));
  // spdlog reads an unknown level as "off": the agent would then fail without a word.
  static constexpr std::string_view kLevels[] = {"trace", "debug",    "info", "warn",
                                                 "error", "critical", "off"};
  if (std::find(std::begin(kLevels), std::end(kLevels), settings.log_level) == std::end(kLevels))
    return absl::InvalidArgumentError(
        common::StrCat("log level \"", settings.log_level,
                       "\" is not one of trace, debug, info, warn, error, critical, off"));
  if (!settings.health.empty()) {
    const absl::StatusOr<common::HostPort> health =
        common::ParseHostPort(settings.health, {.allow_port_zero = true});
    if (!health.ok())
      return absl::InvalidArgumentError(common::StrCat("--health: ", health.status().message()));
    if (!common::IsIpAddress(health->host))
      return absl::InvalidArgumentError(
          common::StrCat("--health: \"", health->host, "\" is not an IP address"));
  }
  RETURN_IF_ERROR(ResolveIdentity(&settings));
  CollectorConfig& collectors = settings.collectors;
  collectors.host = settings.agent.host;
  collectors.simulate = settings.simulate;
  if (!c.probe_socket.empty()) collectors.probe_socket = c.probe_socket;
  if (!c.proc_root.empty()) collectors.proc_root = c.proc_root;
  collectors.probes = settings.simulate.empty() || !c.probe_socket.empty();
  return settings;
}

}  // namespace podscope::agent
