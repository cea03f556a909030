// Step-time loss: the step time the job would have saved had some
// workers arrived at every collective with the others, found by replaying the capture's
// dependencies rather than by summing waits (waiting at one gradient bucket often overlaps the
// straggler's own compute for the next, so the sum overstates the cost several times).
//
// The replay keeps every operation's duration and every gap the trace shows, and moves work as
// its dependencies move:
//   - stream order: an operation starts after the one before it on its stream;
//   - cross-stream waits: an operation that started only when an operation on another stream of
//     its worker ended (the optimizer after the last AllReduce) follows that one, and a
//     communication kernel follows the work launched on other streams before it (a gradient
//     bucket's AllReduce after its last backward kernel), as NCCL makes its stream wait;
//   - collectives: nobody finishes before the last arrival, so a participant's kernel ends at the
//     replayed last arrival plus its own transfer;
//   - host-bound work (a stream idle until the host launched) keeps its gap to the last device
//     work before it, as a host that synchronised at the step's end does.
// An excused worker never holds the others: each collective completes at the last arrival among
// the rest (its own kernel still ends no earlier than its own arrival plus its transfer). The
// loss is, per step, the median worker's step span as captured minus as replayed (the what-if
// method of ByteDance's straggler study, OSDI '25).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/capture.h"
#include "coordinator/analysis/communication.h"
#include "coordinator/analysis/steps.h"

namespace podscope::coordinator::analysis {

struct StepLoss {
  int64_t step = 0;
  TimeNs loss_ns = 0;  // median step span as captured minus as replayed
};

struct StepTimeLoss {
  TimeNs loss_ns = 0;           // summed over the steps
  std::vector<StepLoss> steps;  // by step number
};

// Built once per capture; then any number of what-ifs. Keeps references to its arguments.
// Const methods may run on any thread.
class StepReplay {
 public:
  StepReplay(const common::CaptureView& capture, const std::vector<WorkerSteps>& steps,
             const CommunicationReport& communication);

  // The loss to the workers in `excused` (indices in the view) holding collectives. An error
  // when the dependencies do not form an order (collectives matched inconsistently).
  absl::StatusOr<StepTimeLoss> LossOf(const std::vector<uint32_t>& excused) const;

  size_t operations() const { return ops_.size(); }

 private:
  struct Op {
    TimeNs start = 0, end = 0;  // the worker's own clock, as captured
    int32_t stream_pred = -1;   // previous operation on the same stream
    int32_t cross_pred = -1;    // the operation on another stream it waited for
    int32_t launch_pred = -1;   // a communication kernel's: the work launched last before it
    int32_t collective = -1;    // index in communication.collectives when a participant's kernel
    int32_t step = -1;          // index in that worker's steps
    TimeNs wait = 0;            // a participant's wait for the last arrival
  };
  struct Replayed {
    std::vector<TimeNs> start_shift, end_shift;  // replayed minus captured, per operation
  };

  void AddWorker(uint32_t w, const common::CaptureView& capture, const WorkerSteps& steps,
                 const CommunicationReport& communication,
                 const std::vector<int32_t>& collective_of_row);
  absl::StatusOr<Replayed> Replay(const std::vector<uint32_t>& excused) const;

  const std::vector<WorkerSteps>& steps_;
  std::vector<Op> ops_;  // worker by worker, each in start order
  std::vector<uint32_t>
      worker_begin_;  // worker w owns ops_[worker_begin_[w], worker_begin_[w + 1])
  std::vector<uint32_t> participants_;  // per collective: how many operations take part
};

}  // namespace podscope::coordinator::analysis
