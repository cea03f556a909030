#include "agent/collector_registry.h"

#include "agent/collectors/simulated_ranks.h"
#include "common/str_util.h"

namespace podscope::agent {

namespace {

absl::StatusOr<std::unique_ptr<Collector>> MakeSimulated(const CollectorConfig& config) {
  absl::StatusOr<SimulationSpec> spec = ParseSimulationSpec(config.simulate);
  if (!spec.ok()) return spec.status();
  return std::unique_ptr<Collector>(new SimulatedRanksCollector(*std::move(spec), config.host, *config.clock));
}

constexpr CollectorKind kKinds[] = {
    {"sim", "simulated ranks of a data-parallel job (--simulate)",
     [](const CollectorConfig& c) { return !c.simulate.empty(); }, &MakeSimulated},
};

}  // namespace

std::span<const CollectorKind> CollectorKinds() { return kKinds; }

absl::StatusOr<std::vector<std::unique_ptr<Collector>>> MakeCollectors(const CollectorConfig& config) {
  std::vector<std::unique_ptr<Collector>> out;
  for (const CollectorKind& kind : kKinds) {
    if (!kind.wanted(config)) continue;
    absl::StatusOr<std::unique_ptr<Collector>> made = kind.make(config);
    if (!made.ok()) {
      return absl::Status(made.status().code(), common::StrCat(kind.name, " collector: ", std::string(made.status().message())));
    }
    out.push_back(*std::move(made));
  }
  return out;
}

}  // namespace podscope::agent
