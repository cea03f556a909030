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
#include "analysis/communication.h"
#include "analysis/steps.h"
#include "common/capture.h"

namespace podscope::analysis {

struct StepLoss {
  int64_t step = 0;
  TimeNs loss_ns = 0;  // median step span as captured minus as replayed
};

struct StepTimeLoss {
  TimeNs loss_ns = 0;           // summed over the steps
  std::vector<StepLoss> steps;  // by step number
};

// Built once per capture, whole or a worker at a time; then any number of what-ifs. Keeps a
// reference to the communication report. Const methods may run on any thread.
//
// Most of a worker's operations only follow the one before them on their stream (a run of
// kernels launched back to back), and a replay moves such a run as one: each shifts as its
// predecessor ends. So a run within one step, that nothing else depends on before its end, is
// kept as one operation spanning it. The replay's answers are the same to the nanosecond; it
// holds tens of operations a step instead of thousands.
class StepReplay {
 public:
  enum class Runs : uint8_t {
    kMerged,  // what the reports use
    kKept,    // every operation apart, to check the merged replay against
  };

  StepReplay(const common::CaptureView& capture, const std::vector<WorkerSteps>& steps,
             const CommunicationReport& communication, Runs runs = Runs::kMerged);
  // For a capture read a worker at a time: AddWorker once for every worker of `communication`,
  // in its order, with FindSteps' steps for it (their per-row step indices too).
  explicit StepReplay(const CommunicationReport& communication, Runs runs = Runs::kMerged);
  void AddWorker(const common::WorkerTrace& trace, const WorkerSteps& steps);

  // The loss to the workers in `excused` (indices in the view) holding collectives. An error
  // when the dependencies do not form an order (collectives matched inconsistently), or when a
  // worker was not added.
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

  void MergeRuns(size_t first);  // over ops_[first, end): one worker's
  absl::StatusOr<Replayed> Replay(const std::vector<uint32_t>& excused) const;

  const CommunicationReport& communication_;
  Runs runs_;
  // Per worker: each collective row's index in communication_.collectives, or -1.
  std::vector<std::vector<int32_t>> collective_of_row_;
  std::vector<std::vector<int64_t>> step_numbers_;  // per worker, by step index
  std::vector<Op> ops_;                             // worker by worker, each in start order
  std::vector<uint32_t>
      worker_begin_;  // worker w owns ops_[worker_begin_[w], worker_begin_[w + 1])
  std::vector<uint32_t> participants_;  // per collective: how many operations take part
};

}  // namespace podscope::analysis
