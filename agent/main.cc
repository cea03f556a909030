// podscope-agent: the node agent. One per machine; serves the workers on it to the coordinator.
#include <signal.h>
#include <unistd.h>

#include <boost/json.hpp>

#include "CLI/CLI.hpp"
#include "common/json_config.h"
#include "agent/agent.h"
#include "agent/collector_registry.h"
#include "agent/collectors/simulated_ranks.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace {

struct Settings {
  podscope::agent::AgentOptions agent;
  std::string simulate;
  std::string log_level = "info";
  podscope::agent::CollectorConfig collectors;
};

// The JSON config file; command-line flags win over it.
bool LoadConfig(const std::string& path, Settings* s, std::string* error) {
  absl::StatusOr<boost::json::object> root = podscope::common::ReadJsonConfig(path);
  if (!root.ok()) {
    *error = std::string(root.status().message());
    return false;
  }
  // Every key with its type and range in one place; a wrong one names itself and its range.
  try {
    const podscope::common::ConfigSection o(
        *root, "", {"coordinator", "agent_id", "host", "simulate", "log_level", "chunk_events", "max_spool_bytes",
                    "clock_burst", "probe_socket", "proc_root", "probe_allowed_uids", "host_sample_interval_ms"});
    o.String("coordinator", &s->agent.coordinator, 512);
    o.String("agent_id", &s->agent.agent_id, 128);
    o.String("host", &s->agent.host, 256);
    o.String("simulate", &s->simulate);
    o.String("log_level", &s->log_level, 16);
    o.Integer("chunk_events", &s->agent.capture.chunk_events, 1, 100'000'000);
    o.Integer("max_spool_bytes", &s->agent.capture.max_spool_bytes, 1 << 20, int64_t{1} << 44);
    o.Integer("clock_burst", &s->agent.clock_burst, 1, 1'000);
    o.String("probe_socket", &s->collectors.probe_socket, 107);  // sun_path
    o.String("proc_root", &s->collectors.proc_root);
    if (const boost::json::value* uids = o.Raw("probe_allowed_uids")) {
      if (!uids->is_array() || uids->get_array().size() > 1024) throw o.Bad("probe_allowed_uids", "is not a list of at most 1024 uids");
      for (const boost::json::value& uid : uids->get_array()) {
        if (!uid.is_int64() || uid.get_int64() < 0 || uid.get_int64() > UINT32_MAX) {
          throw o.Bad("probe_allowed_uids", boost::json::serialize(uid) + " is not a uid");
        }
        s->collectors.probe_allowed_uids.push_back(static_cast<uint32_t>(uid.get_int64()));
      }
    }
    int64_t sample_ms = 0;
    if (o.Has("host_sample_interval_ms")) {
      o.Integer("host_sample_interval_ms", &sample_ms, 10, 60'000);
      s->collectors.host_sample_interval_ns = sample_ms * 1'000'000;
    }
  } catch (const std::exception& e) {
    *error = "config " + path + ": " + e.what();
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // The log, errors included, goes to stderr (stdout carries nothing a daemon's user reads).
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  CLI::App app{"podscope-agent: the podscope node agent (one per machine)"};
  app.set_version_flag("--version", "podscope-agent 0.1.0");
  Settings settings;
  std::string config_path, coordinator, simulate, agent_id, host, log_level, probe_socket, proc_root;
  app.add_option("--config", config_path, "JSON config file (coordinator, agent_id, host, simulate, limits)");
  app.add_option("--coordinator", coordinator, "the coordinator's gRPC address HOST:PORT [127.0.0.1:50051]");
  app.add_option("--simulate", simulate,
                 "serve simulated ranks: ranks=0-7,world=32,job=J,seed=S,straggler=RANK:FACTOR[:compute|input|launch],"
                 "clock-offset-ms=X,drift-ppm=Y,profile=default|light,sim-world=N");
  app.add_option("--agent-id", agent_id, "this agent's id [HOST-PID]");
  app.add_option("--host", host, "host name to report [the machine's]");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error [info]");
  app.add_option("--probe-socket", probe_socket,
                 "unix socket training processes' probes register on [/run/podscope/agent.sock]; probes are served "
                 "unless --simulate is given without this flag");
  app.add_option("--proc-root", proc_root, "where the host collector reads /proc [/proc]");
  // Exit codes: 0 success, 1 a runtime failure, 2 a wrong command line or config.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  std::string error;
  if (!config_path.empty() && !LoadConfig(config_path, &settings, &error)) {
    spdlog::error("{}", error);
    return 2;
  }
  if (!coordinator.empty()) settings.agent.coordinator = coordinator;
  if (!simulate.empty()) settings.simulate = simulate;
  if (!agent_id.empty()) settings.agent.agent_id = agent_id;
  if (!host.empty()) settings.agent.host = host;
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
    absl::StatusOr<podscope::agent::SimulationSpec> spec = podscope::agent::ParseSimulationSpec(settings.simulate);
    if (!spec.ok()) {
      spdlog::error("{}", std::string(spec.status().message()));
      return 2;
    }
    clock = podscope::agent::AgentClock(static_cast<int64_t>(spec->clock_offset_ms * 1e6), spec->drift_ppm,
                                        podscope::agent::HostNowNs());
    // Tests compare the coordinator's fitted model against this exact skew.
    spdlog::info("simulated clock skew: offset_ns={} drift_ppb={} reference_ns={}", clock.skew().offset_ns,
                 clock.skew().drift_ppb, clock.skew().reference_ns);
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
  podscope::agent::Agent agent(settings.agent, clock, *std::move(collectors));
  agent.Start();
  // The exact line tests and scripts wait for.
  spdlog::info("podscope-agent {} serving {} workers, coordinator {}", agent.agent_id(), workers,
               settings.agent.coordinator);

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
