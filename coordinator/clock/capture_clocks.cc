#include "coordinator/clock/capture_clocks.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/capture.h"
#include "coordinator/clock/collective_refinement.h"
#include "spdlog/spdlog.h"

namespace podscope::coordinator {

using storage::CaptureRecord;
using storage::WorkerRecord;

common::ClockModel ModelOverWindow(const ClockFit& fit, common::TimeNs window_start,
                                   int64_t window_duration_ns) {
  common::ClockModel model = fit.model;
  const common::TimeNs start = fit.model.ToLocal(window_start);
  const common::TimeNs stop = fit.model.ToLocal(window_start + window_duration_ns);
  model.error_bound_ns = std::max(fit.ErrorBoundAt(start), fit.ErrorBoundAt(stop));
  return model;
}

void RefineCaptureClocks(storage::TraceStore& store, CaptureRecord& record) {
  std::map<uint32_t, size_t> by_index;
  std::set<std::string> agents;
  for (size_t i = 0; i < record.workers.size(); ++i) {
    by_index[record.workers[i].worker_index] = i;
    if (record.workers[i].clock.source == common::ClockSource::kNetwork)
      agents.insert(record.workers[i].agent_id);
  }
  if (agents.size() < 2) return;
  // The stored events with this (not yet stored) record's network models.
  common::Capture capture;
  std::vector<std::string> domain_by_rank_order;
  absl::Status read = store.ReadWorkers(record.id, [&](uint32_t index, common::WorkerTrace trace) {
    auto it = by_index.find(index);
    if (it == by_index.end()) return absl::OkStatus();
    trace.clock = record.workers[it->second].clock;
    capture.workers.push_back(std::move(trace));
    return absl::OkStatus();
  });
  if (!read.ok()) {
    spdlog::warn("capture {}: clock refinement skipped: {}", record.id,
                 std::string(read.message()));
    return;
  }
  std::map<int32_t, std::string> agent_of_rank;
  for (const WorkerRecord& w : record.workers) agent_of_rank[w.rank] = w.agent_id;
  const common::CaptureView view(capture);
  std::vector<std::string> domains;
  for (size_t i = 0; i < view.size(); ++i)
    domains.push_back(agent_of_rank[view.worker(i).info.rank]);
  std::map<std::string, DomainCorrection> applied;
  size_t few_matches = 0;
  for (DomainCorrection& c : RefineWithCollectives(view, domains)) {
    if (c.applied && !c.domain.empty()) applied.emplace(c.domain, c);
    few_matches += c.matches < CollectiveRefinementOptions().min_matches;
  }
  if (applied.empty()) {
    spdlog::info(
        "capture {}: network clock models kept: of {} agents, {} share too few collectives and the "
        "others' "
        "corrections exceed their network bounds",
        record.id, agents.size(), few_matches);
    return;
  }
  ++record.generation;  // cached analyses of the network-aligned capture are stale now
  int64_t largest = 0;
  for (WorkerRecord& w : record.workers) {
    auto it = applied.find(w.agent_id);
    if (it == applied.end() || w.clock.source != common::ClockSource::kNetwork) continue;
    const common::ClockModel network = w.clock;
    w.clock.offset_ns += it->second.correction_ns;
    w.clock.drift_ppb += it->second.drift_correction_ppb;
    w.clock.source = common::ClockSource::kCollective;
    // The window as the worker saw it, on the refined clock.
    for (int64_t* t : {&w.actual_start_ns, &w.actual_stop_ns}) {
      if (*t != 0) *t = w.clock.ToAligned(network.ToLocal(*t));
    }
    // Relative to the pod's common clock, which is what comparing workers needs; the pod as a
    // whole stays where the network placed it.
    w.clock.error_bound_ns = 3 * it->second.spread_ns + 1'000;
    largest = std::max<int64_t>(largest, std::llabs(it->second.correction_ns));
  }
  spdlog::info(
      "capture {}: clocks of {} agents refined from collectives (largest correction {:.1f} us)",
      record.id, applied.size(), largest / 1e3);
}

}  // namespace podscope::coordinator
