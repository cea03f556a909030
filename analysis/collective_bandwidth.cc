#include "analysis/collective_bandwidth.h"

#include <algorithm>
#include <map>

#include "analysis/statistics.h"
#include "analysis/steps.h"

namespace podscope::analysis {

double BusBandwidthFactor(common::CollectiveOp op, int32_t nranks) {
  const double n = std::max(nranks, 1);
  switch (op) {
    case common::CollectiveOp::kAllReduce:
      return 2.0 * (n - 1) / n;
    case common::CollectiveOp::kAllGather:
    case common::CollectiveOp::kReduceScatter:
      return (n - 1) / n;
    default:
      return 1.0;
  }
}

BandwidthReport ComputeBandwidth(const common::CaptureView& capture,
                                 const std::vector<WorkerSteps>& steps,
                                 const CommunicationReport& communication,
                                 const BandwidthOptions& options) {
  BandwidthReport report;
  report.link_gbytes_per_s = options.link_gbytes_per_s;
  const double link_bytes_per_s = options.link_gbytes_per_s * 1e9;
  std::map<int64_t, StepCollectiveTime> by_step;
  std::map<int64_t, double> busbw_weight;
  int32_t allreduce_ranks = 0;
  for (const MatchedCollective& m : communication.collectives) {
    CollectiveBandwidth c;
    c.communicator = m.communicator;
    c.op = m.op;
    c.sequence = m.sequence;
    c.bytes = m.bytes;
    c.nranks = std::max<int32_t>(m.nranks, static_cast<int32_t>(m.participants.size()));
    std::vector<TimeNs> transfers;
    for (const Participant& p : m.participants) transfers.push_back(p.transfer);
    std::nth_element(transfers.begin(), transfers.begin() + transfers.size() / 2, transfers.end());
    c.transfer_ns = transfers[transfers.size() / 2];
    if (c.transfer_ns > 0) {
      c.algbw_gbytes_per_s =
          static_cast<double>(c.bytes) / static_cast<double>(c.transfer_ns);  // B/ns = GB/s
      c.busbw_gbytes_per_s = c.algbw_gbytes_per_s * BusBandwidthFactor(c.op, c.nranks);
      if (link_bytes_per_s > 0) c.efficiency = c.busbw_gbytes_per_s * 1e9 / link_bytes_per_s;
    }
    const Participant& first = m.participants.front();
    const common::WorkerTrace& trace = capture.worker(first.worker);
    const TimeNs at = trace.collectives.enqueue[first.row];
    for (const StepSpan& s : steps[first.worker].steps) {
      if (s.host.start <= at && at < s.host.end) c.step = s.number;
    }
    if (c.step >= 0) {
      StepCollectiveTime& st = by_step[c.step];
      st.step = c.step;
      st.bytes += c.bytes;
      st.transfer_ns += c.transfer_ns;
      busbw_weight[c.step] += c.busbw_gbytes_per_s * static_cast<double>(c.bytes);
      if (c.op == common::CollectiveOp::kAllReduce) {
        st.allreduce_transfer_ns += c.transfer_ns;
        st.allreduce_bytes += c.bytes;
        allreduce_ranks = std::max(allreduce_ranks, c.nranks);
      } else {
        st.other_bytes += c.bytes;
      }
    }
    report.collectives.push_back(std::move(c));
  }
  std::vector<double> busbw, efficiency;
  for (const CollectiveBandwidth& c : report.collectives) {
    if (c.busbw_gbytes_per_s > 0) busbw.push_back(c.busbw_gbytes_per_s);
    if (c.efficiency > 0) efficiency.push_back(c.efficiency);
  }
  if (!busbw.empty()) report.median_busbw_gbytes_per_s = Median(std::move(busbw));
  if (!efficiency.empty()) report.median_efficiency = Median(std::move(efficiency));
  std::vector<TimeNs> allreduce_per_step;
  for (auto& [step, st] : by_step) {
    if (st.bytes > 0) st.busbw_gbytes_per_s = busbw_weight[step] / static_cast<double>(st.bytes);
    if (link_bytes_per_s > 0) st.efficiency = st.busbw_gbytes_per_s * 1e9 / link_bytes_per_s;
    if (st.allreduce_bytes > 0) allreduce_per_step.push_back(st.allreduce_transfer_ns);
    report.steps.push_back(st);
  }
  if (!allreduce_per_step.empty()) {
    std::nth_element(allreduce_per_step.begin(),
                     allreduce_per_step.begin() + allreduce_per_step.size() / 2,
                     allreduce_per_step.end());
    report.measured_allreduce_ns = allreduce_per_step[allreduce_per_step.size() / 2];
  }
  if (options.params > 0 && link_bytes_per_s > 0) {
    // A ring AllReduce of B bytes puts 2(n-1)/n * B on every link.
    const int32_t n = allreduce_ranks > 0
                          ? allreduce_ranks
                          : (capture.size() > 0 ? capture.worker(0).info.world_size : 1);
    const double bytes = static_cast<double>(options.params) * options.bytes_per_param *
                         BusBandwidthFactor(common::CollectiveOp::kAllReduce, std::max(n, 2));
    report.expected_allreduce_ns = static_cast<TimeNs>(bytes / link_bytes_per_s * 1e9);
  }
  return report;
}

}  // namespace podscope::analysis
