// Every collector kind the agent knows, in one table: which ones a configuration asks for and
// how to make them. Adding a collector is one row in collector_registry.cc.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/agent_clock.h"
#include "agent/collector.h"
#include "common/unix_socket.h"

namespace podscope::agent {

struct CollectorConfig {
  std::string host;
  const AgentClock* clock = nullptr;
  std::string simulate;  // --simulate spec; empty: no simulated ranks
  // Real workers: training processes with libpodscope_probe.so register on this socket.
  bool probes = false;
  std::string probe_socket = common::kDefaultProbeSocketPath;
  std::vector<uint32_t> probe_allowed_uids;  // besides the agent's own user and root
  // The host collector (samples during captures of probe workers).
  std::string proc_root = "/proc";
  int64_t host_sample_interval_ns = 100'000'000;
};

struct CollectorKind {
  std::string_view name;
  std::string_view description;
  bool (*wanted)(const CollectorConfig& config);
  absl::StatusOr<std::unique_ptr<Collector>> (*make)(const CollectorConfig& config);
};

std::span<const CollectorKind> CollectorKinds();

// Makes every collector the configuration asks for; the first failure names its kind.
absl::StatusOr<std::vector<std::unique_ptr<Collector>>> MakeCollectors(
    const CollectorConfig& config);

}  // namespace podscope::agent
