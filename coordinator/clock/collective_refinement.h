// Refining clock models from collectives (docs/life-of-a-capture.md). All ranks leave a collective
// within microseconds of each other, so once every worker's events are on the network-aligned
// clock, what remains between the ends of one collective on different hosts is each host's residual
// clock error. A robust median over many collectives estimates it per clock domain (an agent:
// its workers share one clock), far more sharply than the network exchanges can.
//
// Pure: reads a CaptureView, returns corrections; the scheduler applies them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/capture.h"

namespace podscope::coordinator {

struct CollectiveRefinementOptions {
  // A domain is corrected only with at least this many collectives shared with other domains.
  size_t min_matches = 16;
};

struct DomainCorrection {
  std::string domain;
  // The domain's residual is fitted as a line over the window (an offset and a drift error):
  // add correction_ns to the model's offset and drift_correction_ppb to its drift.
  int64_t correction_ns = 0;
  int64_t drift_correction_ppb = 0;
  int64_t spread_ns = 0;  // median absolute deviation of its residuals from that line
  size_t matches = 0;
  // False when too few matches, or when no offset common to the pod brings this domain's
  // collectives and the others' within their network models' error bounds (then the network
  // model is kept).
  bool applied = false;
};

// `domain[i]` names the clock domain of view.worker(i); its trace's clock is the network model.
// Residuals are taken against the domain's model reference (its workers share one model).
// Corrections have zero mean over the applied domains where that keeps each within its network
// bound, and are shifted together the least that does otherwise: the pod as a whole stays on the
// coordinator's clock as the network placed it; the domains move against each other.
std::vector<DomainCorrection> RefineWithCollectives(
    const common::CaptureView& view, const std::vector<std::string>& domain,
    const CollectiveRefinementOptions& options = {});

}  // namespace podscope::coordinator
