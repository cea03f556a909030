// A probe's ProbeWatch message, checked record by record. A probe is a process of a
// user the agent serves, not the agent itself: a record that breaks a bound (a time outside
// [0, 2^62) ns, a kernel ending before it starts, an op the trace model does not know) is
// dropped and counted, so that one bad probe never costs the node's whole watch batch at the
// coordinator, which refuses a batch with any such record.
#pragma once

#include <cstdint>
#include <vector>

#include "agent/watch/step_assembler.h"
#include "common/watch_summary.h"
#include "podscope/v1/probe.pb.h"

namespace podscope::agent {

struct ProbeWatchLimits {
  size_t max_collectives = 65'536;
  size_t max_steps = 4'096;
  size_t max_progress = 1'024;
  int32_t max_nranks = 1 << 20;
};

struct ProbeWatchData {
  TimeNs now_ns = 0;
  std::vector<common::CollectiveArrival> collectives;
  std::vector<MarkedStep> steps;
  std::vector<common::RankProgress> progress;  // rank -1: the caller names it
  uint64_t probe_dropped = 0;                  // what the probe says it lost, since it started
  uint64_t refused = 0;                        // records dropped here
};

ProbeWatchData DecodeProbeWatch(const v1::ProbeWatch& watch, const ProbeWatchLimits& limits = {});

}  // namespace podscope::agent
