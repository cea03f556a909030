// Watch data (docs/watch.md): what an agent reports about each rank between capture windows, small
// by design so that one coordinator watches thousands of ranks. The agent makes it from probe
// events (or the simulated workload model); the coordinator's detectors read it on its clock.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/time_types.h"
#include "common/trace_model.h"
#include "common/worker_trace.h"

namespace podscope::common {

// One rank's part in one collective: what cross-rank matching needs.
struct CollectiveArrival {
  uint64_t communicator = 0;  // NCCL's communicator hash (or a hash of the communicator's name)
  int64_t sequence = 0;       // per communicator, the same on every rank
  CollectiveOp op = CollectiveOp::kUnknown;
  int32_t nranks = 0;
  int64_t bytes = 0;
  TimeNs enqueue_ns = 0;  // the host launched it
  TimeNs start_ns = 0;    // its kernel started: the rank's arrival
  TimeNs end_ns = 0;      // its kernel ended
};

// One rank's step.
struct StepSummary {
  int32_t rank = 0;
  int64_t step = 0;
  TimeNs start_ns = 0;
  TimeNs end_ns = 0;
  TimeNs comm_kernel_ns = 0;                   // union of the step's communication kernels
  std::vector<CollectiveArrival> collectives;  // those the host launched inside the step
};

// Where one rank stands in one communicator, sent while steps do not end (a hang never ends
// its step): the last collective it entered and the last it completed.
struct RankProgress {
  int32_t rank = 0;
  uint64_t communicator = 0;
  int32_t nranks = 0;
  int64_t entered_sequence = -1;  // -1: none yet
  TimeNs entered_ns = 0;
  CollectiveOp entered_op = CollectiveOp::kUnknown;
  int64_t entered_bytes = 0;
  int64_t completed_sequence = -1;
  TimeNs completed_ns = 0;
};

// A communicator named by a string (the trace model's) as watch data's number: FNV-1a, the same
// in every process.
uint64_t CommunicatorHash(std::string_view name);

// The time covered by the collectives' kernels (their union): a step's comm_kernel_ns.
TimeNs CommunicationKernelTime(const std::vector<CollectiveArrival>& collectives);

// The step summaries of one worker's steps and collectives, on its own clock: a collective
// belongs to the step its host launch falls in. What an agent sends for a rank.
std::vector<StepSummary> SummarizeSteps(const WorkerTrace& worker);

}  // namespace podscope::common
