#include "agent/collector_registry.h"

#include "agent/collectors/probe_collector.h"
#include "agent/collectors/simulated_ranks.h"
#include "agent/host/gpu_reader.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "spdlog/spdlog.h"

namespace podscope::agent {

namespace {

absl::StatusOr<std::unique_ptr<Collector>> MakeSimulated(const CollectorConfig& config) {
  ASSIGN_OR_RETURN(SimulationSpec spec, ParseSimulationSpec(config.simulate));
  return std::unique_ptr<Collector>(
      new SimulatedRanksCollector(std::move(spec), config.host, *config.clock));
}

absl::StatusOr<std::unique_ptr<Collector>> MakeProbes(const CollectorConfig& config) {
  host::HostSamplerOptions sampling;
  sampling.proc_root = config.proc_root;
  sampling.interval_ns = config.host_sample_interval_ns;
  std::unique_ptr<host::GpuReader> gpus;
  if (absl::StatusOr<std::unique_ptr<host::GpuReader>> nvml = host::OpenNvml(); nvml.ok()) {
    gpus = *std::move(nvml);
  } else {
    spdlog::warn("host collector: {}; GPU clock, power and temperature will not be sampled",
                 std::string(nvml.status().message()));
  }
  ProbeCollectorOptions options;
  options.host = config.host;
  options.proc_root = config.proc_root;
  options.server.socket_path = config.probe_socket;
  options.server.allowed_uids.assign(config.probe_allowed_uids.begin(),
                                     config.probe_allowed_uids.end());
  auto sampler = std::make_unique<host::HostSampler>(sampling, std::move(gpus));
  ASSIGN_OR_RETURN(std::unique_ptr<ProbeCollector> probes,
                   ProbeCollector::Start(options, *config.clock, std::move(sampler)));
  return std::unique_ptr<Collector>(std::move(probes));
}

constexpr CollectorKind kKinds[] = {
    {"sim", "simulated ranks of a data-parallel job (--simulate)",
     [](const CollectorConfig& c) { return !c.simulate.empty(); }, &MakeSimulated},
    {"probe",
     "training processes running libpodscope_probe.so (CUPTI, NCCL, steps) plus the host collector",
     [](const CollectorConfig& c) { return c.probes; }, &MakeProbes},
};

}  // namespace

std::span<const CollectorKind> CollectorKinds() { return kKinds; }

absl::StatusOr<std::vector<std::unique_ptr<Collector>>> MakeCollectors(
    const CollectorConfig& config) {
  std::vector<std::unique_ptr<Collector>> out;
  for (const CollectorKind& kind : kKinds) {
    if (!kind.wanted(config)) continue;
    absl::StatusOr<std::unique_ptr<Collector>> made = kind.make(config);
    if (!made.ok()) {
      return absl::Status(
          made.status().code(),
          common::StrCat(kind.name, " collector: ", std::string(made.status().message())));
    }
    out.push_back(*std::move(made));
  }
  return out;
}

}  // namespace podscope::agent
