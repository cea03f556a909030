#include "analysis/communication.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace podscope::analysis {
namespace {

using common::CollectiveTable;
using common::WorkerTrace;

// Matching key: (communicator, sequence) when the source numbers collectives, else
// (communicator, op, ordinal of this op on this communicator in kernel-start order).
using MatchKey = std::tuple<std::string, int, int64_t>;

}  // namespace

std::string_view ClockBasisName(ClockBasis basis) {
  switch (basis) {
    case ClockBasis::kFittedModels:
      return "fitted_models";
    case ClockBasis::kOneHost:
      return "one_host";
    case ClockBasis::kAsserted:
      return "asserted";
    case ClockBasis::kNotCompared:
      return "not_compared";
  }
  return "not_compared";
}

namespace {

ClockBasis BasisOf(const common::CaptureView& capture, ClockTrust trust) {
  if (trust == ClockTrust::kUnaligned) return ClockBasis::kNotCompared;
  bool all_fitted = capture.size() > 0;
  bool one_host = capture.size() > 0 && !capture.worker(0).info.host.empty();
  for (size_t i = 0; i < capture.size(); ++i) {
    all_fitted &= capture.worker(i).clock.source != common::ClockSource::kNone;
    one_host &= capture.worker(i).info.host == capture.worker(0).info.host;
  }
  if (all_fitted) return ClockBasis::kFittedModels;
  if (one_host || capture.size() <= 1) return ClockBasis::kOneHost;
  return trust == ClockTrust::kAligned ? ClockBasis::kAsserted : ClockBasis::kNotCompared;
}

}  // namespace

bool ClocksComparable(const common::CaptureView& capture, ClockTrust trust) {
  if (trust != ClockTrust::kAuto) return trust == ClockTrust::kAligned;
  if (capture.size() <= 1) return true;
  bool all_fitted = true;
  bool one_host = !capture.worker(0).info.host.empty();
  for (size_t i = 0; i < capture.size(); ++i) {
    const WorkerTrace& w = capture.worker(i);
    all_fitted &= w.clock.source != common::ClockSource::kNone;
    one_host &= w.info.host == capture.worker(0).info.host;
  }
  return all_fitted || one_host;
}

CommunicationReport ComputeCommunication(const common::CaptureView& capture,
                                         const CommunicationOptions& options) {
  CommunicationReport report;
  report.aligned = ClocksComparable(capture, options.clocks);
  report.clock_basis = report.aligned ? BasisOf(capture, options.clocks) : ClockBasis::kNotCompared;
  report.wait.resize(capture.size());
  report.workers.resize(capture.size());

  std::map<MatchKey, MatchedCollective> matched;
  for (size_t w = 0; w < capture.size(); ++w) {
    const WorkerTrace& trace = capture.worker(w);
    report.clock_error_bound_ns = std::max(report.clock_error_bound_ns, trace.clock.error_bound_ns);
    const CollectiveTable& c = trace.collectives;
    report.wait[w].assign(c.size(), 0);
    report.workers[w].rank = trace.info.rank;
    report.workers[w].collectives = c.size();
    std::vector<size_t> order(c.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&c](size_t a, size_t b) { return c.kernel_start[a] < c.kernel_start[b]; });
    std::map<std::pair<common::NameId, int>, int64_t> ordinal;
    for (size_t row : order) {
      const int op = static_cast<int>(c.op[row]);
      const bool sequenced = c.sequence[row] != common::kUnknownSequence;
      const int64_t index = sequenced ? c.sequence[row] : ordinal[{c.communicator[row], op}]++;
      MatchKey key{std::string(trace.strings.Get(c.communicator[row])), sequenced ? -1 : op, index};
      MatchedCollective& m = matched[key];
      if (m.participants.empty()) {
        m.communicator = std::get<0>(key);
        m.op = c.op[row];
        m.sequence = index;
      }
      m.bytes = std::max(m.bytes, c.bytes[row]);
      m.nranks = std::max(m.nranks, c.nranks[row]);
      m.participants.push_back(Participant{static_cast<uint32_t>(w), static_cast<uint32_t>(row),
                                           trace.clock.ToAligned(c.kernel_start[row]),
                                           c.kernel_end[row] - c.kernel_start[row], 0, 0});
    }
  }

  report.collectives.reserve(matched.size());
  for (auto& [key, m] : matched) {
    if (report.aligned) {
      // Nobody progresses before the last arrival.
      TimeNs last = INT64_MIN;
      for (const Participant& p : m.participants) last = std::max(last, p.arrival);
      for (Participant& p : m.participants) p.wait = std::min(last - p.arrival, p.duration);
    } else {
      TimeNs shortest = INT64_MAX;
      for (const Participant& p : m.participants) shortest = std::min(shortest, p.duration);
      for (Participant& p : m.participants) p.wait = p.duration - shortest;
    }
    for (Participant& p : m.participants) {
      p.transfer = p.duration - p.wait;
      report.wait[p.worker][p.row] = p.wait;
      report.workers[p.worker].wait_ns += p.wait;
      report.workers[p.worker].transfer_ns += p.transfer;
    }
    report.collectives.push_back(std::move(m));
  }
  std::sort(report.collectives.begin(), report.collectives.end(),
            [](const MatchedCollective& a, const MatchedCollective& b) {
              TimeNs fa = INT64_MAX, fb = INT64_MAX;
              for (const Participant& p : a.participants) fa = std::min(fa, p.arrival);
              for (const Participant& p : b.participants) fb = std::min(fb, p.arrival);
              return fa < fb;
            });
  return report;
}

}  // namespace podscope::analysis
