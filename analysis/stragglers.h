// Stragglers: per collective the last arriver and the delay it caused (its
// arrival minus the second-last arrival), summed per worker over the window; plus a robust
// z-score on per-step compute time. Decided on caused delay, never on median lag alone.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analysis/breakdown.h"
#include "analysis/communication.h"
#include "analysis/step_replay.h"
#include "common/capture.h"

namespace podscope::analysis {

struct StragglerOptions {
  // A worker is a straggler by caused delay when all three hold:
  double min_share_of_caused_delay = 0.2;  // of all caused delay (at least 1.5/N, max 0.6)
  double min_share_of_step_time = 0.005;   // of the median worker's summed step time
  double min_last_arriver_share = 0.05;    // of its collectives
  // ... or when its per-step compute time is an outlier among workers:
  double compute_z_threshold = 3.5;  // robust z-score (median absolute deviation)
  double min_compute_excess = 0.02;  // and at least 2% above the median worker
};

// The caused-delay criterion, shared by this report and the online detector (watch/), so both
// decide alike on the same data. With few workers everyone holds a large fair share of the
// caused delay, so the share required is clearly more than fair: at least 1.5/N, at most 60%.
double MinShareOfCausedDelay(size_t workers, double configured);
bool IsCausedDelayStraggler(double share_of_caused_delay, double share_of_step_time,
                            double last_arriver_share, size_t workers,
                            const StragglerOptions& options);

struct WorkerLateness {
  int32_t rank = 0;
  std::string host;
  TimeNs caused_delay_ns = 0;
  size_t last_arrivals = 0;
  size_t collectives = 0;
  double last_arriver_share = 0;
  double compute_z = 0;  // robust z-score of mean per-step compute time
  TimeNs mean_step_ns = 0;
};

// One name (a kernel, host operator, input span or CUDA call) behind a category's growth.
struct NamedExcess {
  std::string name;
  TimeNs worker_ns = 0;  // per step on the straggler
  TimeNs median_ns = 0;  // per step on the median worker
};

// Why a straggler's category was named: its time per step against the median worker's.
struct CategoryEvidence {
  TimeNs worker_ns = 0;
  TimeNs median_ns = 0;
  std::vector<NamedExcess> top;  // what grew most behind it, at most 3
};

struct Straggler {
  int32_t rank = 0;
  uint32_t worker = 0;  // index in the capture view
  std::string host;
  // Ranks stragglers: the waiting this worker alone caused, summed over collectives. Not the
  // cost: waiting at one bucket often overlaps the worker's own compute for the next.
  TimeNs caused_delay_ns = 0;
  // The cost: step time the job would have saved had it arrived with the others (step_replay.h);
  // unknown when the replay found no order.
  std::optional<TimeNs> step_time_loss_ns;
  std::vector<StepLoss> step_losses;  // by step
  double last_arriver_share = 0;
  std::vector<int64_t> steps;  // steps in which it caused delay
  // Where its extra time went: the partition category (breakdown.h; compute and overlap as one,
  // "compute+overlap"; comm_transfer, comm_wait, memcpy, idle_input, idle_launch, idle_host,
  // idle_other, the idle ones with the device idle before each step's span) that grew most per
  // step against the median worker.
  std::string category;
  CategoryEvidence evidence;
  std::string reason;  // "caused_delay" or "compute_outlier"
  TimeNs clock_error_bound_ns = 0;
  double compute_z = 0;
  // Host evidence, when the worker has host samples in the window (-1: none).
  double max_cpu_percent = -1;
  int32_t min_gpu_sm_clock_mhz = -1;
  uint64_t gpu_throttle_reasons = 0;
};

struct StragglerReport {
  bool aligned = false;
  ClockBasis clock_basis = ClockBasis::kNotCompared;
  TimeNs clock_error_bound_ns = 0;  // meaningful when clock_bound_known
  bool clock_bound_known = false;
  TimeNs total_caused_delay_ns = 0;
  TimeNs window_step_time_ns = 0;
  // Step time saved had every straggler arrived with the others (unknown: see loss_error).
  std::optional<TimeNs> step_time_loss_ns;
  std::string loss_error;
  std::vector<Straggler> stragglers;    // most severe first
  std::vector<WorkerLateness> workers;  // every worker, by rank
};

// Pure; any thread. The stages below, over a whole capture.
StragglerReport FindStragglers(const common::CaptureView& capture,
                               const std::vector<WorkerSteps>& steps,
                               const CommunicationReport& communication,
                               const std::vector<WorkerBreakdown>& breakdown,
                               const StragglerOptions& options = {});

// The report in stages, for a capture read a worker at a time:
// 1. From the tables a first pass gathers (`capture` needs each worker's info, collectives and
//    host samples; `steps` the step spans): everything but the names behind each straggler's
//    category and the step-time loss. Pure; any thread.
StragglerReport FindStragglersFromTables(const common::CaptureView& capture,
                                         const std::vector<WorkerSteps>& steps,
                                         const CommunicationReport& communication,
                                         const std::vector<WorkerBreakdown>& breakdown,
                                         const StragglerOptions& options = {});
// 2. When there are stragglers, each worker's time per step by name (kernel, host operator, input
//    span or CUDA call) in the categories they were named by, keyed by category; then the names
//    that grew most on each straggler against the median worker. `workers` in view order.
using NameTimes = absl::flat_hash_map<std::string, double>;
using WorkerNameTimes = std::map<std::string, NameTimes, std::less<>>;
WorkerNameTimes TimeByNameFor(const common::WorkerTrace& trace, const WorkerSteps& steps,
                              const StragglerReport& report);
void AddNamedExcess(const std::vector<WorkerNameTimes>& workers, StragglerReport* report);
// 3. What each straggler cost, and all of them together: the replayed step time without their
//    lateness.
void AddStepTimeLoss(const StepReplay& replay, StragglerReport* report);

}  // namespace podscope::analysis
