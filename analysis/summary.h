// The summary: one screen whatever the number of ranks. The job, its
// steps and their time across workers, the breakdown of the median and the worst worker, the
// stragglers with what they cost, exposed communication, AllReduce bandwidth, and warnings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/breakdown.h"
#include "analysis/collective_bandwidth.h"
#include "analysis/stragglers.h"
#include "common/capture.h"

namespace podscope::analysis {

// One worker's mean step, by category (ms per step in the tables).
struct WorkerProfile {
  int32_t rank = -1;
  std::string host;
  size_t steps = 0;
  TimeNs span_ns = 0, compute_ns = 0, overlap_ns = 0, comm_wait_ns = 0, comm_transfer_ns = 0,
         memcpy_ns = 0, idle_ns = 0, before_ns = 0;
};

struct SummaryReport {
  std::string job;
  size_t ranks = 0, hosts = 0;  // hosts: distinct named hosts (0: the traces name none)
  size_t steps = 0;             // distinct step numbers
  int64_t first_step = 0, last_step = 0;
  std::string step_source;  // of most workers
  // Step spans over every (worker, step).
  TimeNs step_min_ns = 0, step_p50_ns = 0, step_p90_ns = 0, step_max_ns = 0;
  TimeNs window_step_time_ns = 0;  // the median worker's summed step time
  // The worker whose mean step span is the median's, and the worst: the top straggler when there
  // is one (in a synchronous job every worker's step lasts as long), else the longest mean step.
  WorkerProfile median_worker, worst_worker;
  bool worst_is_straggler = false;
  // The median worker's communication not hidden behind computation, per step, and its share
  // of the step; the share of its communication-kernel time that was hidden.
  TimeNs exposed_communication_ns = 0;
  double exposed_communication_share = 0;
  std::optional<double> overlap_pct;  // none without communication kernels
  size_t straggler_count = 0;
  std::vector<Straggler> stragglers;  // the first five, as ranked
  std::optional<TimeNs> step_time_loss_ns;
  size_t collectives = 0;
  std::optional<double> median_busbw_gbytes_per_s;  // collective_bandwidth.h
  double link_gbytes_per_s = 0;                     // 0: not given
  std::optional<double> median_efficiency;
  TimeNs measured_allreduce_ns = 0;
  std::optional<TimeNs> expected_allreduce_ns;
  std::vector<std::string> warnings;
};

// Pure; any thread.
SummaryReport Summarize(const common::CaptureView& capture,
                        const std::vector<WorkerBreakdown>& breakdown,
                        const StragglerReport& stragglers, const BandwidthReport& bandwidth,
                        const std::vector<std::string>& warnings);

}  // namespace podscope::analysis
