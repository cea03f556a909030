// The clocks of one capture's workers (docs/life-of-a-capture.md): the network model frozen over
// the window when a worker's window is over, then, once every worker is in, the refinement of the
// models from the collectives the workers share (docs/live-capture.md, "Clock alignment"). Beside
// the rest of clock alignment; the capture scheduler calls them.
#pragma once

#include "common/clock_model.h"
#include "coordinator/clock/clock_fit.h"
#include "storage/trace_store.h"

namespace podscope::coordinator {

// The fit's model, with the bound that holds over the whole window [window_start, +duration)
// (coordinator clock), wherever the window lies against the fit's samples.
common::ClockModel ModelOverWindow(const ClockFit& fit, common::TimeNs window_start,
                                   int64_t window_duration_ns);

// Collective-based refinement of a finished capture whose workers span several agents: reads
// its stored events, and moves the record's network models (and the workers' windows) where the
// shared collectives place them, within each agent's network bound. Leaves the record as it is
// when fewer than two agents have network models, or no correction is trustworthy.
void RefineCaptureClocks(storage::TraceStore& store, storage::CaptureRecord& record);

}  // namespace podscope::coordinator
