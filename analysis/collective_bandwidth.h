// AllReduce time: per collective and per step, bytes, transfer time, algorithm and
// bus bandwidth, efficiency against the link, and the expected gradient AllReduce time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/communication.h"
#include "analysis/steps.h"
#include "common/capture.h"

namespace podscope::analysis {

struct BandwidthOptions {
  double link_gbytes_per_s = 0;  // link bandwidth, GB/s; 0: efficiency not computed
  int64_t params = 0;            // model parameters; 0: no expected time
  int32_t bytes_per_param = 4;
};

// busbw / algbw for an op over n ranks: 2(n-1)/n AllReduce, (n-1)/n AllGather and
// ReduceScatter, 1 Broadcast and Reduce (and anything else).
double BusBandwidthFactor(common::CollectiveOp op, int32_t nranks);

struct CollectiveBandwidth {
  std::string communicator;
  common::CollectiveOp op = common::CollectiveOp::kUnknown;
  int64_t sequence = 0;
  int64_t step = -1;  // step of the first participant's launch, -1 if none
  int64_t bytes = 0;
  int32_t nranks = 0;
  TimeNs transfer_ns = 0;         // median over participants
  double algbw_gbytes_per_s = 0;  // GB/s (1e9 bytes per second)
  double busbw_gbytes_per_s = 0;
  double efficiency = 0;  // busbw / link bandwidth, 0 when no link is given
};

struct StepCollectiveTime {
  int64_t step = 0;
  int64_t bytes = 0;
  TimeNs transfer_ns = 0;
  TimeNs allreduce_transfer_ns = 0;
  int64_t allreduce_bytes = 0;
  double busbw_gbytes_per_s = 0;  // bytes-weighted over the step's collectives
  double efficiency = 0;          // busbw_gbytes_per_s against the link bandwidth (0 without one)
  int64_t other_bytes =
      0;  // bytes of the step's collectives that are not AllReduce (AllToAll, ...)
};

struct BandwidthReport {
  double link_gbytes_per_s = 0;
  // Over the collectives that moved data (statistics.h's Median): the one figure every view
  // gives for "the bus bandwidth" of a capture.
  std::optional<double> median_busbw_gbytes_per_s;  // none when no collective moved data
  std::optional<double> median_efficiency;          // none without a link bandwidth too
  std::vector<CollectiveBandwidth> collectives;
  std::vector<StepCollectiveTime> steps;
  // Expected vs measured gradient AllReduce per step (when params and link are given).
  std::optional<TimeNs> expected_allreduce_ns;
  TimeNs measured_allreduce_ns = 0;  // median over steps of the summed AllReduce transfer
};

// Pure; any thread.
BandwidthReport ComputeBandwidth(const common::CaptureView& capture,
                                 const std::vector<WorkerSteps>& steps,
                                 const CommunicationReport& communication,
                                 const BandwidthOptions& options);

}  // namespace podscope::analysis
