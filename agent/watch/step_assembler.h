// One probed rank's watch data made into step summaries (docs/watch.md). The probe
// flushes finished collectives and the steps the process marked; this decides which steps they
// belong to. Pure: no threads, no clock but the probe's `now` of each flush.
//
// Steps come from the process's marks (podscope/step.h) while it sends them. Otherwise they are
// inferred from the period of the collective sequence of its busiest communicator: the
// smallest P such that the last few periods repeat the same (op, bytes) pattern and one phase
// of the period always follows a longer pause than every other phase (the forward pass and the
// optimizer, which launch no collective). Step n then runs from the collective with sequence
// phase + n*P to the one with phase + (n+1)*P. Sequence numbers are the same on every rank of a
// communicator, so every rank numbers its inferred steps alike and the coordinator can compare
// them. An inferred step starts at its first collective rather than at the training loop's
// top: its length is the loop's, its boundaries are shifted.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "common/time_types.h"
#include "common/watch_summary.h"

namespace podscope::agent {

using common::TimeNs;

struct MarkedStep {
  int64_t step = 0;
  TimeNs start_ns = 0;
  TimeNs end_ns = 0;
};

struct StepAssemblerOptions {
  // A step is handed on once the probe's clock is this far past its end: a collective enqueued
  // in it may finish, and reach the agent, a flush later.
  TimeNs hold_ns = 1'000'000'000;
  // Marks stop counting when none came for this long (the process stopped marking).
  TimeNs marks_timeout_ns = 30'000'000'000;
  size_t max_pending_collectives = 65'536;
  size_t max_pending_marks = 4'096;
  // Inference: the longest period tried, how many periods must repeat, and by how much the
  // pause before a step must exceed every pause inside one.
  int max_period = 128;
  int confirm_periods = 3;
  // ... and over at least this many collectives (a short window would call four equal
  // collectives per step, seen between two steps, "one per step").
  int min_window = 16;
  double pause_ratio = 1.25;
  size_t max_communicators = 64;
};

struct StepAssemblerCounters {
  uint64_t steps = 0;
  uint64_t dropped_collectives = 0;  // belonged to no step handed on (or over the bound)
  uint64_t dropped_marks = 0;
};

class StepAssembler {
 public:
  explicit StepAssembler(StepAssemblerOptions options = {}) : options_(options) {}

  // One flush: finished collectives in enqueue order, marked steps, and the probe's clock at
  // the flush. Appends the steps now complete to `out` (rank 0: the caller names the rank).
  void Add(const std::vector<common::CollectiveArrival>& collectives,
           const std::vector<MarkedStep>& marks, TimeNs now, std::vector<common::StepSummary>* out);

  // The inferred period (collectives of the anchor communicator per step), if one is locked.
  struct Period {
    uint64_t communicator = 0;
    int64_t collectives = 0;
    int64_t phase = 0;  // sequence number of a step's first collective, modulo `collectives`
  };
  std::optional<Period> period() const { return period_; }
  bool marking() const { return last_mark_ns_ > 0; }
  const StepAssemblerCounters& counters() const { return counters_; }

 private:
  struct Seen {
    int64_t sequence = 0;
    TimeNs enqueue_ns = 0;
    common::CollectiveOp op = common::CollectiveOp::kUnknown;
    int64_t bytes = 0;
  };

  void AddMarked(TimeNs now, std::vector<common::StepSummary>* out);
  void AddInferred(TimeNs now, std::vector<common::StepSummary>* out);
  // The smallest period that explains the recent history of `seen`, if any.
  std::optional<Period> InferPeriod(uint64_t communicator, const std::deque<Seen>& seen) const;
  // Emits the step [start, end) with the pending collectives enqueued in it, and forgets every
  // pending collective enqueued before `end`.
  void Emit(int64_t step, TimeNs start, TimeNs end, std::vector<common::StepSummary>* out);

  const StepAssemblerOptions options_;
  std::deque<common::CollectiveArrival> pending_;  // enqueue order
  std::deque<MarkedStep> marks_;
  TimeNs last_mark_ns_ = 0;
  int64_t last_step_ = INT64_MIN;                 // the newest step handed on
  std::map<uint64_t, std::deque<Seen>> history_;  // per communicator, newest last
  std::optional<Period> period_;
  StepAssemblerCounters counters_;
};

}  // namespace podscope::agent
