// The workload model (workload_model.h) at the grain of watch data: per rank and step, the step
// span and each bucket's AllReduce (enqueue, arrival, end), without the events in between. Each
// run of kernels is one draw of its summed time (the sum of k jittered kernels: mean k*m,
// deviation jitter*m*sqrt(k)), so a step costs a dozen draws per rank instead of hundreds and a
// thousand-rank job runs far faster than real time. Collectives are causal as in the full model.
// Deterministic for a seed. Used by the simulated ranks' watch data and the detector tests.
#pragma once

#include <climits>
#include <cstdint>
#include <vector>

#include "common/watch_summary.h"
#include "sim/workload_model.h"

namespace podscope::sim {

struct Hang {
  int32_t rank = -1;         // -1: none
  TimeNs at_ns = INT64_MAX;  // from this true time on, the rank enters no collective
};

// Step by step, so a long run needs memory for one step only.
class SummaryModel {
 public:
  // Options as for SimulateJob (which must accept them); times are true time, the communicator
  // is "pg:0"'s hash as in the full model.
  explicit SummaryModel(const WorkloadOptions& options, const Hang& hang = {});
  ~SummaryModel();

  // The next step of every rank (by rank). False, with nothing added, once the options' steps
  // are done or the job hung.
  bool Next(std::vector<common::StepSummary>* ranks);

  // Where every rank stands: its last entered and completed collective (true time).
  const std::vector<common::RankProgress>& progress() const { return progress_; }
  bool hung() const { return hung_; }
  TimeNs now() const { return now_; }  // when the last step ended (or the hang began)

 private:
  struct RankState;
  WorkloadOptions o_;
  Hang hang_;
  std::vector<RankState> state_;
  std::vector<common::RankProgress> progress_;
  uint64_t communicator_ = 0;
  int64_t bucket_bytes_ = 0;
  TimeNs transfer_ns_ = 0;
  int32_t step_ = 0;
  bool hung_ = false;
  TimeNs now_ = 0;
};

}  // namespace podscope::sim
